// Package corpus reads scoring corpora: JSONL files whose records become
// token ids (docs/scoring.md, "Corpora").
//
// A record with "input_ids" is scored as given; otherwise a record with
// "messages" (and optional "tools") is rendered with the checkpoint's chat
// template, without a generation prompt, and tokenized under the project's
// special-token policy (docs/model.md §5); otherwise its "text" becomes
// BOS + the ordinary encoding of the text (special-token strings stay
// text). Other fields ("id", "kind", "source", …) are allowed; "id" names
// the record in errors.
//
// The package does not cut records into windows (evidence/score does).
package corpus

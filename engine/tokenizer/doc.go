// Package tokenizer encodes text to token ids and decodes ids back to text
// for byte-level BPE tokenizers stored in the Hugging Face tokenizers format
// (tokenizer.json plus tokenizer_config.json), the structure used by the
// LFM2 and LFM2-MoE models.
//
// The package reproduces the ids of the Hugging Face tokenizers library for
// files of that structure: no normalizer; a pre-tokenizer that is one Split
// (behavior Isolated) by a regular expression followed by ByteLevel
// (add_prefix_space false, use_regex false), or ByteLevel alone; a BPE model
// without unknown token, byte fallback, dropout or subword affixes; added
// tokens matched in the raw text before pre-tokenization (leftmost-longest,
// honouring lstrip, rstrip, single_word and normalized as the library does);
// and a ByteLevel decoder. A file that asks for anything else is refused by
// [Load] and [FromJSON] with a [*FormatError] naming the file and the field,
// so a tokenizer that loads is one whose output can be trusted.
//
// The Split regular expression is read from the file. The Llama-3 style
// pattern that LFM2 uses is recognised and run by a hand-written splitter
// (tested against the general engine on the fixture corpora and by fuzzing);
// any other pattern runs on github.com/dlclark/regexp2, which splits about
// forty times slower (encoding as a whole: about ten times). Where
// Oniguruma, the engine behind Hugging Face's Split, and regexp2 differ, the
// hand splitter follows Oniguruma: inside
// (?i:...) the contraction "'s" also matches "'ſ" (U+017F, whose case fold
// is "s"), and letters and numbers assigned in Unicode 15.1 and 16.0 count
// as \p{L} and \p{N} (Go's unicode tables are Unicode 15.0; the extra
// code points were measured against Hugging Face tokenizers 0.23.2, whose
// pre-tokenizer output the hand splitter matched on every code point).
//
// BPE merges are always applied by rank inside each pre-token, also when the
// whole pre-token is itself a vocabulary entry (ignore_merges false), which
// is what LFM2's file asks for; ignore_merges true is honoured as the
// library does.
//
// Encoding options cover the project's special-token policy
// (docs/model.md §5): [EncodeOptions.MatchSpecial] decides whether
// special-token strings in the text become their ids,
// [EncodeOptions.AddBOS] prepends the BOS token unless the encoding
// already starts with it, and [Tokenizer.SplitSpecial] lets the chat
// renderer split a rendered prompt at special tokens and encode the text
// between them as ordinary text. Text that is not valid UTF-8 is encoded
// byte by byte (each invalid byte is classed like U+FFFD by the
// pre-tokenizer), so [Tokenizer.Decode] returns exactly the bytes that
// were encoded.
//
// Decoding is byte-exact: ids map to their bytes, special tokens to their
// content, with no clean-up of spaces and no replacement of invalid UTF-8.
// A [StreamDecoder] turns a stream of generated ids into text that never
// ends inside a multi-byte UTF-8 sequence.
//
// A [Tokenizer] is safe for concurrent use. It keeps a small, bounded cache
// of recently encoded pre-tokens.
//
// The package does not render chat templates, choose stop tokens, truncate
// or pad, and it does not implement other tokenizer kinds (WordPiece,
// Unigram, SentencePiece-style BPE with byte fallback or Metaspace).
package tokenizer

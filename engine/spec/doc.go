// Package spec is prompt-lookup speculation (docs/serving.md §6): drafts
// taken from the request's own prompt and output by n-gram match, and the
// policy that decides how many draft tokens a verify step should carry,
// from the measured acceptance rate and the measured cost of wider steps,
// or whether to draft at all.
//
// It proposes and decides; it does not run the model or sample. The
// scheduler (engine/sched) verifies drafts with one multi-token step,
// accepts them by sampling each position with the ordinary pipeline, and
// rewinds the sequence past the ones it rejects, so output with
// speculation is token for token the output without it.
package spec

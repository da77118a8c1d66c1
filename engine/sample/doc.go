// Package sample turns a position's logits into the next token: the
// sampling pipeline of docs/serving.md §3 (repetition, frequency and
// presence penalties, temperature, min_p, top-k, top-p, logit bias,
// min_tokens) and a seeded Gumbel-max draw keyed by Philox4x32-10 on (seed,
// position, token), so the token at a position depends only on the seed,
// the position and the logits, never on batching or timing.
//
// It does not run the model or decode text.
package sample

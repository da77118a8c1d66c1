// Package prefix is the engine's exact prefix cache
// (docs/serving.md §7): the state of 64-token blocks of earlier
// sequences (KV of the attention layers and the conv state at the
// block's end), keyed by a hash chain over the blocks' token ids, so a
// new request whose prompt starts with the same tokens resumes after
// them instead of computing them again.
//
// It stores and finds blocks and evicts the least recently used; the
// scheduler decides what to register and when, and copies blocks into new
// sequences. Because a resumed sequence holds bit-identical state, its
// output equals a cold run's token for token.
package prefix

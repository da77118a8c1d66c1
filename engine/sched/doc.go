// Package sched is the engine's continuous-batching scheduler
// (docs/serving.md §8): it admits requests first in, first out from a
// bounded queue, and runs steps over the model in which every active
// decode advances one token and at most one prefill chunk is processed,
// decodes first, so a long prompt never stalls running generations for
// long. It samples each sequence's next token with engine/sample and hands
// tokens (and, for scoring, prompt logits) to a per-request Sink.
//
// It knows token ids, not text: detokenization, stop strings, output
// parsing and HTTP are the caller's (engine/api). Every sequence's logits
// are independent of the batch it runs in (the engine's numerics
// contract), so a seeded request gives the same tokens alone or among any
// others.
package sched

// Package draft runs Liquid AI's DSpark drafters (docs/drafting.md): a
// small block drafter that reads the target model's residual stream at a
// few tap layers and proposes the next block_size tokens of a sequence in
// one pass, with a Markov head that drafts left to right and a confidence
// head that predicts which drafts survive.
//
// A Drafter is attached to its target (model.Model.SetDrafter): the
// target's forward hands it the tapped rows, and it keeps its context keys
// and values in the sequence's KV pages, so that they follow the
// sequence through Clone, Rewind, spans and the prefix cache. Propose then
// drafts for a batch of sequences from that context; it shares the
// target's embedding and LM head (a DSpark checkpoint ships neither).
//
// Load reads a drafter as published (config.json and BF16 safetensors) or
// as lfmq quantize --drafter writes it, an lfmq-1 checkpoint whose BFP8
// matrices run as stored (docs/lfmq-1.md, "A drafter"); FromTensors builds
// one from tensors in memory, so that a quantized drafter is measured
// before it is written.
//
// It drafts; it does not verify. engine/sched verifies the drafts with the
// target and keeps only what the target's own sampling agrees with, so
// output with a drafter is token for token the output without it.
package draft

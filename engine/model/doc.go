// Package model runs the LFM2-MoE forward pass (lfm2-moe.md §4) on the CPU
// over a memory-mapped checkpoint: a Hugging Face BF16 checkpoint (single or
// sharded) or an lfmq-1 checkpoint with BFP8/BFP4 weights.
//
// Load maps the weights without expanding them: BF16 matrices are used in
// place over the mapped bytes and BFP matrices are handed to engine/kernels
// as packed tiles; only small tensors (norms, the conv kernel, the expert
// bias) are converted to float32. Every tensor is checked against the
// config's expected shapes.
//
// A Sequence owns the state of one token stream: the KV cache of every
// attention layer and the conv state of every short-conv layer. Forward
// appends tokens to a batch of sequences (prefill of any length, processed
// in chunks, or one-token decode steps) and returns the logits asked for.
//
// Numerics follow DESIGN.md's contract. Every per-token computation depends
// only on that token's row and its own sequence's state, and every sum has
// one fixed order, so a sequence's logits are bit-identical whether it runs
// alone or batched with others, on one thread or many, by prefill in chunks
// of any size or by decode. In particular the sum over a token's routed
// experts is always taken in ascending expert id.
//
// An optional Observer sees the activations calibration needs (router
// decisions, the inputs of every linear and of every expert's projections);
// without one, Forward does no extra work.
//
// The package does not tokenize, sample or schedule requests; those belong
// to the engine packages above it.
package model

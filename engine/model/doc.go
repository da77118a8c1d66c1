// Package model is the LFM2 model families and their forward pass
// (docs/model.md §4): LFM2-MoE, dense LFM2 and LFM3 (docs/lfm3.md), one
// definition whose layers carry what a family adds as data (LFM3's post
// norms, attention output gate, per-kind RoPE and sliding window). It
// holds the weights (Model, Layer, Weights), Forward over
// a batch of sequences, and the per-layer maths, which run on the CPU
// over the memory-mapped checkpoint: BF16 matrices in place over the
// mapped bytes, BFP matrices handed to engine/kernels as packed tiles.
//
// Where a step runs and where a sequence's state lives is a Runner: the
// CPU runner here (its step is the forward over a host workspace, its
// sequences' keys and values in the pages of an engine/kv pool) or a
// device runner (engine/model/devrun). Forward and Sequence call the
// runner and the sequence's SeqState without asking which one they have.
//
// A Sequence owns the state of one token stream: the KV cache of every
// attention layer and the conv state of every short-conv layer. Forward
// appends tokens to a batch of sequences (prefill of any length, processed
// in chunks, or one-token decode steps) and returns the logits asked for.
//
// Numerics follow the contract of docs/design.md §3. Every per-token
// computation depends only on that token's row and its own sequence's
// state, and every sum has one fixed order, so a sequence's logits are
// bit-identical whether it runs alone or batched with others, on one thread
// or many, by prefill in chunks of any size or by decode. In particular the
// sum over a token's routed experts is always taken in ascending expert id.
//
// An optional Observer sees the activations calibration needs (router
// decisions, the inputs of every linear and of every expert's projections);
// without one, Forward does no extra work.
//
// The package does not read checkpoint files (engine/model/load does, and
// calls New), keep the storage formats of the KV cache (engine/kv), or
// tokenize, sample or schedule requests; those belong to the engine
// packages around it.
package model

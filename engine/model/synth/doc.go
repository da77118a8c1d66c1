// Package synth writes synthetic checkpoints of the LFM2-MoE, dense LFM2
// and LFM3 families: seeded random weights in the Hugging Face layout
// (config.json, model-NNNNN-of-NNNNN.safetensors shards in BF16 and their
// model.safetensors.index.json), with the real model's tensor names and
// shapes, for benchmarks and tests that need a model of a real size
// without downloading one.
//
// The weights are random, not trained: they exercise every code path with
// realistic shapes and value ranges (matrices N(0, 1/in), norms near 1, a
// router whose choices spread over the experts), so speed and memory figures
// measured on them hold for a real checkpoint of the same shape, while its
// outputs mean nothing. The package writes no tokenizer.
//
// The bytes written depend only on the Shape and the Seed: every tensor has
// its own random stream, derived from the seed and the tensor's name, so the
// number of workers changes nothing.
//
// The package is not a model of LFM2's weight statistics (no outliers, no
// trained structure): quantization error or scores measured on it say
// nothing about real checkpoints. It never writes into a directory it was
// not given; callers own the cleanup.
package synth

// Package hessian collects the calibration statistics GPTQ needs for the
// routed experts of an LFM2-MoE layer (docs/gptq.md §2–§3): it runs the
// calibration windows through engine/model, keeps the layer's expert
// input and routing per token (Cache), and accumulates, per expert, the
// router-weighted second moments of the w1/w3 input and of the w2 input
// (Stat), the layer's pooled routed statistics, and each expert's
// Hessian shrunk toward the pool.
//
// Accumulation is float64 (float32 activations are widened exactly) with a
// fixed reduction order: rows are summed in fixed chunks whose partial sums
// are added in chunk order, each expert on one goroutine, so the statistics
// are bit-identical for any number of workers or engine threads.
//
// The package does not run the model's maths itself (the engine does, and
// the w2 inputs are recomputed with the engine's own kernels) and does not
// solve anything (quant/gptq does).
package hessian

// Package gptq is the GPTQ solver of docs/gptq.md §4: given the Hessian H
// of a linear layer's inputs and its weight, it quantizes the weight to
// BFP one input index at a time, feeding each step's error back into the
// indices not yet quantized, so that ½·tr(ΔWᵀ H ΔW) is small rather than ‖ΔW‖.
//
// It works in the stored frame of
// docs/lfmq-1.md, "How a BFP tensor is stored": W_tt = Wᵀ [K = in, N =
// out], where GPTQ's "column k" is row k of W_tt and every BFP exponent
// group (16 outputs at one input index) lies inside one such row. A
// Factor holds everything that depends on H only (dead rows, the
// act-order permutation, damping and the triangular factor U with H⁻¹ =
// UᵀU), so matrices that share a Hessian (an expert's w1 and w3) are
// solved against one Factor.
//
// All arithmetic is float64 and every sum has one fixed order: the result
// depends on H, W and the settings only, never on the block size, the
// thread count or the machine (products are written float64(a*b) so no
// platform fuses them into an FMA).
//
// The hot loops (the factorization, the lazy blocks' deferred feedback, the
// in-block updates and Losses) run on the kernels of kernels.go: AVX2 on
// amd64 (AVX-512 for Losses' Gram products where the CPU has it), plain Go
// with -tags purego or elsewhere. They vectorise across independent
// results only, never inside one sum, so every version gives the
// bits of the one-dot-per-entry loops they replace; ref_test.go keeps those
// loops as the reference the tests and benchmarks compare against.
//
// One solve may use several goroutines (Options.Threads, LossesThreads):
// the factor is formed a panel of rows at a time with the rows below each
// panel taking their entries in parallel, the inverse's columns, the
// deferred feedback's rows and Losses' groups of rows are split between
// goroutines. Each value is still computed by one goroutine with the
// serial loop's operations, and every reduction keeps its order, so the
// bits are those of one goroutine. This lets a caller run fewer solves at
// once (each holds a few hundred MB of scratch at real shapes) without
// leaving cores idle.
//
// GPTQ treats the outputs independently given the factor, so a weight too
// large to hold whole (a model's LM head) can be solved and measured band
// by band of outputs (BandSolver, LossStream), every running sum
// continuing across the bands, with the bits of Quantize and Losses on
// the whole matrix.
//
// The package does not collect statistics (quant/hessian does), decide
// fallbacks or write checkpoints (package quant does).
package gptq

// Package kernels holds the compute kernels of lfmq's CPU engine: products of
// a weight matrix with activation vectors over BF16, F32 and Tenstorrent
// BFP8_b/BFP4_b weights, and the float32 vector operations of the LFM2-MoE
// forward pass (RMSNorm, SiLU/SwiGLU, sigmoid, softmax, RoPE, the short-conv
// causal convolution, dot and axpy).
//
// # Products
//
// A Matrix wraps the weight bytes as the checkpoint stores them, without
// copying: BF16 and F32 in the Hugging Face layout [out, in], BFP in the
// lfmq-1 tile layout (docs/lfmq-1.md, "How a BFP tensor is stored", Wᵀ
// [in, out] in 32×32 tiles). BFP weights are decoded exactly to float32
// inside the kernels, one tile row at a time (or one tile, for a batch);
// a whole matrix is never expanded. MatVec, MatMul and MatMulAdd run on
// the calling goroutine; the Pool methods of the same names split the
// outputs over a fixed set of workers.
//
// # Determinism
//
// Every output element is reduced in one fixed order, with one rounding per
// step (a fused multiply-add), so a result does not depend on the batch
// width, on the row's position in the batch, on the thread count, or on
// whether the SIMD or the Go kernels ran:
//
//   - F32/BF16 outputs are dot products over 16 lanes (element i of the
//     16-aligned part into lane i%16), summed by a fixed pairwise tree, then
//     the remaining elements fused in one by one.
//   - BFP outputs are one chain over the input index, k = 0, 1, …, In−1:
//     acc = fma(x[k], w(k, n), acc), w the exact decoded weight.
//
// The Go kernels use fma32, an exact emulation of a float32 fused
// multiply-add (a plain float32(math.FMA(...)) would round twice), so the
// AVX2 kernels and the Go kernels agree bit for bit; the tests check this on
// every shape class, and check the Go kernels against a spec-literal
// reference. Elementwise kernels (Exp, RoPE, RMSNorm) use only basic IEEE
// operations with explicit roundings, so they too give the same bits on
// every platform. The one exception is RoPE's table, built with math.Pow,
// math.Cos and math.Sin, which are deterministic on a platform but not
// promised identical across architectures.
//
// # SIMD
//
// On amd64 the products, Dot and Axpy use AVX2+FMA assembly when the CPU has
// both (detected at run time); elsewhere, with the purego build tag, or on
// older CPUs, the Go kernels run. CGO_ENABLED=0 builds always work. Where
// the CPU also has AVX-512 (F and BW), one-row BFP products run full tiles
// four at a time on AVX-512 kernels (bfp512_amd64.s): eight independent
// accumulator chains instead of two, and for BFP4 one table lookup per 16
// codes instead of a widening and a conversion; products of two to four
// rows run pairs of tiles decoded once, in registers, for the whole batch
// where the inputs and exponents allow (bfp512pairs_amd64.s); otherwise, and for larger batches,
// each tile is decoded once with 512-bit byte operations (tile512_amd64.s)
// and applied to the batch in blocks of up to twelve rows of as equal a
// size as they can be, each block's accumulators in registers for the
// tile. SwiGLU runs 64 elements at a time (swiglu_amd64.s).
// They follow the same reduction order, so the bits do not change.
//
// A one-row BFP product (decode) is bound by reading the weights, so it
// reads them in memory order: for each tile row, a run of up to 64
// consecutive tiles whose 32 columns' accumulators wait in L1 between
// runs, with software prefetch a few tiles ahead, which also crosses the
// 4 KiB pages of a memory-mapped checkpoint where the hardware prefetchers
// stop. Full tiles whose exponents allow it fold the group's power-of-two
// step into x (exact, so the same bits; bfp_amd64.s says when).
//
// # What it is not
//
// The package does not read files, parse safetensors or encode BFP (package
// format does), knows nothing of layers, experts, KV caches or batching
// policy (package engine), and allocates no working memory a caller would
// have to manage: products need only their inputs and outputs. Vector
// lengths are the caller's contract: a mismatch panics, as an index out of
// range does; weight data is validated once, by the Matrix constructors.
package kernels

//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// useSIMD selects the AVX2+FMA kernels. Both extensions are needed: the
// kernels fuse every multiply-add, which is what makes them bit-identical to
// the fma32-based Go kernels. Tests switch it off to run the Go kernels.
var useSIMD = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// useAVX512 adds the AVX-512 BFP row kernels (bfp512_amd64.s,
// bfp512pairs_amd64.s) to the SIMD kernels, where the CPU and the
// operating system support AVX-512 F and BW. It only takes effect with
// useSIMD; tests switch it off to run the AVX2 kernels alone.
var useAVX512 = useSIMD && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW

// Each declaration below is the AVX2 version of the Go function whose name
// ends in Go instead of AVX (ref.go), with the same arguments and bit-identical
// results. The dispatching wrappers in kernels.go check every length before
// calling them: the assembly reads exactly the ranges named here and trusts
// them.

// dotF32AVX returns Σ w[i]·x[i] for i < len(w); x has at least len(w) elements.
//
//go:noescape
func dotF32AVX(w, x []float32) float32

// dotBF16AVX returns Σ bf16(w[i])·x[i] for i < len(w).
//
//go:noescape
func dotBF16AVX(w []uint16, x []float32) float32

// dotF32x4AVX sets dst[r] = Σ_i w[r*stride+i]·x[i] for r < 4, i < len(x).
//
//go:noescape
func dotF32x4AVX(dst *[4]float32, w []float32, stride int, x []float32)

// dotBF16x4AVX sets dst[r] = Σ_i bf16(w[r*stride+i])·x[i] for r < 4, i < len(x).
//
//go:noescape
func dotBF16x4AVX(dst *[4]float32, w []uint16, stride int, x []float32)

// dotF32b4AVX sets dst[b] = Σ_i w[i]·x[b*xStride+i] for b < 4, i < len(w).
//
//go:noescape
func dotF32b4AVX(dst *[4]float32, w []float32, x []float32, xStride int)

// dotBF16b4AVX sets dst[b] = Σ_i bf16(w[i])·x[b*xStride+i] for b < 4, i < len(w).
//
//go:noescape
func dotBF16b4AVX(dst *[4]float32, w []uint16, x []float32, xStride int)

// dotBF16r4b4AVX512 sets acc[4r+b] to the 16 lane sums of
// dotBF16Go(w[r·ws:][:n], x[b·xs:][:n]) before their reduction, for
// r, b < 4 and n a multiple of 16 (dot512_amd64.s; AVX-512 F and BW).
//
//go:noescape
func dotBF16r4b4AVX512(acc *[16][lanes]float32, w []uint16, ws int, x []float32, xs int, n int)

// bfpRow8AVX is bfpRowGo(BFP8, ...): rows r < len(x) of n consecutive
// tiles at t applied to acc[32j:32j+32] for tile j; scale is &bfp8Scale.
// next, the bytes from t to the tiles of the following call, only steers
// prefetching.
//
//go:noescape
func bfpRow8AVX(acc []float32, t []byte, n int, x []float32, scale *[256]float32, next int)

// bfpRow4AVX is bfpRowGo(BFP4, ...); scale is &bfp4Scale.
//
//go:noescape
func bfpRow4AVX(acc []float32, t []byte, n int, x []float32, scale *[256]float32, next int)

// decodeTile8AVX is decodeTileGo(BFP8, ...) for the 1088 bytes at t.
//
//go:noescape
func decodeTile8AVX(dst *[TileSize * TileSize]float32, t []byte, scale *[256]float32)

// decodeTile4AVX is decodeTileGo(BFP4, ...) for the 576 bytes at t.
//
//go:noescape
func decodeTile4AVX(dst *[TileSize * TileSize]float32, t []byte, scale *[256]float32)

// tileFMAAVX is tileFMAGo: rows ≤ 32 tile rows applied to nb ∈ {1, 2, 3} batch rows.
//
//go:noescape
func tileFMAAVX(acc []float32, accStride int, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nb int)

// axpyAVX sets y[i] = fma(a, x[i], y[i]) for i < len(x); len(y) ≥ len(x).
//
//go:noescape
func axpyAVX(a float32, x, y []float32)

// tileFMA6AVX is tileFMAGo with nb = 6·nblk: rows ≤ 32 tile rows applied to
// batch rows in blocks of six.
//
//go:noescape
func tileFMA6AVX(acc []float32, accStride int, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nblk int)

// readXorAVX returns the XOR of the n bytes at p as 64-bit words; n is a
// multiple of 256 (read_amd64.s).
//
//go:noescape
func readXorAVX(p *byte, n int) uint64

// bfpRow4Quads runs full BFP4 tiles four at a time on the fast route while
// every exponent of a quad lies in [lo, lo+width] (mod 256), and returns the
// number of tiles it ran, a multiple of 4 (bfp512_amd64.s).
//
//go:noescape
func bfpRow4Quads(acc []float32, t []byte, n int, x *[TileSize]float32, lo, width, next int, xs *[256]float32) int

// causalConv1Z is causalConv for one token, n channels (a positive
// multiple of 16) from the pointers' first, and k ≥ 2 taps; bias may be nil
// (conv_amd64.s).
//
//go:noescape
func causalConv1Z(v, u, st, w, bias *float32, n, k int)

// tileBitsZ writes, for each of n runs of 32 float32 from x, tileBits'
// largest magnitude and least magnitude minus one to bits[2i] and
// bits[2i+1] (bfp512_amd64.s).
//
//go:noescape
func tileBitsZ(x *float32, n int, bits *[2]uint32)

// bfpRow8Quads is bfpRow4Quads for BFP8 tiles; xs also holds the quad's
// signed codes.
//
//go:noescape
func bfpRow8Quads(acc []float32, t []byte, n int, x *[TileSize]float32, lo, width, next int, xs *[512]float32) int

// bfpRow{4,8}PairsB{2,3,4} run pairs of full BFP tiles for 2, 3 or 4 batch
// rows on the fast route while every exponent of a pair lies in [lo,
// lo+width] (mod 256), and return the number of tiles run, even: batch row
// b's inputs are x[b*xStride:][:32], its accumulators of tile j
// acc[(j*B+b)*32:][:32] (bfp512pairs_amd64.s).
//
//go:noescape
func bfpRow4PairsB2(acc []float32, t []byte, n int, x []float32, xStride, lo, width int, xs *[1024]float32) int

//go:noescape
func bfpRow4PairsB3(acc []float32, t []byte, n int, x []float32, xStride, lo, width int, xs *[1024]float32) int

//go:noescape
func bfpRow4PairsB4(acc []float32, t []byte, n int, x []float32, xStride, lo, width int, xs *[1024]float32) int

//go:noescape
func bfpRow8PairsB2(acc []float32, t []byte, n int, x []float32, xStride, lo, width int, xs *[1024]float32) int

//go:noescape
func bfpRow8PairsB3(acc []float32, t []byte, n int, x []float32, xStride, lo, width int, xs *[1024]float32) int

//go:noescape
func bfpRow8PairsB4(acc []float32, t []byte, n int, x []float32, xStride, lo, width int, xs *[1024]float32) int

// fmaPeakZ runs n iterations of 16 independent 512-bit VFMADD231PS
// (512·n flops) and fmaPeakY n iterations of 12 independent 256-bit ones
// (192·n flops), on registers only: the core's fp32 FMA peak, the
// yardstick of BenchmarkFMAPeak and of BenchmarkMatMul's peak_frac
// (peak_amd64.s). Only the benchmarks call them.
//
//go:noescape
func fmaPeakZ(n int)

//go:noescape
func fmaPeakY(n int)

// mulAddPeakZ runs n iterations of 8 independent pairs of 512-bit VMULPD
// and VADDPD (128·n flops): the core's peak for float64 products and sums
// kept apart, as quant/gptq's kernels keep them (peak_amd64.s). Only
// BenchmarkFMAPeak calls it.
//
//go:noescape
func mulAddPeakZ(n int)

// decodeTile4Z and decodeTile8Z are decodeTileGo(BFP4, ...) and
// decodeTileGo(BFP8, ...) with 512-bit registers; they prefetch the tile
// ahead bytes on from t (tile512_amd64.s).
//
//go:noescape
func decodeTile4Z(dst *[TileSize * TileSize]float32, t []byte, scale *[256]float32, ahead int)

//go:noescape
func decodeTile8Z(dst *[TileSize * TileSize]float32, t []byte, scale *[256]float32, ahead int)

// tileFMAPackedZ is tileFMAGo for nb ∈ [1, 12] batch rows with packed
// accumulators (accStride 32) and 512-bit registers (tile512_amd64.s).
//
//go:noescape
func tileFMAPackedZ(acc []float32, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nb int)

// swiGLUZ is SwiGLU for the first len(gate)&^63 elements with 512-bit
// registers; c is &swiGLUConst (swiglu_amd64.s).
//
//go:noescape
func swiGLUZ(y, gate, up []float32, c *[18]float64)

// accRowsAVX is accRowsGo for len(acc) a multiple of 32 (attn_amd64.s).
//
//go:noescape
func accRowsAVX(acc, p, v []float32, stride int)

// expShiftZ is ExpShift for the first len(x)&^63 elements with 512-bit
// registers; c is &swiGLUConst (expshift_amd64.s).
//
//go:noescape
func expShiftZ(y, x []float32, m float32, c *[18]float64)

// widenBF16RowsAVX is widenBF16RowsGo for d a multiple of 16 (kv_amd64.s).
//
//go:noescape
func widenBF16RowsAVX(dst []float32, src []uint16, d, srcStride, rows int)

// decodeBFP8RowsAVX is decodeBFP8RowsGo except for groups of exponent 255,
// which it decodes as if finite; it returns 1 if it met one, else 0, and
// scale is &bfp8Scale (kv_amd64.s).
//
//go:noescape
func decodeBFP8RowsAVX(dst []float32, src []byte, groups, srcStride, rows int, scale *[256]float32) int

// attnScores4AVX is attnScores4Go for len(q)/4 a multiple of 16 and cnt ≥ 1
// (dot_amd64.s).
//
//go:noescape
func attnScores4AVX(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32)

// maxAVX is Max's SIMD part for len(x) a multiple of 8, at least 8: the
// largest element and a nonzero mask if some element is a NaN (attn_amd64.s).
//
//go:noescape
func maxAVX(x []float32) (m float32, nan int)

// attnScores16Z is attnScores16Go with 512-bit registers, d a multiple of
// 16 and cnt ≥ 1; perm is &scores16Perm (attntile_amd64.s).
//
//go:noescape
func attnScores16Z(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, d int, scale float32, perm *[16]int32)

// colMaxZ is ColMax for len(m) a multiple of 16, a NaN column's result the
// default NaN (attntile_amd64.s).
//
//go:noescape
func colMaxZ(m, x []float32, stride, rows int)

// subColsZ is SubCols for len(m) a multiple of 16 (attntile_amd64.s).
//
//go:noescape
func subColsZ(x []float32, stride, rows int, m []float32)

// colSumZ is colSumGo for len(t) a multiple of 16 and rows ≥ 1
// (attntile_amd64.s).
//
//go:noescape
func colSumZ(t, x []float32, stride, rows int)

// accRows4x64Z is AccumRowsN for 4 accumulators of 64 values and cnt ≥ 1
// (attntile_amd64.s).
//
//go:noescape
func accRows4x64Z(acc []float32, alpha *[4]float32, p []float32, pStride int, v []float32, vStride, cnt int)

// attnScores4BF16RowsZ is AttnScores4BF16Rows' SIMD part for cnt a
// positive multiple of 4 and len(q)/4 a multiple of 16: attnScores4Z on
// bfloat16 keys, each key's four scores stored as a row at sc[j·scStride:];
// it prefetches the keys' rows of pfa and pfb (attn4_amd64.s).
//
//go:noescape
func attnScores4BF16RowsZ(sc []float32, scStride int, keys []uint16, keyStride, cnt int, q []float32, scale float32, pfa, pfb []uint16)

// accRows4BF16RowsZ is AccumRows4BF16Rows' SIMD part for 64 columns of
// each accumulator (accStride floats apart) and cnt ≥ 1: accRows4Z on
// bfloat16 value rows, with head g's weight of row j at
// p[g·pStride+j·pRow]; it prefetches the rows of pf (attn4_amd64.s).
//
//go:noescape
func accRows4BF16RowsZ(acc []float32, accStride int, alpha *[4]float32, p []float32, pStride int, v []uint16, vStride, cnt int, pRow int, pf []uint16)

// attnScores4RowsZ and accRows4RowsZ are attnScores4BF16RowsZ and
// accRows4BF16RowsZ for float32 rows (attn4_amd64.s).
//
//go:noescape
func attnScores4RowsZ(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32, pfa, pfb []float32)

//go:noescape
func accRows4RowsZ(acc []float32, accStride int, alpha *[4]float32, p []float32, pStride int, v []float32, vStride, cnt int, pRow int, pf []float32)

// attnScores4Z is attnScores4Go with 512-bit registers for cnt a positive
// multiple of 4 and len(q)/4 a multiple of 16; perm is &scores16Perm; it
// prefetches the keys' rows of pfa and pfb (attn4_amd64.s).
//
//go:noescape
func attnScores4Z(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32, perm *[16]int32, pfa, pfb []float32)

// accRows4Z is AccumRows4 for 64 columns of each accumulator (accStride
// floats apart) and cnt ≥ 1 (attn4_amd64.s).
//
//go:noescape
func accRows4Z(acc []float32, accStride int, alpha *[4]float32, p []float32, pStride int, v []float32, vStride, cnt int)

//go:build !amd64 || purego

package kernels

import "unsafe"

// useSIMD is false where no assembly is built; it is a variable only so that
// tests can set it on every platform.
var useSIMD = false

// useAVX512 is false where no assembly is built.
var useAVX512 = false

// The SIMD entry points forward to the Go kernels here, so that kernels.go
// compiles everywhere; with useSIMD false they are never called.

func dotF32AVX(w, x []float32) float32           { return dotF32Go(w, x) }
func dotBF16AVX(w []uint16, x []float32) float32 { return dotBF16Go(w, x) }
func dotF32x4AVX(dst *[4]float32, w []float32, stride int, x []float32) {
	dotF32x4Go(dst, w, stride, x)
}
func dotBF16x4AVX(dst *[4]float32, w []uint16, stride int, x []float32) {
	dotBF16x4Go(dst, w, stride, x)
}
func dotF32b4AVX(dst *[4]float32, w []float32, x []float32, xStride int) {
	dotF32b4Go(dst, w, x, xStride)
}
func dotBF16b4AVX(dst *[4]float32, w []uint16, x []float32, xStride int) {
	dotBF16b4Go(dst, w, x, xStride)
}
func dotBF16r4b4AVX512(acc *[16][lanes]float32, w []uint16, ws int, x []float32, xs int, n int) {
	dotBF16r4b4LanesGo(acc, w, ws, x, xs, n)
}
func bfpRow8AVX(acc []float32, t []byte, n int, x []float32, _ *[256]float32, _ int) {
	bfpRowGo(BFP8, acc, t, n, x)
}
func bfpRow4AVX(acc []float32, t []byte, n int, x []float32, _ *[256]float32, _ int) {
	bfpRowGo(BFP4, acc, t, n, x)
}
func decodeTile8AVX(dst *[TileSize * TileSize]float32, t []byte, _ *[256]float32) {
	decodeTileGo(BFP8, dst, t)
}
func decodeTile4AVX(dst *[TileSize * TileSize]float32, t []byte, _ *[256]float32) {
	decodeTileGo(BFP4, dst, t)
}
func tileFMAAVX(acc []float32, accStride int, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nb int) {
	tileFMAGo(acc, accStride, w, x, xStride, rows, nb)
}
func axpyAVX(a float32, x, y []float32) { fmaAxpy(y[:len(x)], a, x) }
func tileFMA6AVX(acc []float32, accStride int, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nblk int) {
	tileFMAGo(acc, accStride, w, x, xStride, rows, 6*nblk)
}

func readXorAVX(p *byte, n int) uint64 { return readXorGo(unsafe.Slice(p, n)) }

func bfpRow4Quads(_ []float32, _ []byte, _ int, _ *[TileSize]float32, _, _, _ int, _ *[256]float32) int {
	return 0
}

func bfpRow8Quads(_ []float32, _ []byte, _ int, _ *[TileSize]float32, _, _, _ int, _ *[512]float32) int {
	return 0
}

func bfpRow4PairsB2(_ []float32, _ []byte, _ int, _ []float32, _, _, _ int, _ *[1024]float32) int {
	return 0
}

func bfpRow4PairsB3(_ []float32, _ []byte, _ int, _ []float32, _, _, _ int, _ *[1024]float32) int {
	return 0
}

func bfpRow4PairsB4(_ []float32, _ []byte, _ int, _ []float32, _, _, _ int, _ *[1024]float32) int {
	return 0
}

func bfpRow8PairsB2(_ []float32, _ []byte, _ int, _ []float32, _, _, _ int, _ *[1024]float32) int {
	return 0
}

func bfpRow8PairsB3(_ []float32, _ []byte, _ int, _ []float32, _, _, _ int, _ *[1024]float32) int {
	return 0
}

func bfpRow8PairsB4(_ []float32, _ []byte, _ int, _ []float32, _, _, _ int, _ *[1024]float32) int {
	return 0
}

func decodeTile4Z(dst *[TileSize * TileSize]float32, t []byte, _ *[256]float32, _ int) {
	decodeTileGo(BFP4, dst, t)
}

func decodeTile8Z(dst *[TileSize * TileSize]float32, t []byte, _ *[256]float32, _ int) {
	decodeTileGo(BFP8, dst, t)
}

func tileFMAPackedZ(acc []float32, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nb int) {
	tileFMAGo(acc, TileSize, w, x, xStride, rows, nb)
}

func swiGLUZ(y, gate, up []float32, _ *[18]float64) {
	for i, g := range gate {
		y[i] = SiLU(g) * up[i]
	}
}

func accRowsAVX(acc, p, v []float32, stride int) { accRowsGo(acc, p, v, stride) }

func expShiftZ(y, x []float32, m float32, _ *[18]float64) {
	for i, v := range x {
		y[i] = Exp(v - m)
	}
}

func widenBF16RowsAVX(dst []float32, src []uint16, d, srcStride, rows int) {
	widenBF16RowsGo(dst, src, d, srcStride, rows)
}

func decodeBFP8RowsAVX(dst []float32, src []byte, groups, srcStride, rows int, _ *[256]float32) int {
	decodeBFP8RowsGo(dst, src, groups, srcStride, rows)
	return 0
}

func attnScores4AVX(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32) {
	attnScores4Go(sc, scStride, keys, keyStride, cnt, q, scale)
}

func maxAVX(x []float32) (float32, int) {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	if m != m {
		return m, 1
	}
	return m, 0
}

func attnScores16Z(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, d int, scale float32, _ *[16]int32) {
	attnScores16Go(sc, scStride, keys, keyStride, cnt, q, d, scale)
}
func colMaxZ(m, x []float32, stride, rows int) { colMaxGo(m, x, stride, rows) }
func subColsZ(x []float32, stride, rows int, m []float32) {
	for r := range rows {
		for i, v := range m {
			x[r*stride+i] -= v
		}
	}
}
func colSumZ(t, x []float32, stride, rows int) { colSumGo(t, x, stride, rows) }
func accRows4x64Z(acc []float32, alpha *[4]float32, p []float32, pStride int, v []float32, vStride, cnt int) {
	for q, a := range alpha {
		Scale(a, acc[q*64:][:64])
	}
	accRowsNGo(acc, 4, p, pStride, v, vStride, cnt)
}

func attnScores4Z(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32, _ *[16]int32, _, _ []float32) {
	attnScores4Go(sc, scStride, keys, keyStride, cnt, q, scale)
}

func accRows4Z(acc []float32, accStride int, alpha *[4]float32, p []float32, pStride int, v []float32, vStride, cnt int) {
	for g, a := range alpha {
		Scale(a, acc[g*accStride:][:64])
		accRowsGo(acc[g*accStride:][:64], p[g*pStride:][:cnt], v, vStride)
	}
}

func attnScores4BF16RowsZ(sc []float32, scStride int, keys []uint16, keyStride, cnt int, q []float32, scale float32, _, _ []uint16) {
	scoreRows(dotBF16b4Go, sc, scStride, keys, keyStride, 0, cnt, q, scale)
}

func attnScores4RowsZ(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32, _, _ []float32) {
	scoreRows(dotF32b4Go, sc, scStride, keys, keyStride, 0, cnt, q, scale)
}

func accRows4BF16RowsZ(acc []float32, accStride int, alpha *[4]float32, p []float32, pStride int, v []uint16, vStride, cnt int, pRow int, _ []uint16) {
	accRows4Ref(acc, accStride, 64, alpha, p, pStride, pRow, v, vStride, cnt)
}

func accRows4RowsZ(acc []float32, accStride int, alpha *[4]float32, p []float32, pStride int, v []float32, vStride, cnt int, pRow int, _ []float32) {
	accRows4Ref(acc, accStride, 64, alpha, p, pStride, pRow, v, vStride, cnt)
}

func tileBitsZ(x *float32, n int, bits *[2]uint32) {
	xs, bs := unsafe.Slice(x, n*TileSize), unsafe.Slice(bits, n)
	for i := range bs {
		bs[i] = tileBits((*[TileSize]float32)(xs[i*TileSize:]))
	}
}

func causalConv1Z(v, u, st, w, bias *float32, n, k int) {
	var b []float32
	if bias != nil {
		b = unsafe.Slice(bias, n)
	}
	causalConvGo(unsafe.Slice(v, n), unsafe.Slice(u, n), unsafe.Slice(st, n*(k-1)), unsafe.Slice(w, n*k), b, 1, n, k, 0, n)
}

package kernels

import "math"

// This file holds the plain Go kernels. Each one is the reference for the
// SIMD kernel of the same name without the Go suffix (stubs_amd64.go) and the
// fallback where no SIMD kernel runs (other architectures, the purego tag, or
// a CPU without AVX2 and FMA). They fix the reduction order that every path
// must follow:
//
//   - F32 and BF16 dot products of length n use 16 lanes: element i < n&^15
//     is added into lane i%16 in increasing i with a fused multiply-add
//     (fma32), the lanes are summed pairwise by reduce16, and the n%16 tail
//     elements are then fused into that sum one by one in increasing i.
//   - BFP products accumulate output n in one chain over the input index k,
//     0 ≤ k < In in increasing order: acc = fma32(x[k], w(k, n), acc), where
//     w is the exactly decoded weight. Padded rows (k ≥ In) are skipped.
//
// Every sum starts from +0, so the accumulators are never −0 and the final
// value does not depend on where the caller's output lives.

// lanes is the number of partial sums of a dot product: two AVX2 registers.
const lanes = 16

// reduce16 sums the 16 lanes in the tree the SIMD kernels use: lanes j and
// j+8, then j and j+4, then j and j+2, then the last two.
func reduce16(a *[lanes]float32) float32 {
	var s8 [8]float32
	for j := range 8 {
		s8[j] = a[j] + a[j+8]
	}
	s4 := [4]float32{s8[0] + s8[4], s8[1] + s8[5], s8[2] + s8[6], s8[3] + s8[7]}
	s2 := [2]float32{s4[0] + s4[2], s4[1] + s4[3]}
	return s2[0] + s2[1]
}

// bf16 widens a bfloat16 bit pattern exactly.
func bf16(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// dotF32Go returns Σ w[i]·x[i] over i < len(w) in the canonical order.
func dotF32Go(w, x []float32) float32 {
	n := len(w)
	x = x[:n]
	var acc [lanes]float32
	m := n &^ (lanes - 1)
	for i := 0; i < m; i += lanes {
		fmaMul(acc[:], w[i:i+lanes], x[i:i+lanes])
	}
	s := reduce16(&acc)
	for i := m; i < n; i++ {
		s = fma32(w[i], x[i], s)
	}
	return s
}

// dotBF16Go returns Σ bf16(w[i])·x[i] over i < len(w) in the canonical order.
func dotBF16Go(w []uint16, x []float32) float32 {
	n := len(w)
	x = x[:n]
	var acc [lanes]float32
	m := n &^ (lanes - 1)
	var wf [lanes]float32
	for i := 0; i < m; i += lanes {
		for l, b := range (*[lanes]uint16)(w[i:]) {
			wf[l] = bf16(b)
		}
		fmaMul(acc[:], wf[:], x[i:i+lanes])
	}
	s := reduce16(&acc)
	for i := m; i < n; i++ {
		s = fma32(bf16(w[i]), x[i], s)
	}
	return s
}

// dotF32x4Go sets dst[r] to the dot product of x with row r of w, the rows
// starting stride elements apart, each len(x) long.
func dotF32x4Go(dst *[4]float32, w []float32, stride int, x []float32) {
	n := len(x)
	for r := range 4 {
		dst[r] = dotF32Go(w[r*stride:][:n], x)
	}
}

// dotBF16x4Go is dotF32x4Go for BF16 rows.
func dotBF16x4Go(dst *[4]float32, w []uint16, stride int, x []float32) {
	n := len(x)
	for r := range 4 {
		dst[r] = dotBF16Go(w[r*stride:][:n], x)
	}
}

// dotF32b4Go sets dst[b] to the dot product of the row w with the vector of
// len(w) elements starting at x[b*xStride], for b < 4.
func dotF32b4Go(dst *[4]float32, w, x []float32, xStride int) {
	n := len(w)
	for b := range 4 {
		dst[b] = dotF32Go(w, x[b*xStride:][:n])
	}
}

// dotBF16b4Go is dotF32b4Go for a BF16 row.
func dotBF16b4Go(dst *[4]float32, w []uint16, x []float32, xStride int) {
	n := len(w)
	for b := range 4 {
		dst[b] = dotBF16Go(w, x[b*xStride:][:n])
	}
}

// dotBF16r4b4LanesGo is what dotBF16r4b4AVX512 computes, in Go: the 16
// lane sums of dotBF16Go for each of four rows against four inputs over
// their first n elements (n a multiple of 16), before reduce16.
func dotBF16r4b4LanesGo(acc *[16][lanes]float32, w []uint16, ws int, x []float32, xs int, n int) {
	var wf [lanes]float32
	for i := range acc {
		r, b := i/4, i%4
		acc[i] = [lanes]float32{}
		for t := 0; t < n; t += lanes {
			for l, v := range (*[lanes]uint16)(w[r*ws+t:]) {
				wf[l] = bf16(v)
			}
			fmaMul(acc[i][:], wf[:], x[b*xs+t:][:lanes])
		}
	}
}

// decodeRow8 decodes row r of a BFP8 tile into 32 exact float32 weights.
func decodeRow8(dst *[TileSize]float32, t []byte, r int) {
	t = t[:1088]
	g := r + r&16 // group of columns 0..15: face (r/16)·2, row r%16
	for h := range 2 {
		gh := g + 16*h
		scale := bfp8Scale[t[gh]]
		codes := (*[16]byte)(t[64+16*gh:])
		for j, c := range codes {
			v := float32(c&0x7f) * scale
			if c&0x80 != 0 && c != 0x80 {
				v = -v
			}
			dst[16*h+j] = v
		}
	}
}

// decodeRow4 decodes row r of a BFP4 tile into 32 exact float32 weights.
func decodeRow4(dst *[TileSize]float32, t []byte, r int) {
	t = t[:576]
	g := r + r&16
	for h := range 2 {
		gh := g + 16*h
		scale := bfp4Scale[t[gh]]
		codes := (*[8]byte)(t[64+8*gh:])
		for j, c := range codes {
			for n, nib := range [2]byte{c & 0xf, c >> 4} {
				v := float32(nib&7) * scale
				if nib&8 != 0 && nib != 8 {
					v = -v
				}
				dst[16*h+2*j+n] = v
			}
		}
	}
}

// bfpRowGo applies rows r < len(x) ≤ 32 of n consecutive tiles of one tile
// row, the first at t, to their columns: acc[32j+c] = fma32(x[r], w_j(r, c),
// acc[32j+c]) in increasing r, for tile j < n and column c < 32. Called for
// tile rows kt = 0, 1, … in turn it continues each output's chain over k.
func bfpRowGo(f Format, acc []float32, t []byte, n int, x []float32) {
	tb := f.TileBytes()
	var w [TileSize]float32
	for j := range n {
		tile := t[j*tb:]
		a := acc[j*TileSize:][:TileSize]
		for r, xr := range x {
			if f == BFP8 {
				decodeRow8(&w, tile, r)
			} else {
				decodeRow4(&w, tile, r)
			}
			fmaAxpy(a, xr, w[:])
		}
	}
}

// decodeTileGo decodes a whole BFP tile into row-major exact float32 weights.
func decodeTileGo(f Format, dst *[TileSize * TileSize]float32, t []byte) {
	for r := range TileSize {
		row := (*[TileSize]float32)(dst[r*TileSize:])
		if f == BFP8 {
			decodeRow8(row, t, r)
		} else {
			decodeRow4(row, t, r)
		}
	}
}

// tileFMAGo applies the first rows rows of a decoded tile to nb batch rows
// (tileFMA passes at most 3, tileFMA6 multiples of 6): acc_b[c] = fma32(x_b[r], w[r][c], acc_b[c]) for r < rows in
// increasing order, where acc_b = acc[b*accStride:][:32] and
// x_b = x[b*xStride:][:rows].
func tileFMAGo(acc []float32, accStride int, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nb int) {
	for b := range nb {
		a := (*[TileSize]float32)(acc[b*accStride:])
		xb := x[b*xStride:][:rows]
		for r, xr := range xb {
			fmaAxpy(a[:], xr, w[r*TileSize:(r+1)*TileSize])
		}
	}
}

// matMulRef is the specification of every product, written as literally as
// possible and independently of the structured kernels: row b of y is W·x_b
// (or y_b + W·x_b when add is set) with each output reduced in the canonical
// order. Tests compare every fast path against it bit for bit.
func matMulRef(m *Matrix, y, x []float32, batch int, add bool) {
	for b := range batch {
		xb := x[b*m.In:][:m.In]
		yb := y[b*m.Out:][:m.Out]
		for o := range m.Out {
			var s float32
			switch m.Format {
			case F32, BF16:
				var acc [lanes]float32
				main := m.In &^ (lanes - 1)
				for i := range main {
					acc[i%lanes] = fma32(m.At(o, i), xb[i], acc[i%lanes])
				}
				s = reduce16(&acc)
				for i := main; i < m.In; i++ {
					s = fma32(m.At(o, i), xb[i], s)
				}
			default:
				for k := range m.In {
					s = fma32(xb[k], m.At(o, k), s)
				}
			}
			if add {
				yb[o] += s
			} else {
				yb[o] = s
			}
		}
	}
}

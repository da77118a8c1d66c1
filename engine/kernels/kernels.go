package kernels

import "math"

// Dispatch between the SIMD kernels and their Go references. Every wrapper
// first checks (by slicing, which panics on an internal bug rather than
// letting assembly read out of bounds) that the ranges the kernel reads and
// writes exist, then calls the SIMD kernel when useSIMD is set.

func dotF32(w, x []float32) float32 {
	x = x[:len(w)]
	if useSIMD {
		return dotF32AVX(w, x)
	}
	return dotF32Go(w, x)
}

func dotBF16(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	if useSIMD {
		return dotBF16AVX(w, x)
	}
	return dotBF16Go(w, x)
}

func dotF32x4(dst *[4]float32, w []float32, stride int, x []float32) {
	_ = w[3*stride : 3*stride+len(x)]
	if useSIMD {
		dotF32x4AVX(dst, w, stride, x)
		return
	}
	dotF32x4Go(dst, w, stride, x)
}

func dotBF16x4(dst *[4]float32, w []uint16, stride int, x []float32) {
	_ = w[3*stride : 3*stride+len(x)]
	if useSIMD {
		dotBF16x4AVX(dst, w, stride, x)
		return
	}
	dotBF16x4Go(dst, w, stride, x)
}

func dotF32b4(dst *[4]float32, w, x []float32, xStride int) {
	_ = x[3*xStride : 3*xStride+len(w)]
	if useSIMD {
		dotF32b4AVX(dst, w, x, xStride)
		return
	}
	dotF32b4Go(dst, w, x, xStride)
}

func dotBF16b4(dst *[4]float32, w []uint16, x []float32, xStride int) {
	_ = x[3*xStride : 3*xStride+len(w)]
	if useSIMD {
		dotBF16b4AVX(dst, w, x, xStride)
		return
	}
	dotBF16b4Go(dst, w, x, xStride)
}

// dotBF16r4b4 sets dst[4r+b] = dotBF16(w[r·ws:][:n], x[b·xs:][:n]) for
// r, b < 4: sixteen dots of four rows with four inputs, each with the bits
// of its own dotBF16 call. With AVX-512 the 16-aligned part runs on one
// kernel that loads each row and input once for four products; the lanes
// are then reduced and the tail added here, in dotBF16Go's order.
func dotBF16r4b4(dst *[16]float32, w []uint16, ws int, x []float32, xs int, n int) {
	_ = w[3*ws : 3*ws+n]
	_ = x[3*xs : 3*xs+n]
	if !useSIMD || !useAVX512 {
		for i := range dst {
			r, b := i/4, i%4
			dst[i] = dotBF16(w[r*ws:][:n], x[b*xs:])
		}
		return
	}
	m := n &^ (lanes - 1)
	var acc [16][lanes]float32
	if m > 0 {
		dotBF16r4b4AVX512(&acc, w, ws, x, xs, m)
	}
	for i := range dst {
		r, b := i/4, i%4
		s := reduce16(&acc[i])
		wr, xb := w[r*ws:][:n], x[b*xs:][:n]
		for t := m; t < n; t++ {
			s = fma32(bf16(wr[t]), xb[t], s)
		}
		dst[i] = s
	}
}

// bfpRow applies rows r < len(x) ≤ 32 of n consecutive tiles of one tile
// row, starting at t, to the accumulators of their columns, acc[32j:32j+32]
// for tile j. The next call's tiles start next bytes after t; the kernel
// prefetches them, so next only affects speed (prefetches never fault).
func bfpRow(f Format, acc []float32, t []byte, n int, x []float32, next int) {
	var xs [512]float32
	bfpRowRouted(f, acc, t, n, x, next, nil, &xs)
}

// bfpRowRouted is bfpRow with the fast route of x, when r is not nil (a
// product works it out once for all its calls that share x: routes), and
// the AVX-512 kernels' scratch xs, which the caller keeps across calls so
// that it is not cleared for each.
func bfpRowRouted(f Format, acc []float32, t []byte, n int, x []float32, next int, r *rowRoute, xs *[512]float32) {
	if len(x) > TileSize {
		panic("kernels: bfpRow: more than one tile of rows")
	}
	_ = acc[:n*TileSize]
	_ = t[:n*f.TileBytes()]
	switch {
	case !useSIMD:
		bfpRowGo(f, acc, t, n, x)
	case useAVX512 && n >= 4 && len(x) == TileSize:
		if r == nil {
			rt := routeOf(f, (*[TileSize]float32)(x))
			r = &rt
		}
		bfpRowWide(f, acc, t, n, (*[TileSize]float32)(x), next, *r, xs)
	default:
		bfpRowAVX2(f, acc, t, n, x, next)
	}
}

// bfpRowAVX2 is bfpRow on the AVX2 kernels.
func bfpRowAVX2(f Format, acc []float32, t []byte, n int, x []float32, next int) {
	if f == BFP8 {
		bfpRow8AVX(acc, t, n, x, &bfp8Scale, next)
	} else {
		bfpRow4AVX(acc, t, n, x, &bfp4Scale, next)
	}
}

// bfpRowWide is bfpRow for 32 rows with the AVX-512 kernels, which take the
// fast route four tiles at a time; the quads they decline (one tile's
// exponents rule the route out) and the last n%4 tiles run on the AVX2
// kernels. All of them give the bits of bfpRowGo. r is routeOf(f, x); xs
// is the kernels' scratch (bfpRowRouted).
func bfpRowWide(f Format, acc []float32, t []byte, n int, x *[TileSize]float32, next int, r rowRoute, xs *[512]float32) {
	tb := f.TileBytes()
	if !r.ok {
		bfpRowAVX2(f, acc, t, n, x[:], next)
		return
	}
	lo, width := int(r.lo), int(r.width)
	for n > 0 {
		var done int
		if f == BFP8 {
			done = bfpRow8Quads(acc, t, n, x, lo, width, next, xs)
		} else {
			done = bfpRow4Quads(acc, t, n, x, lo, width, next, (*[256]float32)(xs[:256]))
		}
		k := min(n-done, 4) // the quad declined, or the remainder
		if k > 0 {
			// Its prefetches aim at the tiles after it: the rest of
			// this run, or the next run.
			after := next - done*tb
			if done+k < n {
				after = k * tb
			}
			bfpRowAVX2(f, acc[done*TileSize:], t[done*tb:], k, x[:], after)
		}
		done += k
		acc, t, n, next = acc[done*TileSize:], t[done*tb:], n-done, next-done*tb
	}
}

// rowRoute is fastRange's answer for one tile row of a product's inputs.
type rowRoute struct {
	lo, width int16
	ok        bool
}

// routeOf is fastRange as a rowRoute.
func routeOf(f Format, x *[TileSize]float32) rowRoute { return routeOfBits(f, tileBits(x)) }

// fastRange returns the shared exponents E for which the fast route of the
// BFP row kernels is exact with these 32 inputs (bfp_amd64.s): E in [lo,
// lo+width], where lo is the larger of the least E with a normal step
// (7 for BFP8, 3 for BFP4) and bias+1−emin, and lo+width the smaller of
// 254 and bias+254−emax, bias being 133 (BFP8) or 129 (BFP4), emin the
// lowest exponent field of a non-zero input and emax the highest of all;
// ok is false when no E qualifies. It is the check bfpRow8AVX and
// bfpRow4AVX make.
func fastRange(f Format, x *[TileSize]float32) (lo, width int, ok bool) {
	r := routeOf(f, x)
	return int(r.lo), int(r.width), r.ok
}

// tileBits returns the largest of the inputs' magnitudes (their bits
// without the sign) and the least minus one as an unsigned integer, under
// which a zero is the largest value and never the least. A float32's
// exponent field is its magnitude's top bits, so they give emax and emin
// (routeOfBits) without a branch an input; tileBitsZ is the same on 512-bit
// registers.
func tileBits(x *[TileSize]float32) [2]uint32 {
	most, leastM1 := uint32(0), ^uint32(0)
	for _, v := range x {
		m := math.Float32bits(v) &^ (1 << 31)
		most, leastM1 = max(most, m), min(leastM1, m-1)
	}
	return [2]uint32{most, leastM1}
}

// routeOfBits is fastRange from tileBits' answer.
func routeOfBits(f Format, b [2]uint32) rowRoute {
	bias, minE := 129, 3
	if f == BFP8 {
		bias, minE = 133, 7
	}
	emax, emin := int(b[0]>>23), 256 // 256: no non-zero input
	if b[1] != ^uint32(0) {
		emin = int((b[1] + 1) >> 23)
	}
	lo, hi := max(minE, bias+1-emin), min(254, bias+254-emax)
	return rowRoute{int16(lo), int16(hi - lo), lo <= hi}
}

// decodeTile decodes one BFP tile to exact float32 weights, row-major.
func decodeTile(f Format, dst *[TileSize * TileSize]float32, t []byte) {
	decodeTileAhead(f, dst, t, 0)
}

// decodeTileAhead is decodeTile that also prefetches, on the AVX-512
// kernels, the tile ahead bytes on from t (prefetches never fault, so it
// may lie past t's end; ahead only affects speed).
func decodeTileAhead(f Format, dst *[TileSize * TileSize]float32, t []byte, ahead int) {
	t = t[:f.TileBytes()]
	switch {
	case !useSIMD:
		decodeTileGo(f, dst, t)
	case useAVX512 && f == BFP8:
		decodeTile8Z(dst, t, &bfp8Scale, ahead)
	case useAVX512:
		decodeTile4Z(dst, t, &bfp4Scale, ahead)
	case f == BFP8:
		decodeTile8AVX(dst, t, &bfp8Scale)
	default:
		decodeTile4AVX(dst, t, &bfp4Scale)
	}
}

// tileFMAPackedMax is the most batch rows tileFMAPacked takes in one
// call: two accumulator registers each, 24 of the 32 AVX-512 registers.
const tileFMAPackedMax = 12

// tileFMAPacked is tileFMA for nb ∈ [1, tileFMAPackedMax] batch rows whose
// accumulators are packed, acc[32b:32b+32]: the FMAs of tileFMAGo in its
// order, with the tile's rows reused across the nb batch rows from
// registers (tileFMAPackedZ), where the AVX-512 kernels run.
func tileFMAPacked(acc []float32, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nb int) {
	if rows < 0 || rows > TileSize || nb < 1 || nb > tileFMAPackedMax || xStride < rows {
		panic("kernels: tileFMAPacked: bad rows, stride or batch")
	}
	_ = acc[:nb*TileSize]
	_ = x[(nb-1)*xStride : (nb-1)*xStride+rows]
	if useSIMD && useAVX512 {
		tileFMAPackedZ(acc, w, x, xStride, rows, nb)
		return
	}
	tileFMAGo(acc, TileSize, w, x, xStride, rows, nb)
}

// tileFMA applies rows rows of a decoded tile to nb ∈ {1, 2, 3} batch rows.
func tileFMA(acc []float32, accStride int, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nb int) {
	if rows < 0 || rows > TileSize || nb < 1 || nb > 3 {
		panic("kernels: tileFMA: bad rows or batch")
	}
	_ = acc[(nb-1)*accStride : (nb-1)*accStride+TileSize]
	_ = x[(nb-1)*xStride : (nb-1)*xStride+rows]
	if useSIMD {
		tileFMAAVX(acc, accStride, w, x, xStride, rows, nb)
		return
	}
	tileFMAGo(acc, accStride, w, x, xStride, rows, nb)
}

// tileFMA6 applies rows rows of a decoded tile to 6·nblk batch rows, like
// tileFMA with nb = 6·nblk (bit for bit: each accumulator sees the same
// FMAs in the same order) but with the tile's rows reused across six
// batch rows from registers.
func tileFMA6(acc []float32, accStride int, w *[TileSize * TileSize]float32, x []float32, xStride, rows, nblk int) {
	if rows < 0 || rows > TileSize || nblk < 1 || accStride < TileSize || xStride < rows {
		panic("kernels: tileFMA6: bad rows, strides or blocks")
	}
	nb := 6 * nblk
	_ = acc[(nb-1)*accStride : (nb-1)*accStride+TileSize]
	_ = x[(nb-1)*xStride : (nb-1)*xStride+rows]
	if useSIMD {
		tileFMA6AVX(acc, accStride, w, x, xStride, rows, nblk)
		return
	}
	tileFMAGo(acc, accStride, w, x, xStride, rows, nb)
}

// smallRange returns the shared exponents E, [lo, lo+width], for which the
// fast route is exact for every one of batch rows of 32 inputs,
// x[b*xStride:][:32], and whether the AVX-512 small-batch kernels can run
// at all (batch in [2, 4], the kernels on, some E left).
func smallRange(f Format, x []float32, xStride, batch int) (lo, width int, ok bool) {
	if !useSIMD || !useAVX512 || batch < 2 || batch > 4 {
		return 0, 0, false
	}
	_ = x[(batch-1)*xStride : (batch-1)*xStride+TileSize]
	lo, hi := 0, 255
	for b := range batch {
		l, w, ok := fastRange(f, (*[TileSize]float32)(x[b*xStride:]))
		if !ok {
			return 0, 0, false
		}
		lo, hi = max(lo, l), min(hi, l+w)
	}
	return lo, hi - lo, lo <= hi
}

// bfpRowsSmall applies the 32 rows of up to n consecutive tiles of one tile
// row to batch ∈ [2, 4] rows on the AVX-512 kernels, pairs of tiles at a
// time, each tile decoded once for the batch: batch row b's inputs are
// x[b*xStride:][:32] and its accumulators of tile j acc[(j*batch+b)*32:].
// lo and width are smallRange's. It returns how many tiles it ran; the
// caller runs the next one (of a pair whose exponents rule the fast route
// out, or the last) another way.
func bfpRowsSmall(f Format, acc []float32, t []byte, n int, x []float32, xStride, batch, lo, width int) int {
	_ = acc[:n*batch*TileSize]
	_ = t[:n*f.TileBytes()]
	_ = x[(batch-1)*xStride : (batch-1)*xStride+TileSize]
	var xs [1024]float32
	switch {
	case f == BFP4 && batch == 2:
		return bfpRow4PairsB2(acc, t, n, x, xStride, lo, width, &xs)
	case f == BFP4 && batch == 3:
		return bfpRow4PairsB3(acc, t, n, x, xStride, lo, width, &xs)
	case f == BFP4 && batch == 4:
		return bfpRow4PairsB4(acc, t, n, x, xStride, lo, width, &xs)
	case f == BFP8 && batch == 2:
		return bfpRow8PairsB2(acc, t, n, x, xStride, lo, width, &xs)
	case f == BFP8 && batch == 3:
		return bfpRow8PairsB3(acc, t, n, x, xStride, lo, width, &xs)
	case f == BFP8 && batch == 4:
		return bfpRow8PairsB4(acc, t, n, x, xStride, lo, width, &xs)
	}
	panic("kernels: bfpRowsSmall: bad format or batch")
}

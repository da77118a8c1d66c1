package kernels

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

// bfpCol computes one tile column (32 outputs) of a BFP product over the
// inputs x; t starts at the column's first tile.
func bfpCol(f Format, dst *[TileSize]float32, t []byte, rowStride int, x []float32) {
	tb := f.TileBytes()
	if kt := (len(x) + TileSize - 1) / TileSize; kt > 0 {
		_ = t[(kt-1)*rowStride : (kt-1)*rowStride+tb]
	}
	switch {
	case !useSIMD:
		bfpColGo(f, dst, t, rowStride, x)
	case f == BFP8:
		bfpCol8AVX(dst, t, rowStride, x, &bfp8Scale)
	default:
		bfpCol4AVX(dst, t, rowStride, x, &bfp4Scale)
	}
}

// decodeTile decodes one BFP tile to exact float32 weights, row-major.
func decodeTile(f Format, dst *[TileSize * TileSize]float32, t []byte) {
	t = t[:f.TileBytes()]
	switch {
	case !useSIMD:
		decodeTileGo(f, dst, t)
	case f == BFP8:
		decodeTile8AVX(dst, t, &bfp8Scale)
	default:
		decodeTile4AVX(dst, t, &bfp4Scale)
	}
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

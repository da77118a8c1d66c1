package kernels

import "fmt"

// The kernels of decode attention's split tasks (engine/model's
// splitRows): AttnScores4 and AccumRows4 with a block's scores laid out a
// row per key, over float32 rows or with the keys and values read straight
// from a bfloat16 cache's rows and widened in registers. The widening is
// exact, so every result has the bits of the float32 kernels run on
// WidenBF16Rows' output; what changes is that the rows are read once from
// memory instead of being written out as float32 and read again.

// BF16AttnFast reports whether the rows kernels (AttnScores4BF16Rows,
// AccumRows4BF16Rows and their float32 twins) run on SIMD for heads of d
// values. Elsewhere they run their Go references, slower than the
// one-head kernels, so callers keep that path.
func BF16AttnFast(d int) bool { return useSIMD && useAVX512 && d > 0 && d%64 == 0 }

// AttnScores4BF16Rows is AttnScores4 for bfloat16 keys, with the scores
// laid out a row per key: sc[j·scStride+g] = Dot(k_j, q_g)·scale for the
// cnt keys k_j = bf16(keys[j·keyStride:][:d]) and the four query heads q_g
// = q[g·d:][:d], d = len(q)/4, each Dot's bits on the exactly widened key,
// rounded, then multiplied by scale and rounded again; next and vals are
// rows to prefetch, as AttnScores4's (the first 128 bytes of each). A decode
// row's split lays a block's scores out so, the four heads of every KV
// head side by side in one row per key, for the softmax to run down the
// columns of all its query heads at once (ColMax, SubCols, ExpShift,
// ColSum), as the prompt tiles' does.
func AttnScores4BF16Rows(sc []float32, scStride int, keys []uint16, keyStride, cnt int, q []float32, scale float32, next, vals []uint16) {
	attnScores4Rows("AttnScores4BF16Rows", attnScores4BF16RowsZ, dotBF16b4, sc, scStride, keys, keyStride, cnt, q, scale, next, vals)
}

// attnScores4Rows is AttnScores4BF16Rows and AttnScores4Rows for key rows
// of T: z, the SIMD kernel, takes the keys four at a time where it runs,
// and scoreRows the rest.
func attnScores4Rows[T uint16 | float32](name string, z func(sc []float32, scStride int, keys []T, keyStride, cnt int, q []float32, scale float32, pfa, pfb []T),
	dot4 func(dst *[4]float32, w []T, x []float32, xStride int),
	sc []float32, scStride int, keys []T, keyStride, cnt int, q []float32, scale float32, next, vals []T) {
	if cnt <= 0 {
		return
	}
	d := len(q) / 4
	if len(q) != 4*d || d > keyStride || len(keys) < (cnt-1)*keyStride+d || scStride < 4 || len(sc) < (cnt-1)*scStride+4 ||
		(next != nil && len(next) < (cnt-1)*keyStride+1) || (vals != nil && len(vals) < (cnt-1)*keyStride+1) {
		panic(fmt.Sprintf("kernels: %s: %d keys of %d (stride %d) from %d, %d query floats, score rows stride %d of %d, %d and %d to prefetch", name, cnt, d, keyStride, len(keys), len(q), scStride, len(sc), len(next), len(vals)))
	}
	if next == nil {
		next = keys
	}
	if vals == nil {
		vals = keys
	}
	j := 0
	if useSIMD && useAVX512 && d%16 == 0 && d > 0 {
		if n := cnt &^ 3; n > 0 {
			z(sc, scStride, keys, keyStride, n, q, scale, next, vals)
			j = n
		}
	}
	scoreRows(dot4, sc, scStride, keys, keyStride, j, cnt, q, scale)
}

// scoreRows sets the score rows of keys j0 … cnt−1 one key at a time with
// dot4 (dotF32b4, dotBF16b4 or their Go references: Dot's bits, on the
// widened key): the rows kernels' reference, and what the SIMD kernel
// leaves over. Each key's four dots go straight into its row of scores (a
// local array would escape through the function value and be allocated at
// every call).
func scoreRows[T uint16 | float32](dot4 func(dst *[4]float32, w []T, x []float32, xStride int), sc []float32, scStride int, keys []T, keyStride, j0, cnt int, q []float32, scale float32) {
	d := len(q) / 4
	for j := j0; j < cnt; j++ {
		row := (*[4]float32)(sc[j*scStride:])
		dot4(row, keys[j*keyStride:][:d], q, d)
		for g, v := range row {
			row[g] = v * scale
		}
	}
}

// AccumRows4BF16Rows is AccumRows4 for bfloat16 value rows, widened once
// for the four heads, with the weights laid out a row per value row, as
// AttnScores4BF16Rows leaves them: accumulator g (d = len(acc)/4 values) is
// multiplied by alpha[g], then acc[g·d+i] = fma(p[j·pRow+g],
// bf16(v[j·vStride+i]), acc[g·d+i]) for j = 0 … cnt−1 in order. next, when not nil, is
// rows vStride apart (like the values) that the caller reads next, such as
// the next KV head's values: the SIMD kernel prefetches the first 128 bytes
// of each of its cnt rows while it sums, which changes no result.
func AccumRows4BF16Rows(acc []float32, alpha *[4]float32, p []float32, pRow int, v []uint16, vStride, cnt int, next []uint16) {
	accumRows4Rows("AccumRows4BF16Rows", accRows4BF16RowsZ, acc, alpha, p, pRow, v, vStride, cnt, next)
}

// accumRows4Rows is AccumRows4Rows and AccumRows4BF16Rows for value rows
// of T, z their SIMD kernel for 64 columns.
func accumRows4Rows[T uint16 | float32](name string, z func(acc []float32, accStride int, alpha *[4]float32, p []float32, pStride int, v []T, vStride, cnt int, pRow int, pf []T),
	acc []float32, alpha *[4]float32, p []float32, pRow int, v []T, vStride, cnt int, next []T) {
	d := len(acc) / 4
	if len(acc) != 4*d || (cnt > 0 && (d > vStride || len(v) < (cnt-1)*vStride+d || pRow < 4 || len(p) < (cnt-1)*pRow+4 ||
		(next != nil && len(next) < (cnt-1)*vStride+1))) {
		panic(fmt.Sprintf("kernels: %s: 4 accumulators of %d floats, %d rows of %d values (stride %d, %d values), weight rows stride %d of %d, %d to prefetch", name, len(acc), cnt, d, vStride, len(v), pRow, len(p), len(next)))
	}
	if cnt > 0 && useSIMD && useAVX512 && d%64 == 0 && d > 0 {
		if next == nil {
			next = v
		}
		for c := 0; c < d; c += 64 {
			z(acc[c:], d, alpha, p, 1, v[c:], vStride, cnt, pRow, next[min(c, len(next)-1):])
		}
		return
	}
	accRows4Ref(acc, d, d, alpha, p, 1, pRow, v, vStride, cnt)
}

// accRows4Ref is the reference of the four query heads' weighted sums over
// value rows of T (bfloat16, widened exactly, or float32): accumulator g,
// d values at acc[g·accStride:], is multiplied by alpha[g] (skipped where
// it is 1, which changes no bit), then for j = 0 … cnt−1 in order acc =
// fma(p[g·pStride+j·pRow], v_j, acc), v_j row j of v, vStride apart.
func accRows4Ref[T uint16 | float32](acc []float32, accStride, d int, alpha *[4]float32, p []float32, pStride, pRow int, v []T, vStride, cnt int) {
	for g, a := range alpha {
		if a != 1 {
			Scale(a, acc[g*accStride:][:d])
		}
	}
	add := func(j int, row []float32) {
		for g := range 4 {
			fmaAxpy(acc[g*accStride:][:d], p[g*pStride+j*pRow], row)
		}
	}
	switch v := any(v).(type) {
	case []uint16:
		row := make([]float32, d)
		for j := range cnt {
			for i, b := range v[j*vStride:][:d] {
				row[i] = bf16(b)
			}
			add(j, row)
		}
	case []float32:
		for j := range cnt {
			add(j, v[j*vStride:][:d])
		}
	}
}

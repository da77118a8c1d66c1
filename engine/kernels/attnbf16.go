package kernels

import "fmt"

// The kernels of decode attention over a bfloat16 KV cache (engine/model's
// split tasks): AttnScores4 and AccumRows with the keys and values read
// straight from the cache's bfloat16 rows and widened in registers. The
// widening is exact, so every result has the bits of the float32 kernels
// run on WidenBF16Rows' output; what changes is that the rows are read
// once from memory instead of being written out as float32 and read again.

// BF16AttnFast reports whether AttnScores4BF16 and AccumRows4BF16 run on
// SIMD for heads of d values. Elsewhere they run their Go references,
// slower than widening the rows once and running the float32 kernels, so
// callers keep that path.
func BF16AttnFast(d int) bool { return useSIMD && useAVX512 && d > 0 && d%64 == 0 }

// AttnScores4BF16 is AttnScores4 for bfloat16 keys: it sets
// sc[g·scStride+j] = Dot(k_j, q_g)·scale for the cnt keys k_j =
// bf16(keys[j·keyStride:][:d]) and the four query heads q_g = q[g·d:][:d],
// d = len(q)/4, each dot product Dot's bits on the exactly widened keys,
// rounded, then multiplied by scale and rounded again. With AVX-512 and d a
// multiple of 16 it takes four keys at a time: their 16 dot products keep
// their 16 lanes each and are summed in Dot's pairwise order together.
//
// next and vals, when not nil, are rows keyStride apart (like the keys) that
// the caller reads next, such as the block's values and the next head's
// keys: the SIMD kernel prefetches the first 128 bytes of each of their cnt
// rows while it scores, so that they arrive from memory during these sums.
// They change no result.
func AttnScores4BF16(sc []float32, scStride int, keys []uint16, keyStride, cnt int, q []float32, scale float32, next, vals []uint16) {
	if cnt <= 0 {
		return
	}
	d := len(q) / 4
	if len(q) != 4*d || d > keyStride || len(keys) < (cnt-1)*keyStride+d || len(sc) < 3*scStride+cnt || scStride < cnt ||
		(next != nil && len(next) < (cnt-1)*keyStride+1) || (vals != nil && len(vals) < (cnt-1)*keyStride+1) {
		panic(fmt.Sprintf("kernels: AttnScores4BF16: %d keys of %d (stride %d) from %d, %d query floats, scores stride %d of %d, %d and %d to prefetch", cnt, d, keyStride, len(keys), len(q), scStride, len(sc), len(next), len(vals)))
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
			attnScores4BF16Z(sc, scStride, keys, keyStride, n, q, scale, &scores16Perm, next, vals)
			j = n
		}
	}
	// The rest (all of it without AVX-512) one key at a time, on the
	// four-input bfloat16 dot product: Dot's bits on the widened key.
	var d4 [4]float32
	for ; j < cnt; j++ {
		dotBF16b4(&d4, keys[j*keyStride:][:d], q, d)
		for g, v := range d4 {
			sc[g*scStride+j] = v * scale
		}
	}
}

// AttnScores4BF16Rows is AttnScores4BF16 with the scores laid out a row
// per key: sc[j·scStride+g] = Dot(k_j, q_g)·scale for the cnt keys and the
// four query heads, with AttnScores4BF16's bits and prefetches. A decode
// row's split lays a block's scores out so, the four heads of every KV
// head side by side in one row per key, for the softmax to run down the
// columns of all its query heads at once (ColMax, SubCols, ExpShift,
// ColSum), as the prompt tiles' does.
func AttnScores4BF16Rows(sc []float32, scStride int, keys []uint16, keyStride, cnt int, q []float32, scale float32, next, vals []uint16) {
	if cnt <= 0 {
		return
	}
	d := len(q) / 4
	if len(q) != 4*d || d > keyStride || len(keys) < (cnt-1)*keyStride+d || scStride < 4 || len(sc) < (cnt-1)*scStride+4 ||
		(next != nil && len(next) < (cnt-1)*keyStride+1) || (vals != nil && len(vals) < (cnt-1)*keyStride+1) {
		panic(fmt.Sprintf("kernels: AttnScores4BF16Rows: %d keys of %d (stride %d) from %d, %d query floats, score rows stride %d of %d, %d and %d to prefetch", cnt, d, keyStride, len(keys), len(q), scStride, len(sc), len(next), len(vals)))
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
			attnScores4BF16RowsZ(sc, scStride, keys, keyStride, n, q, scale, next, vals)
			j = n
		}
	}
	var d4 [4]float32
	for ; j < cnt; j++ {
		dotBF16b4(&d4, keys[j*keyStride:][:d], q, d)
		for g, v := range d4 {
			sc[j*scStride+g] = v * scale
		}
	}
}

// AccumRows4BF16Rows is AccumRows4BF16 with the weights laid out a row per
// value row, as AttnScores4BF16Rows leaves them: head g's weight of row j
// is p[j·pRow+g]. The bits are AccumRows4BF16's. next, when not nil, is
// rows vStride apart (like the values) that the caller reads next, such as
// the next KV head's values: the SIMD kernel prefetches the first 128 bytes
// of each of its cnt rows while it sums, which changes no result.
func AccumRows4BF16Rows(acc []float32, alpha *[4]float32, p []float32, pRow int, v []uint16, vStride, cnt int, next []uint16) {
	d := len(acc) / 4
	if len(acc) != 4*d || (cnt > 0 && (d > vStride || len(v) < (cnt-1)*vStride+d || pRow < 4 || len(p) < (cnt-1)*pRow+4 ||
		(next != nil && len(next) < (cnt-1)*vStride+1))) {
		panic(fmt.Sprintf("kernels: AccumRows4BF16Rows: 4 accumulators of %d floats, %d rows of %d values (stride %d, %d values), weight rows stride %d of %d, %d to prefetch", len(acc), cnt, d, vStride, len(v), pRow, len(p), len(next)))
	}
	if cnt > 0 && useSIMD && useAVX512 && d%64 == 0 && d > 0 {
		if next == nil {
			next = v
		}
		for c := 0; c < d; c += 64 {
			accRows4BF16RowsZ(acc[c:], d, alpha, p, 1, v[c:], vStride, cnt, pRow, next[min(c, len(next)-1):])
		}
		return
	}
	accRows4BF16RowsGo(acc, alpha, p, pRow, v, vStride, cnt)
}

// accRows4BF16RowsGo is AccumRows4BF16Rows' reference.
func accRows4BF16RowsGo(acc []float32, alpha *[4]float32, p []float32, pRow int, v []uint16, vStride, cnt int) {
	d := len(acc) / 4
	for g, a := range alpha {
		if a != 1 {
			Scale(a, acc[g*d:][:d])
		}
	}
	row := make([]float32, d)
	for j := range cnt {
		for i, b := range v[j*vStride:][:d] {
			row[i] = bf16(b)
		}
		for g := range 4 {
			fmaAxpy(acc[g*d:][:d], p[j*pRow+g], row)
		}
	}
}

// attnScores4BF16Go is AttnScores4BF16's reference: AttnScores4's on the
// widened keys.
func attnScores4BF16Go(sc []float32, scStride int, keys []uint16, keyStride, cnt int, q []float32, scale float32) {
	d := len(q) / 4
	var d4 [4]float32
	for j := range cnt {
		dotBF16b4Go(&d4, keys[j*keyStride:][:d], q, d)
		for g, v := range d4 {
			sc[g*scStride+j] = v * scale
		}
	}
}

// AccumRows4BF16 is AccumRows for the four query heads that read one KV
// head, with bfloat16 value rows and the online softmax's rescale first:
// acc holds four accumulators of d = len(acc)/4 values; accumulator g is
// multiplied by alpha[g] (acc[g·d+i] = fl(acc[g·d+i]·alpha[g]), which
// changes no bit where alpha[g] is 1), then for j = 0, 1, …, cnt−1 in that
// order acc[g·d+i] = fma(p[g·pStride+j], bf16(v[j·vStride+i]), acc[g·d+i]).
// Each value row is read and widened once for the four heads.
func AccumRows4BF16(acc []float32, alpha *[4]float32, p []float32, pStride int, v []uint16, vStride, cnt int) {
	d := len(acc) / 4
	if len(acc) != 4*d || (cnt > 0 && (d > vStride || len(v) < (cnt-1)*vStride+d || pStride < cnt || len(p) < 3*pStride+cnt)) {
		panic(fmt.Sprintf("kernels: AccumRows4BF16: 4 accumulators of %d floats, %d rows of %d values (stride %d, %d values), weights stride %d of %d", len(acc), cnt, d, vStride, len(v), pStride, len(p)))
	}
	if cnt > 0 && useSIMD && useAVX512 && d%64 == 0 && d > 0 {
		// 64 columns of the four accumulators at a time: each column's
		// chain runs over j alone, so the columns may go in any order.
		for c := 0; c < d; c += 64 {
			accRows4BF16Z(acc[c:], d, alpha, p, pStride, v[c:], vStride, cnt)
		}
		return
	}
	accRows4BF16Go(acc, alpha, p, pStride, v, vStride, cnt)
}

// accRows4BF16Go is AccumRows4BF16's reference.
func accRows4BF16Go(acc []float32, alpha *[4]float32, p []float32, pStride int, v []uint16, vStride, cnt int) {
	d := len(acc) / 4
	for g, a := range alpha {
		if a != 1 {
			Scale(a, acc[g*d:][:d])
		}
	}
	row := make([]float32, d)
	for j := range cnt {
		for i, b := range v[j*vStride:][:d] {
			row[i] = bf16(b)
		}
		for g := range 4 {
			fmaAxpy(acc[g*d:][:d], p[g*pStride+j], row)
		}
	}
}

package kernels

import (
	"fmt"
	"math"
)

// The kernels of blocked attention (engine/model's attention): scores of a
// key against four query heads at once, the shifted exponentials of a block
// of scores, and the weighted sum of a block of value rows. Each has one
// order of operations, whichever path runs it.

// Dot4 sets dst[b] to Dot(w, x[b·xStride:][:len(w)]) for b < 4: one key
// against the four query heads that read it, the key loaded once. The
// results are Dot's bits.
func Dot4(dst *[4]float32, w, x []float32, xStride int) {
	dotF32b4(dst, w, x, xStride)
}

// AttnScores4 sets sc[g·scStride+j] = Dot(k_j, q_g)·scale for the cnt keys
// k_j = keys[j·keyStride:][:d] and the four query heads q_g = q[g·d:][:d],
// d = len(q)/4: a block of attention scores for the four heads that read
// one KV head, each dot product Dot's bits, rounded, then multiplied by
// scale and rounded again. The keys are loaded once for the four heads;
// with AVX-512, four keys at a time, whose 16 dot products keep their 16
// lanes each and are summed in Dot's pairwise order together.
//
// next and vals, when not nil, are rows keyStride apart (like the keys) that
// the caller reads next, such as the block's values and the next head's
// keys: the AVX-512 kernel prefetches the first 256 bytes of each of their
// cnt rows while it scores, so that they arrive from memory during these
// sums. They change no result.
func AttnScores4(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32, next, vals []float32) {
	if cnt <= 0 {
		return
	}
	d := len(q) / 4
	if len(q) != 4*d || d > keyStride || len(keys) < (cnt-1)*keyStride+d || len(sc) < 3*scStride+cnt || scStride < cnt ||
		(next != nil && len(next) < (cnt-1)*keyStride+1) || (vals != nil && len(vals) < (cnt-1)*keyStride+1) {
		panic(fmt.Sprintf("kernels: AttnScores4: %d keys of %d (stride %d) from %d, %d query floats, scores stride %d of %d, %d and %d to prefetch", cnt, d, keyStride, len(keys), len(q), scStride, len(sc), len(next), len(vals)))
	}
	if next == nil {
		next = keys
	}
	if vals == nil {
		vals = keys
	}
	if !useSIMD || d%16 != 0 || d == 0 {
		attnScores4Go(sc, scStride, keys, keyStride, cnt, q, scale)
		return
	}
	n := 0
	if useAVX512 {
		if n = cnt &^ 3; n > 0 {
			attnScores4Z(sc, scStride, keys, keyStride, n, q, scale, &scores16Perm, next, vals)
		}
	}
	if n < cnt {
		attnScores4AVX(sc[n:], scStride, keys[n*keyStride:], keyStride, cnt-n, q, scale)
	}
}

// AttnScores4Rows is AttnScores4 with the scores laid out a row per key:
// sc[j·scStride+g] = Dot(k_j, q_g)·scale, with AttnScores4's bits and
// prefetches, as AttnScores4BF16Rows is for bfloat16 keys (a decode row's
// split over float32 rows, in place or decoded from a compact format).
func AttnScores4Rows(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32, next, vals []float32) {
	attnScores4Rows("AttnScores4Rows", attnScores4RowsZ, dotF32b4, sc, scStride, keys, keyStride, cnt, q, scale, next, vals)
}

// AccumRows4Rows is AccumRows4 with the weights laid out a row per value
// row, as AttnScores4Rows leaves them: head g's weight of row j is
// p[j·pRow+g]. The bits are AccumRows4's. next, when not nil, is rows
// vStride apart that the caller reads next: the SIMD kernel prefetches the
// first 256 bytes of each of its cnt rows while it sums.
func AccumRows4Rows(acc []float32, alpha *[4]float32, p []float32, pRow int, v []float32, vStride, cnt int, next []float32) {
	accumRows4Rows("AccumRows4Rows", accRows4RowsZ, acc, alpha, p, pRow, v, vStride, cnt, next)
}

// attnScores4Go is AttnScores4's reference.
func attnScores4Go(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32) {
	d := len(q) / 4
	var d4 [4]float32
	for j := range cnt {
		dotF32b4Go(&d4, keys[j*keyStride:][:d], q, d)
		for g, v := range d4 {
			sc[g*scStride+j] = v * scale
		}
	}
}

// Max returns the largest element of x, which must not be empty: the
// builtin max over x (a NaN if any element is one), except that the sign of
// a zero result and the payload of a NaN result are not specified. Online
// softmax only subtracts the maximum from scores before Exp, where a zero's
// sign changes nothing (Exp(−0) = Exp(+0) = 1).
func Max(x []float32) float32 {
	i := 0
	m := x[0]
	if n := len(x) &^ 7; n > 0 && useSIMD {
		var nan int
		m, nan = maxAVX(x[:n])
		if nan != 0 {
			return float32(math.NaN())
		}
		i = n
	}
	for _, v := range x[i:] {
		m = max(m, v)
	}
	return m
}

// ExpShift sets y[i] = Exp(x[i] − m), the difference rounded to float32
// before the exponential (softmax's max subtraction). With AVX-512 the
// elements run 64 at a time with the same bits (NaN payloads aside). y may
// alias x.
func ExpShift(y, x []float32, m float32) {
	checkLen("ExpShift", len(x), len(y))
	i := 0
	if n := len(x) &^ 63; n > 0 && useSIMD && useAVX512 {
		expShiftZ(y[:n], x[:n], m, &swiGLUConst)
		i = n
	}
	for ; i < len(x); i++ {
		y[i] = Exp(x[i] - m)
	}
}

// AccumRows adds the rows of v weighted by p into acc: for j = 0, 1, …,
// len(p)−1 in that order, acc[i] = fma(p[j], v[j·stride+i], acc[i]), one
// rounding each, which is len(p) calls of Axpy. Row j of v starts at
// j·stride; v must hold the last row's len(acc) values.
func AccumRows(acc, p, v []float32, stride int) {
	if len(p) == 0 {
		return
	}
	last := (len(p) - 1) * stride
	_ = v[last : last+len(acc)]
	if useSIMD && len(acc)%32 == 0 && stride >= 0 {
		accRowsAVX(acc, p, v, stride)
		return
	}
	accRowsGo(acc, p, v, stride)
}

// accRowsGo is AccumRows' reference.
func accRowsGo(acc, p, v []float32, stride int) {
	for j, pj := range p {
		fmaAxpy(acc, pj, v[j*stride:][:len(acc)])
	}
}

// AccumRows4 is AccumRows for the four query heads that read one KV head,
// after the online softmax's rescale: acc holds four accumulators of d =
// len(acc)/4 values; accumulator g is multiplied by alpha[g]
// (acc[g·d+i] = fl(acc[g·d+i]·alpha[g]), which changes no bit where
// alpha[g] is 1), then for j = 0, 1, …, cnt−1 in that order acc[g·d+i] =
// fma(p[g·pStride+j], v[j·vStride+i], acc[g·d+i]). With AVX-512 each value
// row is loaded once for the four heads.
func AccumRows4(acc []float32, alpha *[4]float32, p []float32, pStride int, v []float32, vStride, cnt int) {
	d := len(acc) / 4
	if len(acc) != 4*d || (cnt > 0 && (d > vStride || len(v) < (cnt-1)*vStride+d || pStride < cnt || len(p) < 3*pStride+cnt)) {
		panic(fmt.Sprintf("kernels: AccumRows4: 4 accumulators of %d floats, %d rows of %d values (stride %d, %d floats), weights stride %d of %d", len(acc), cnt, d, vStride, len(v), pStride, len(p)))
	}
	if cnt > 0 && useSIMD && useAVX512 && d%64 == 0 && d > 0 {
		// 64 columns of the four accumulators at a time: each column's
		// chain runs over j alone, so the columns may go in any order.
		for c := 0; c < d; c += 64 {
			accRows4Z(acc[c:], d, alpha, p, pStride, v[c:], vStride, cnt)
		}
		return
	}
	for g, a := range alpha {
		acc := acc[g*d:][:d]
		if a != 1 {
			Scale(a, acc)
		}
		AccumRows(acc, p[g*pStride:][:cnt], v, vStride)
	}
}

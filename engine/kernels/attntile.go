package kernels

import "fmt"

// The kernels of a prompt tile's attention (engine/model's attention): many
// queries (the rows of a tile times the query heads of one KV head) against
// one block of keys and values. Their scores are kept key-major, one row of
// query columns per key, so that the online softmax's per-query steps (the
// maximum over the block, the shifted exponentials, their sum in key order)
// run down the columns with the queries side by side in the vector lanes.
// Every result has the bits of the one-query kernels (Dot, Max, ExpShift,
// AccumRows): only the work is shared.

// TileFast reports whether the tile kernels run on SIMD here. Without it
// they run their Go references, slower than the one-query kernels' SIMD
// paths, so callers keep those.
func TileFast() bool { return useSIMD && useAVX512 }

// AttnScores16 sets sc[j·scStride+l] = Dot(k_j, q_l)·scale for the cnt
// keys k_j = keys[j·keyStride:][:d] and 16 queries q_l of d values (d a
// multiple of 16), each dot product Dot's bits, rounded, then multiplied by
// scale and rounded again (AttnScores4's values, laid out key-major). q
// holds the queries as PackQuery16 writes them: interleaved by 16-value
// chunks, value i of query l at q[(i/16)·256 + l·16 + i%16], so that a
// chunk of one key meets the same chunk of all 16 queries in one stretch of
// memory.
func AttnScores16(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, d int, scale float32) {
	if cnt <= 0 {
		return
	}
	if d <= 0 || d%16 != 0 || d > keyStride || len(q) < 16*d || len(keys) < (cnt-1)*keyStride+d || scStride < 16 || len(sc) < (cnt-1)*scStride+16 {
		panic(fmt.Sprintf("kernels: AttnScores16: %d keys of %d (stride %d) from %d, %d query floats, scores stride %d of %d", cnt, d, keyStride, len(keys), len(q), scStride, len(sc)))
	}
	if useSIMD && useAVX512 {
		attnScores16Z(sc, scStride, keys, keyStride, cnt, q, d, scale, &scores16Perm)
		return
	}
	attnScores16Go(sc, scStride, keys, keyStride, cnt, q, d, scale)
}

// PackQuery16 writes query l < 16 of len(x) values (a multiple of 16) into
// dst in AttnScores16's layout.
func PackQuery16(dst []float32, l int, x []float32) {
	if l < 0 || l >= 16 || len(x)%16 != 0 || len(dst) < 16*len(x) {
		panic(fmt.Sprintf("kernels: PackQuery16: query %d of %d values into %d", l, len(x), len(dst)))
	}
	for c := 0; c < len(x); c += 16 {
		copy(dst[c*16+l*16:][:16], x[c:c+16])
	}
}

// scores16Perm puts attnScores16Z's transposing add tree's results in query
// order: the tree leaves query 4m+k in lane 4k+m.
var scores16Perm = func() (p [16]int32) {
	for q := range p {
		p[q] = int32(4*(q%4) + q/4)
	}
	return p
}()

// attnScores16Go is AttnScores16's reference.
func attnScores16Go(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, d int, scale float32) {
	x := make([]float32, d)
	for l := range 16 {
		for c := 0; c < d; c += 16 {
			copy(x[c:c+16], q[c*16+l*16:][:16])
		}
		for j := range cnt {
			sc[j*scStride+l] = dotF32Go(keys[j*keyStride:][:d], x) * scale
		}
	}
}

// ColMax sets m[c] to the largest of x[r·stride+c] over r < rows (rows ≥
// 1), for c < len(m): the builtin max down each column, a NaN (of
// unspecified payload) if the column has one, and a zero result of either
// sign, as Max.
func ColMax(m, x []float32, stride, rows int) {
	n := len(m)
	if rows <= 0 || n > stride || len(x) < (rows-1)*stride+n {
		panic(fmt.Sprintf("kernels: ColMax: %d columns of %d rows, stride %d, from %d", n, rows, stride, len(x)))
	}
	c := 0
	if useSIMD && useAVX512 {
		c = n &^ 15
		if c > 0 {
			colMaxZ(m[:c], x, stride, rows)
		}
	}
	if c < n {
		colMaxGo(m[c:], x[c:], stride, rows)
	}
}

// colMaxGo is ColMax's reference.
func colMaxGo(m, x []float32, stride, rows int) {
	copy(m, x[:len(m)])
	for r := 1; r < rows; r++ {
		for c, v := range x[r*stride:][:len(m)] {
			m[c] = max(m[c], v)
		}
	}
}

// SubCols sets x[r·stride+c] = x[r·stride+c] − m[c], rounded, for r < rows
// and c < len(m).
func SubCols(x []float32, stride, rows int, m []float32) {
	n := len(m)
	if rows <= 0 {
		return
	}
	if n > stride || len(x) < (rows-1)*stride+n {
		panic(fmt.Sprintf("kernels: SubCols: %d columns of %d rows, stride %d, from %d", n, rows, stride, len(x)))
	}
	c := 0
	if useSIMD && useAVX512 {
		c = n &^ 15
		if c > 0 {
			subColsZ(x, stride, rows, m[:c])
		}
	}
	for r := range rows {
		row := x[r*stride:][:n]
		for i := c; i < n; i++ {
			row[i] -= m[i]
		}
	}
}

// ColSum sets t[c] to the sum of x[r·stride+c] over r < rows, plain
// additions in r order from +0, for c < len(t).
func ColSum(t, x []float32, stride, rows int) {
	n := len(t)
	if rows < 0 || n > stride || (rows > 0 && len(x) < (rows-1)*stride+n) {
		panic(fmt.Sprintf("kernels: ColSum: %d columns of %d rows, stride %d, from %d", n, rows, stride, len(x)))
	}
	c := 0
	if useSIMD && useAVX512 && rows > 0 {
		c = n &^ 15
		if c > 0 {
			colSumZ(t[:c], x, stride, rows)
		}
	}
	if c < n {
		colSumGo(t[c:], x[c:], stride, rows)
	}
}

// colSumGo is ColSum's reference.
func colSumGo(t, x []float32, stride, rows int) {
	clear(t)
	for r := range rows {
		for c, v := range x[r*stride:][:len(t)] {
			t[c] += v
		}
	}
}

// AccumRowsN is AccumRows for n queries at once that share the value rows,
// after a rescale: acc holds n accumulators of d = len(acc)/n values; each
// is first multiplied by its alpha[q] (acc[q·d+i] = fl(acc[q·d+i]·alpha[q]),
// which changes no bit where alpha[q] is 1), then for j = 0, 1, …, cnt−1 in
// that order acc[q·d+i] = fma(p[j·pStride+q], v[j·vStride+i], acc[q·d+i]).
// Each value row is loaded once for the n queries.
func AccumRowsN(acc []float32, n int, alpha, p []float32, pStride int, v []float32, vStride, cnt int) {
	d := 0
	if n > 0 {
		d = len(acc) / n
	}
	if n <= 0 || len(acc) != n*d || len(alpha) != n || (cnt > 0 && (n > pStride || len(p) < (cnt-1)*pStride+n || d > vStride || len(v) < (cnt-1)*vStride+d)) {
		panic(fmt.Sprintf("kernels: AccumRowsN: %d accumulators of %d floats, %d factors, %d rows of %d values (stride %d, %d floats), weights stride %d of %d", n, len(acc), len(alpha), cnt, d, vStride, len(v), pStride, len(p)))
	}
	if cnt <= 0 {
		for q, a := range alpha {
			if a != 1 {
				Scale(a, acc[q*d:][:d])
			}
		}
		return
	}
	if useSIMD && useAVX512 && n == 4 && d == 64 {
		accRows4x64Z(acc, (*[4]float32)(alpha), p, pStride, v, vStride, cnt)
		return
	}
	for q, a := range alpha {
		if a != 1 {
			Scale(a, acc[q*d:][:d])
		}
	}
	switch {
	case useSIMD && d%32 == 0:
		// One query at a time on AccumRows' kernel, its weights
		// gathered 64 rows at a time: each value's chain still runs in
		// j order.
		var pq [64]float32
		for q := range n {
			for j0 := 0; j0 < cnt; j0 += len(pq) {
				m := min(len(pq), cnt-j0)
				for j := range m {
					pq[j] = p[(j0+j)*pStride+q]
				}
				accRowsAVX(acc[q*d:][:d], pq[:m], v[j0*vStride:], vStride)
			}
		}
	default:
		accRowsNGo(acc, n, p, pStride, v, vStride, cnt)
	}
}

// accRowsNGo is AccumRowsN's reference.
func accRowsNGo(acc []float32, n int, p []float32, pStride int, v []float32, vStride, cnt int) {
	d := len(acc) / n
	for j := range cnt {
		row := v[j*vStride:][:d]
		for q := range n {
			fmaAxpy(acc[q*d:][:d], p[j*pStride+q], row)
		}
	}
}

package gptq

// The solver's float64 kernels. Each one vectorises across independent
// results only: every single value is still computed by exactly the
// sequence of roundings the plain loops of the original solver used
// (products rounded before they are added, no FMA, every sum in its
// original order), so the assembly and the Go versions here give the same
// bits, and both give the bytes of the original solver.

// dotLanes4 sets acc[4c+r] = Σ_t a[ao[c]+4t+r]·b[bo[c]+4t+r] over t < quads,
// each a running sum from +0 in t order: the four lane sums of dot for four
// independent pairs of vectors, over their first 4·quads elements.
//
// There is no AVX-512 form: a pair's four lanes are next to each other in
// memory, so a 512-bit register of eight sums needs two pairs' halves put
// together (VINSERTF64X4), a shuffle on the same ports as the multiplies
// and adds it saves. Written that way it measured 2% faster on the
// factor's four-rows calls and 6% slower on the inverse's shifted ones.
func dotLanes4(acc *[16]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int) {
	if useAVX && quads > 0 {
		for c := range 4 {
			// The assembly trusts the ranges; check them here.
			_ = a[ao[c]+4*quads-1]
			_ = b[bo[c]+4*quads-1]
		}
		dotLanes4AVX(acc, a, ao, b, bo, quads)
		return
	}
	dotLanes4Go(acc, a, ao, b, bo, quads)
}

func dotLanes4Go(acc *[16]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int) {
	for c := range 4 {
		x := a[ao[c]:][:4*quads]
		y := b[bo[c]:][:4*quads]
		var s0, s1, s2, s3 float64
		for i := 0; i < len(x); i += 4 {
			s0 += float64(x[i] * y[i])
			s1 += float64(x[i+1] * y[i+1])
			s2 += float64(x[i+2] * y[i+2])
			s3 += float64(x[i+3] * y[i+3])
		}
		acc[4*c], acc[4*c+1], acc[4*c+2], acc[4*c+3] = s0, s1, s2, s3
	}
}

// dotLanes4x4 sets acc[16i+4j+r] = Σ_t a[ao[i]+4t+r]·b[bo[j]+4t+r] over
// t < quads, each a running sum from +0 in t order: dotLanes4 for the
// sixteen pairs of four vectors of a with four of b. Where AVX-512 is
// there its 32 registers hold all sixteen sums, so each quad of a vector
// is read once for four products instead of once for one; elsewhere it is
// four calls of dotLanes4.
func dotLanes4x4(acc *[64]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int) {
	if useAVX512 && quads > 0 {
		for c := range 4 {
			// The assembly trusts the ranges; check them here.
			_ = a[ao[c]+4*quads-1]
			_ = b[bo[c]+4*quads-1]
		}
		dotLanes4x4AVX512(acc, a, ao, b, bo, quads)
		return
	}
	var lanes [16]float64
	var bj [4]int
	for j := range 4 {
		bj = [4]int{bo[j], bo[j], bo[j], bo[j]}
		dotLanes4(&lanes, a, ao, b, &bj, quads)
		for i := range 4 {
			copy(acc[16*i+4*j:16*i+4*j+4], lanes[4*i:4*i+4])
		}
	}
}

// dotLanes4x4Go is what dotLanes4x4 computes, in Go.
func dotLanes4x4Go(acc *[64]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int) {
	for i := range 4 {
		for j := range 4 {
			x := a[ao[i]:][:4*quads]
			y := b[bo[j]:][:4*quads]
			var s0, s1, s2, s3 float64
			for t := 0; t < len(x); t += 4 {
				s0 += float64(x[t] * y[t])
				s1 += float64(x[t+1] * y[t+1])
				s2 += float64(x[t+2] * y[t+2])
				s3 += float64(x[t+3] * y[t+3])
			}
			acc[16*i+4*j], acc[16*i+4*j+1], acc[16*i+4*j+2], acc[16*i+4*j+3] = s0, s1, s2, s3
		}
	}
}

// combine is the end of dot for lane sums s: (s0+s1)+(s2+s3).
func combine(s []float64) float64 { return (s[0] + s[1]) + (s[2] + s[3]) }

// gram8 adds to x[4b+a] the products g[4t+a]·p[(b/4)·4n + 4t + b%4] for
// t < n, one at a time in t order: a running sum that continues from x's
// value (+0 for a fresh sum), so that a sum over a long vector can be
// formed band by band with the bits of one pass. g holds four vectors of
// length n interleaved (element t of vector a at 4t+a), p two such groups
// one after the other: the 4×8 inner products of the four vectors of g
// with the eight of p, each summed strictly in order like dot4.
func gram8(x *[32]float64, g, p []float64, n int) {
	switch {
	case useAVX512 && n > 0:
		_ = g[4*n-1]
		_ = p[8*n-1]
		var t [32]float64
		for b := range 8 {
			t[b], t[8+b], t[16+b], t[24+b] = x[4*b], x[4*b+1], x[4*b+2], x[4*b+3]
		}
		gram8AVX512(&t, g, p, n)
		for b := range 8 {
			x[4*b], x[4*b+1], x[4*b+2], x[4*b+3] = t[b], t[8+b], t[16+b], t[24+b]
		}
	case useAVX && n > 0:
		_ = g[4*n-1]
		_ = p[8*n-1]
		gram8AVX(x, g, p, n)
	default:
		gram8Go(x, g, p, n)
	}
}

// toGramLanes lays out gram8 sums x (blocks of 32: eight groups of four)
// as the AVX-512 gram kernels hold them, t (each block as four runs of
// eight, one per position of the group); fromGramLanes is its inverse.
// len(x) = len(t), a multiple of 32.
func toGramLanes(t, x []float64) {
	for k := 0; k < len(x); k += 32 {
		y, s := x[k:k+32], t[k:k+32]
		for b := range 8 {
			s[b], s[8+b], s[16+b], s[24+b] = y[4*b], y[4*b+1], y[4*b+2], y[4*b+3]
		}
	}
}

// fromGramLanes undoes toGramLanes.
func fromGramLanes(x, t []float64) {
	for k := 0; k < len(x); k += 32 {
		y, s := x[k:k+32], t[k:k+32]
		for b := range 8 {
			y[4*b], y[4*b+1], y[4*b+2], y[4*b+3] = s[b], s[8+b], s[16+b], s[24+b]
		}
	}
}

// gram16 is gram8 for two groups of g at once, g[:4n] and g[4n:8n], against
// the same p: x[:32] for the first, x[32:] for the second. Where AVX-512 is
// there it reads each value of p once for both groups.
func gram16(x *[64]float64, g, p []float64, n int) {
	if useAVX512 && n > 0 {
		_ = g[8*n-1]
		_ = p[8*n-1]
		var t [64]float64
		toGramLanes(t[:], x[:])
		gram16AVX512(&t, g, p, n)
		fromGramLanes(x[:], t[:])
		return
	}
	gram8((*[32]float64)(x[:32]), g[:4*n], p, n)
	gram8((*[32]float64)(x[32:]), g[4*n:8*n], p, n)
}

// gram32 is gram16 for the same two groups of g against two pairs, p[:8n]
// and p[8n:16n]: x[:64] for the first pair (as gram16's x), x[64:] for the
// second. Where AVX-512 is there it reads each value of g once for both
// pairs, with sixteen sums in registers.
func gram32(x *[128]float64, g, p []float64, n int) {
	if useAVX512 && n > 0 {
		_ = g[8*n-1]
		_ = p[16*n-1]
		var t [128]float64
		toGramLanes(t[:], x[:])
		gram32AVX512(&t, g, p, n)
		fromGramLanes(x[:], t[:])
		return
	}
	gram16((*[64]float64)(x[:64]), g, p[:8*n], n)
	gram16((*[64]float64)(x[64:]), g, p[8*n:16*n], n)
}

// gram32Go is gram32 with the Go kernel.
func gram32Go(x *[128]float64, g, p []float64, n int) {
	gram16Go((*[64]float64)(x[:64]), g, p[:8*n], n)
	gram16Go((*[64]float64)(x[64:]), g, p[8*n:16*n], n)
}

// gram16Go is gram16 with the Go kernel.
func gram16Go(x *[64]float64, g, p []float64, n int) {
	gram8Go((*[32]float64)(x[:32]), g[:4*n], p, n)
	gram8Go((*[32]float64)(x[32:]), g[4*n:8*n], p, n)
}

// gram8Go is gram8 in Go: two columns of p per pass over g, so that eight
// independent running sums hide the latency of the adds (one column per
// pass, four sums, is about 1.3 times slower).
func gram8Go(x *[32]float64, g, p []float64, n int) {
	g = g[:4*n]
	p = p[:8*n]
	for b := 0; b < 8; b += 2 {
		q := p[(b/4)*4*n : (b/4+1)*4*n]
		c := b % 4
		s0, s1, s2, s3 := x[4*b], x[4*b+1], x[4*b+2], x[4*b+3]
		u0, u1, u2, u3 := x[4*b+4], x[4*b+5], x[4*b+6], x[4*b+7]
		for t := range n {
			gt := (*[4]float64)(g[4*t:])
			y, z := q[4*t+c], q[4*t+c+1]
			s0 += float64(gt[0] * y)
			s1 += float64(gt[1] * y)
			s2 += float64(gt[2] * y)
			s3 += float64(gt[3] * y)
			u0 += float64(gt[0] * z)
			u1 += float64(gt[1] * z)
			u2 += float64(gt[2] * z)
			u3 += float64(gt[3] * z)
		}
		x[4*b], x[4*b+1], x[4*b+2], x[4*b+3] = s0, s1, s2, s3
		x[4*b+4], x[4*b+5], x[4*b+6], x[4*b+7] = u0, u1, u2, u3
	}
}

// deferredUpdate applies a finished block's error feedback to every later
// row: for rows j in [b1, k) of wp (rows of length out) and each block row
// i in [b0, b1) in order, wp[j] −= U_ij·errs[i−b0] when U_ij ≠ 0. Every
// element sees the same subtractions in the same order as the row-by-row
// loop; the assembly does four rows and eight columns at a time, each
// element still one rounded product and one rounded subtraction per i.
//
// The rows are independent, so they are split into runs of whole groups of
// four (the same groups, from b1, whatever threads is) that up to threads
// goroutines update.
func deferredUpdate(wp, u, errs []float64, k, out, b0, b1, threads int) {
	bs := b1 - b0
	n8 := out &^ 7
	j := b1
	if (k-b1)*out*bs < minParallelWork {
		threads = 1
	}
	if useAVX && n8 > 0 && j+4 <= k {
		// The block's errors by tiles of eight columns (tile t, row i at
		// (t·bs+i)·8) and four columns of U by rows (i at 4i), so that
		// the kernel reads both sequentially.
		ep := getScratch(bs * n8) // every value is written below
		defer putScratch(ep)
		for i := range bs {
			e := errs[i*out : i*out+n8]
			for t := 0; t < n8; t += 8 {
				copy(ep[(t*bs+i*8):(t*bs+i*8)+8], e[t:t+8])
			}
		}
		_ = wp[k*out-1]
		quads := (k - j) / 4
		// At most maxUpdateQuads groups a task: their multipliers are
		// copied out for the whole task.
		per := min(runLength(quads, threads), maxUpdateQuads)
		ups := make([][]float64, min(threads, quads))
		skips := make([][]bool, min(threads, quads))
		// A task's rows take the block's errors band by band of columns
		// (updateBand), so that a band of ep stays in the cache while
		// every row of the task passes, instead of all of ep streaming
		// from memory for each group of four rows. Each element still sees
		// its bs updates in one kernel call, in order.
		band := updateBand(bs)
		parallel(threads, (quads+per-1)/per, func(w, t int) {
			q0, q1 := t*per, min(quads, (t+1)*per)
			if ups[w] == nil {
				ups[w], skips[w] = make([]float64, 4*bs*per), make([]bool, per)
			}
			ups, skip := ups[w], skips[w]
			for q := q0; q < q1; q++ {
				j := b1 + 4*q
				up := ups[4*bs*(q-q0) : 4*bs*(q-q0+1)]
				zero := false
				for i := range bs {
					r := u[(b0+i)*k+j : (b0+i)*k+j+4]
					copy(up[4*i:4*i+4], r)
					zero = zero || r[0] == 0 || r[1] == 0 || r[2] == 0 || r[3] == 0
				}
				skip[q-q0] = zero
				if zero {
					// A zero multiplier is skipped, not subtracted (that
					// could turn −0 into +0): those rows take the plain
					// loop.
					updateRows(wp, u, errs, k, out, b0, b1, j, j+4, 0, out)
				} else {
					updateRows(wp, u, errs, k, out, b0, b1, j, j+4, n8, out)
				}
			}
			for c0 := 0; c0 < n8; c0 += band {
				cols := min(band, n8-c0)
				for q := q0; q < q1; q++ {
					if skip[q-q0] {
						continue // done by updateRows above
					}
					up := ups[4*bs*(q-q0) : 4*bs*(q-q0+1)]
					j := b1 + 4*q
					if useAVX512 {
						updateAVX512(wp[j*out+c0:], out, up, ep[c0*bs:], bs, cols)
					} else {
						updateAVX(wp[j*out+c0:], out, up, ep[c0*bs:], bs, cols)
					}
				}
			}
		})
		j += 4 * quads
	}
	rows := k - j
	per := runLength(rows, threads)
	parallel(threads, (rows+per-1)/per, func(_, t int) {
		updateRows(wp, u, errs, k, out, b0, b1, j+t*per, min(k, j+(t+1)*per), 0, out)
	})
}

// maxUpdateQuads bounds the groups of four rows one task of deferredUpdate
// takes (a task re-reads all of the block's errors once). Tests lower it.
var maxUpdateQuads = 64

// updateBandBytes is the size of the band of the block's errors that
// deferredUpdate keeps in the cache while a task's rows pass. Tests lower
// it; it changes no bit.
var updateBandBytes = 256 << 10

// updateBand is the number of columns (a multiple of eight) of the
// deferred update done for all of a task's rows before the next: the
// band's errors, bs·band float64, take about updateBandBytes.
func updateBand(bs int) int { return max(8, updateBandBytes/(8*bs)&^7) }

// runLength is the number of items per task when n items are split for
// threads goroutines: about four tasks per goroutine, so that one slow
// goroutine does not hold up the rest.
func runLength(n, threads int) int {
	if threads <= 1 {
		return max(1, n)
	}
	return max(1, n/(4*threads))
}

// updateRows is deferredUpdate for rows [j0, j1) and columns [n0, n1) in
// plain Go.
func updateRows(wp, u, errs []float64, k, out, b0, b1, j0, j1, n0, n1 int) {
	if n0 >= n1 {
		return
	}
	for j := j0; j < j1; j++ {
		dst := wp[j*out+n0 : j*out+n1]
		for i := b0; i < b1; i++ {
			if uij := u[i*k+j]; uij != 0 {
				subScaled(dst, uij, errs[(i-b0)*out+n0:(i-b0)*out+n1])
			}
		}
	}
}

// updateAVXGo is what updateAVX computes, in Go: for the four rows of c
// (stride cs) and columns n < cols (a multiple of 8), c[r][n] −= up[4i+r]·
// ep[((n/8)·bs+i)·8+n%8] for i < bs in order, with no zero test.
func updateAVXGo(c []float64, cs int, up, ep []float64, bs, cols int) {
	for r := range 4 {
		dst := c[r*cs : r*cs+cols]
		for i := range bs {
			a := up[4*i+r]
			for n := range dst {
				dst[n] -= float64(a * ep[((n/8)*bs+i)*8+n%8])
			}
		}
	}
}

// subScaled sets dst[n] −= a·x[n]. The product is rounded before the
// subtraction (no FMA), so every platform gives the same bits.
func subScaled(dst []float64, a float64, x []float64) {
	x = x[:len(dst)]
	n := 0
	if useAVX && len(dst) >= 16 {
		n = len(dst) &^ 15
		subScaledAVX(dst[:n], a, x[:n])
	}
	for ; n+4 <= len(dst); n += 4 {
		d := (*[4]float64)(dst[n:])
		s := (*[4]float64)(x[n:])
		d[0] -= float64(a * s[0])
		d[1] -= float64(a * s[1])
		d[2] -= float64(a * s[2])
		d[3] -= float64(a * s[3])
	}
	for ; n < len(dst); n++ {
		dst[n] -= float64(a * x[n])
	}
}

package gptq

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// withKernels runs f with each set of kernels this platform has: the
// AVX-512 ones (with AVX2 for the rest), AVX2 alone, and Go.
func withKernels(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	prev, prev512 := useAVX, useAVX512
	defer func() { useAVX, useAVX512 = prev, prev512 }()
	for _, k := range []struct {
		name        string
		avx, avx512 bool
	}{{"avx512", true, true}, {"avx2", true, false}, {"go", false, false}} {
		if k.avx && !prev || k.avx512 && !prev512 {
			continue // no such assembly here
		}
		useAVX, useAVX512 = k.avx, k.avx512
		t.Run("kernels="+k.name, f)
	}
}

// testThreads are the goroutine counts the parallel kernels are checked
// at: one (the serial loops), two, and counts that divide none of the
// shapes' groups evenly.
var testThreads = []int{1, 2, 3, 7}

// withThreads runs f at each of testThreads with the size threshold of the
// parallel paths off, so that small shapes are split too.
func withThreads(t *testing.T, f func(t *testing.T, threads int)) {
	t.Helper()
	prev := minParallelWork
	minParallelWork = 0
	defer func() { minParallelWork = prev }()
	for _, th := range testThreads {
		t.Run(fmt.Sprintf("threads=%d", th), func(t *testing.T) { f(t, th) })
	}
}

// sameBits reports the first index where a and b differ in their bits.
func sameBits(a, b []float64) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	return -1
}

// dampedPermuted returns h with λ = α·mean diagonal added, as NewFactor
// hands it to factorInverse (without the permutation, which changes
// nothing here).
func damped(h []float64, k int, alpha float64) []float64 {
	var mean float64
	for i := range k {
		mean += h[i*k+i]
	}
	mean /= float64(k)
	out := append([]float64(nil), h...)
	for i := range k {
		if out[i*k+i] == 0 {
			out[i*k+i] = 1
		}
		out[i*k+i] += alpha * mean
	}
	return out
}

// TestFactorInverseMatchesReference: the blocked factorInverse gives the
// original's U bit for bit, and fails at the same row for the same reason,
// on any number of goroutines (shapes with partial panels and a partial
// last group of four included).
func TestFactorInverseMatchesReference(t *testing.T) {
	withKernels(t, func(t *testing.T) {
		withThreads(t, func(t *testing.T, threads int) {
			for _, k := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 31, 33, 64, 66, 130, 257, 300} {
				r := rand.New(rand.NewPCG(uint64(k), 21))
				h := damped(lowRankHessian(r, k, max(2, k/3), []int{k / 2}), k, 0.01)
				u, uRef := make([]float64, k*k), make([]float64, k*k)
				i, why := factorInverse(append([]float64(nil), h...), u, k, threads)
				iRef, whyRef := factorInverseRef(append([]float64(nil), h...), uRef, k)
				if i != iRef || why != whyRef {
					t.Fatalf("K=%d: failure (%d, %q), reference (%d, %q)", k, i, why, iRef, whyRef)
				}
				if at := sameBits(u, uRef); at >= 0 {
					t.Fatalf("K=%d: U[%d] = %v, reference %v", k, at, u[at], uRef[at])
				}
			}
			// Indefinite: both fail at the same row, also when the failing
			// row lies in a later panel than rows the goroutines have filled.
			for _, k := range []int{6, 40, 101} {
				r := rand.New(rand.NewPCG(uint64(k), 22))
				h := damped(lowRankHessian(r, k, k, nil), k, 0.01)
				h[(k/2)*k+k/2] = -1e6
				u, uRef := make([]float64, k*k), make([]float64, k*k)
				i, why := factorInverse(append([]float64(nil), h...), u, k, threads)
				iRef, whyRef := factorInverseRef(append([]float64(nil), h...), uRef, k)
				if i != iRef || why != whyRef || i < 0 {
					t.Fatalf("indefinite K=%d: failure (%d, %q), reference (%d, %q)", k, i, why, iRef, whyRef)
				}
			}
		})
	})
}

// TestLossesMatchReference: the grouped Losses equals the original's bits
// for shapes with and without whole groups of four and pairs of groups, on
// any number of goroutines (several blocks of groups from in = 70 on).
func TestLossesMatchReference(t *testing.T) {
	shapes := []struct{ in, out int }{{1, 5}, {3, 9}, {4, 4}, {5, 7}, {8, 16}, {9, 3}, {70, 50}, {130, 33}, {257, 64}, {263, 17}}
	t.Run("one pass", func(t *testing.T) { checkLossesMatchReference(t, shapes) })
	// In bands of 32 outputs (out ≥ 2·in): whole and partial last bands,
	// odd numbers of groups, several blocks of groups.
	prev := lossesBandBytes
	defer func() { lossesBandBytes = prev }()
	lossesBandBytes = 1
	t.Run("bands", func(t *testing.T) {
		checkLossesMatchReference(t, []struct{ in, out int }{{1, 33}, {5, 97}, {9, 64}, {70, 200}, {130, 270}})
	})
}

// checkLossesMatchReference compares Losses at every kernel set and
// goroutine count with lossesRef on random problems of the shapes.
func checkLossesMatchReference(t *testing.T, shapes []struct{ in, out int }) {
	withKernels(t, func(t *testing.T) {
		withThreads(t, func(t *testing.T, threads int) {
			for _, s := range shapes {
				if b := lossesBand(s.in, s.out); lossesBandBytes == 1 && b >= s.out {
					t.Fatalf("[%d, %d] is not taken in bands", s.out, s.in)
				}
				r := rand.New(rand.NewPCG(uint64(s.in), uint64(s.out)))
				h := lowRankHessian(r, s.in, 8, nil)
				w := randomWeight(r, s.out, s.in)
				q, err := bfp.UnpackMatrix(bfp.BFP4, mustPack(t, w, s.out, s.in), s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				qs := [][]float32{q, nil, w}
				got, err := LossesThreads(h, w, qs, s.out, s.in, threads)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := lossesRef(h, w, qs, s.out, s.in)
				if at := sameBits(got, want); at >= 0 {
					t.Errorf("[%d, %d] Q %d: loss %v, reference %v", s.out, s.in, at, got[at], want[at])
				}
			}
		})
	})
}

func mustPack(t *testing.T, w []float32, out, in int) []byte {
	t.Helper()
	p, err := bfp.PackMatrix(bfp.BFP4, w, out, in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDeferredUpdateMatchesReference: the block feedback equals the
// row-by-row loop's bits, with zero multipliers (skipped, so −0 stays −0)
// and with widths that are not multiples of the tile, on any number of
// goroutines (row counts after the block that are and are not multiples of
// four, fewer groups of rows than goroutines).
func TestDeferredUpdateMatchesReference(t *testing.T) {
	// Bands of 8 to 64 columns and tasks of two groups, so that the
	// shapes here take several of each.
	prevBand, prevQuads := updateBandBytes, maxUpdateQuads
	defer func() { updateBandBytes, maxUpdateQuads = prevBand, prevQuads }()
	updateBandBytes, maxUpdateQuads = 2048, 2
	withKernels(t, func(t *testing.T) {
		withThreads(t, func(t *testing.T, threads int) {
			for _, s := range []struct{ k, out, b0, b1 int }{
				{8, 8, 0, 4}, {40, 17, 0, 16}, {41, 64, 8, 24}, {130, 7, 0, 128}, {131, 100, 3, 4}, {200, 72, 64, 128}, {203, 33, 0, 64},
			} {
				r := rand.New(rand.NewPCG(uint64(s.k), uint64(s.out)))
				wp := make([]float64, s.k*s.out)
				for i := range wp {
					wp[i] = r.NormFloat64()
					if r.IntN(10) == 0 {
						wp[i] = math.Copysign(0, -1)
					}
				}
				u := make([]float64, s.k*s.k)
				for i := range u {
					u[i] = r.NormFloat64()
				}
				if s.k > 20 {
					for i := s.b0; i < s.b1; i++ {
						u[i*s.k+s.k-5] = 0 // one zero column in a group of four
					}
					u[s.b0*s.k+s.b1] = 0
				}
				bs := s.b1 - s.b0
				errs := make([]float64, bs*s.out)
				for i := range errs {
					errs[i] = r.NormFloat64()
					if r.IntN(10) == 0 {
						errs[i] = 0
					}
				}
				want := append([]float64(nil), wp...)
				deferredRef(want, u, errs, s.k, s.out, s.b0, s.b1)
				deferredUpdate(wp, u, errs, s.k, s.out, s.b0, s.b1, threads)
				if at := sameBits(wp, want); at >= 0 {
					t.Errorf("%+v: element %d = %v, reference %v", s, at, wp[at], want[at])
				}
			}
		})
	})
}

// TestSolveMatchesReference: a whole solve (factor, row loop, losses)
// gives the original solver's bytes, loss and U at a size with several
// lazy blocks and ragged tiles, on any number of goroutines.
func TestSolveMatchesReference(t *testing.T) {
	// Bands of eight rows in Quantize's transposes and of eight columns in
	// its deferred updates, so that this shape takes several.
	prevT, prevBand, prevQ := transposeBytes, updateBandBytes, quantizeBandBytes
	defer func() { transposeBytes, updateBandBytes, quantizeBandBytes = prevT, prevBand, prevQ }()
	transposeBytes, updateBandBytes = 1, 1
	withKernels(t, func(t *testing.T) {
		withThreads(t, func(t *testing.T, threads int) {
			checkSolveMatchesReference(t, 301, 90, threads)
		})
	})
	// Quantize in bands of 32 outputs (32, 32 and 26 here).
	quantizeBandBytes = 1
	withThreads(t, func(t *testing.T, threads int) {
		checkSolveMatchesReference(t, 301, 90, threads)
	})
}

// checkSolveMatchesReference compares NewFactor + Quantize + Losses on
// threads goroutines with the reference kernels on a random [out, k]
// problem.
func checkSolveMatchesReference(t *testing.T, k, out, threads int) {
	t.Helper()
	h, w, f := randomProblem(t, k, out, min(k, 256), []int{1, k - 2}, threads)
	uRef := make([]float64, k*k)
	hp := make([]float64, k*k)
	for i, oi := range f.perm {
		for j, oj := range f.perm {
			hp[i*k+j] = h[oi*k+oj]
		}
		if f.dead[oi] {
			hp[i*k+i] = 1
		}
		hp[i*k+i] += f.lambda
	}
	if i, why := factorInverseRef(hp, uRef, k); i >= 0 {
		t.Fatalf("reference factor failed at %d: %s", i, why)
	}
	if at := sameBits(f.u, uRef); at >= 0 {
		t.Fatalf("U[%d] = %v, reference %v", at, f.u[at], uRef[at])
	}
	got, err := f.Quantize(bfp.BFP4, w, out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := quantizeRef(f, bfp.BFP4, w, out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Packed, want.Packed) || math.Float64bits(got.Loss) != math.Float64bits(want.Loss) {
		t.Fatalf("Quantize differs from the reference (loss %v, reference %v)", got.Loss, want.Loss)
	}
	for i := range got.Q {
		if math.Float32bits(got.Q[i]) != math.Float32bits(want.Q[i]) {
			t.Fatalf("Q[%d] = %v, reference %v", i, got.Q[i], want.Q[i])
		}
	}
	qs := [][]float32{got.Q, nil}
	l, err := LossesThreads(h, w, qs, out, k, threads)
	if err != nil {
		t.Fatal(err)
	}
	lRef, _ := lossesRef(h, w, qs, out, k)
	if at := sameBits(l, lRef); at >= 0 {
		t.Fatalf("loss %d = %v, reference %v", at, l[at], lRef[at])
	}
}

// TestSubScaledMatchesReference: the vector subScaled equals the scalar
// dst[n] −= a·x[n] bit for bit at every length, −0 and zeros included.
func TestSubScaledMatchesReference(t *testing.T) {
	withKernels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(9, 9))
		for _, n := range []int{0, 1, 3, 4, 15, 16, 17, 33, 64, 1792} {
			dst := make([]float64, n)
			x := make([]float64, n+3)
			for i := range dst {
				dst[i] = r.NormFloat64()
				if i%7 == 0 {
					dst[i] = math.Copysign(0, -1)
				}
			}
			for i := range x {
				x[i] = r.NormFloat64() * 1e-3
			}
			a := r.NormFloat64()
			want := append([]float64(nil), dst...)
			for i := range want {
				want[i] -= float64(a * x[i])
			}
			subScaled(dst, a, x)
			if at := sameBits(dst, want); at >= 0 {
				t.Errorf("n=%d: element %d = %v, want %v", n, at, dst[at], want[at])
			}
		}
	})
}

// gram8Ref is gram8's definition, one output at a time: x[4b+a] = Σ_t
// g[4t+a]·p[(b/4)·4n + 4t + b%4], a running sum from +0 in t order with
// each product rounded.
func gram8Ref(x *[32]float64, g, p []float64, n int) {
	for b := range 8 {
		for a := range 4 {
			var s float64
			for t := range n {
				s += float64(g[4*t+a] * p[(b/4)*4*n+4*t+b%4])
			}
			x[4*b+a] = s
		}
	}
}

// TestGramMatchesReference: gram8, gram16 and gram32 with every kernel set, and
// gram8Go, equal gram8Ref bit for bit at lengths that are one, odd, even
// and large, on values whose magnitudes span many binades and signs, so
// that a sum taken in another order or a fused multiply-add would change
// low bits (checked first: the data does tell those apart).
func TestGramMatchesReference(t *testing.T) {
	lengths := []int{1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 100, 1023, 1792, 2048}
	data := func(r *rand.Rand, n int) []float64 { return binadeSpread(r, n, 60) }
	r := rand.New(rand.NewPCG(3, 3))
	g, p := data(r, 4*1792), data(r, 8*1792)
	var want [32]float64
	gram8Ref(&want, g, p, 1792)
	var rev, fma float64
	for t := 1791; t >= 0; t-- {
		rev += float64(g[4*t] * p[4*t])
	}
	for t := range 1792 {
		fma = math.FMA(g[4*t], p[4*t], fma)
	}
	if rev == want[0] || fma == want[0] {
		t.Fatalf("test data does not tell orders apart: %v, reversed %v, fused %v", want[0], rev, fma)
	}
	withKernels(t, func(t *testing.T) {
		for _, n := range lengths {
			r := rand.New(rand.NewPCG(uint64(n), 4))
			// Slack after the data: the kernels must not read it.
			g, p := data(r, 8*n+5), data(r, 8*n+3)
			var want [64]float64
			gram8Ref((*[32]float64)(want[:32]), g[:4*n], p, n)
			gram8Ref((*[32]float64)(want[32:]), g[4*n:], p, n)
			var got, goGot [32]float64
			gram8(&got, g, p, n)
			if at := sameBits(got[:], want[:32]); at >= 0 {
				t.Errorf("gram8 n=%d: x[%d] = %v, reference %v", n, at, got[at], want[at])
			}
			gram8Go(&goGot, g, p, n)
			if at := sameBits(goGot[:], want[:32]); at >= 0 {
				t.Errorf("gram8Go n=%d: x[%d] = %v, reference %v", n, at, goGot[at], want[at])
			}
			var got16 [64]float64
			gram16(&got16, g, p, n)
			if at := sameBits(got16[:], want[:]); at >= 0 {
				t.Errorf("gram16 n=%d: x[%d] = %v, reference %v", n, at, got16[at], want[at])
			}
			// gram32: the same groups against a second pair too, from
			// sums that do not start at zero.
			p2 := data(r, 8*n+7)
			pp := append(append([]float64(nil), p[:8*n]...), p2[:8*n]...)
			start := data(r, 128)
			// Block k is group k%2 of g against pair k/2, each sum
			// gram8Ref's continued from start.
			var want32 [128]float64
			got32, go32 := [128]float64(start), [128]float64(start)
			for k := range 4 {
				for b := range 8 {
					for a := range 4 {
						v := start[32*k+4*b+a]
						for t := range n {
							v += float64(g[4*n*(k%2)+4*t+a] * pp[8*n*(k/2)+(b/4)*4*n+4*t+b%4])
						}
						want32[32*k+4*b+a] = v
					}
				}
			}
			gram32(&got32, g, pp, n)
			if at := sameBits(got32[:], want32[:]); at >= 0 {
				t.Errorf("gram32 n=%d: x[%d] = %v, reference %v", n, at, got32[at], want32[at])
			}
			gram32Go(&go32, g, pp, n)
			if at := sameBits(go32[:], want32[:]); at >= 0 {
				t.Errorf("gram32Go n=%d: x[%d] = %v, reference %v", n, at, go32[at], want32[at])
			}
			// The same sums in two bands, the second continuing from the
			// first's: the bits of one pass.
			var band8, band8Go [32]float64
			var band16 [64]float64
			for _, b := range [][2]int{{0, n / 3}, {n / 3, n}} {
				t0, t1 := b[0], b[1]
				gb := append(append([]float64(nil), g[4*t0:4*t1]...), g[4*n+4*t0:4*n+4*t1]...)
				pb := append(append([]float64(nil), p[4*t0:4*t1]...), p[4*n+4*t0:4*n+4*t1]...)
				gram8(&band8, gb, pb, t1-t0)
				gram8Go(&band8Go, gb, pb, t1-t0)
				gram16(&band16, gb, pb, t1-t0)
			}
			if at := sameBits(band8[:], want[:32]); at >= 0 {
				t.Errorf("gram8 in bands n=%d: x[%d] = %v, reference %v", n, at, band8[at], want[at])
			}
			if at := sameBits(band8Go[:], want[:32]); at >= 0 {
				t.Errorf("gram8Go in bands n=%d: x[%d] = %v, reference %v", n, at, band8Go[at], want[at])
			}
			if at := sameBits(band16[:], want[:]); at >= 0 {
				t.Errorf("gram16 in bands n=%d: x[%d] = %v, reference %v", n, at, band16[at], want[at])
			}
		}
	})
}

// binadeSpread returns n values whose magnitudes span binades binades
// around 1, with zeros and −0 among them: data on which a sum taken in
// another order, or a fused multiply-add, changes low bits.
func binadeSpread(r *rand.Rand, n, binades int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64() * math.Ldexp(1, r.IntN(binades)-binades/2)
		if r.IntN(13) == 0 {
			v[i] = 0
		}
		if r.IntN(17) == 0 {
			v[i] = math.Copysign(0, -1)
		}
	}
	return v
}

// updateKernel is one implementation of the deferred update's kernel; ok
// says whether this CPU runs it.
type updateKernel struct {
	name string
	ok   bool
	run  func(c []float64, cs int, up, ep []float64, bs, cols int)
}

// updateKernels lists the Go reference first, then the assembly kernels.
func updateKernels() []updateKernel {
	return []updateKernel{{"go", true, updateAVXGo}, {"avx2", useAVX, updateAVX}, {"avx512", useAVX512, updateAVX512}}
}

// TestUpdateKernelsMatchGo: updateAVX and updateAVX512 equal updateAVXGo
// bit for bit for block sizes of one row up, column tiles in pairs and
// with an odd last one, and a row stride wider than the columns (whose
// extra elements must stay as they are), on values over many binades with
// zeros and −0 among them, where a fused multiply-subtract gives other
// bits (checked first: the data does tell them apart).
func TestUpdateKernelsMatchGo(t *testing.T) {
	data := func(r *rand.Rand, n int) []float64 { return binadeSpread(r, n, 40) }
	r := rand.New(rand.NewPCG(10, 10))
	c, up, ep := data(r, 4*8), data(r, 4*64), data(r, 64*8)
	want := append([]float64(nil), c...)
	updateAVXGo(want, 8, up, ep, 64, 8)
	fused := 0
	for n := range 8 {
		v := c[n]
		for i := range 64 {
			v = math.FMA(-up[4*i], ep[i*8+n], v)
		}
		if math.Float64bits(v) != math.Float64bits(want[n]) {
			fused++
		}
	}
	if fused == 0 {
		t.Fatal("test data does not tell fused from separate multiply and subtract")
	}
	for _, k := range updateKernels()[1:] { // [0] is the reference
		if !k.ok {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			for _, s := range []struct{ bs, cols, cs int }{
				{1, 8, 8}, {1, 16, 16}, {2, 24, 29}, {3, 8, 13}, {5, 40, 40}, {17, 32, 35}, {64, 72, 72}, {128, 1792, 1792}, {128, 2048, 2051},
			} {
				r := rand.New(rand.NewPCG(uint64(s.bs), uint64(s.cols)))
				// Slack after the data: the kernels must not touch it.
				c := data(r, 4*s.cs+7)
				up, ep := data(r, 4*s.bs+3), data(r, s.bs*s.cols+5)
				want := append([]float64(nil), c...)
				updateAVXGo(want, s.cs, up, ep, s.bs, s.cols)
				k.run(c, s.cs, up, ep, s.bs, s.cols)
				if at := sameBits(c, want); at >= 0 {
					t.Errorf("%+v: c[%d] = %v, reference %v", s, at, c[at], want[at])
				}
			}
		})
	}
}

// TestDotLanes4x4MatchesGo: dotLanes4x4 with each kernel set equals
// dotLanes4x4Go bit for bit, with vectors at unaligned, overlapping
// offsets, on data where another order or a fused multiply-add would
// change low bits.
func TestDotLanes4x4MatchesGo(t *testing.T) {
	withKernels(t, func(t *testing.T) {
		for _, quads := range []int{1, 2, 3, 7, 64, 257} {
			r := rand.New(rand.NewPCG(uint64(quads), 44))
			a, b := binadeSpread(r, 4*quads+40, 60), binadeSpread(r, 4*quads+40, 60)
			ao, bo := [4]int{0, 3, 17, 9}, [4]int{5, 5, 1, 30}
			var got, want [64]float64
			dotLanes4x4(&got, a, &ao, b, &bo, quads)
			dotLanes4x4Go(&want, a, &ao, b, &bo, quads)
			if at := sameBits(got[:], want[:]); at >= 0 {
				t.Errorf("quads=%d: acc[%d] = %v, Go %v", quads, at, got[at], want[at])
			}
		}
	})
}

package gptq

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// poisonScratch puts NaN-filled buffers of length n into the scratch pool,
// so that a user that read a recycled buffer before writing it would give
// other bits.
func poisonScratch(n int) {
	for range 4 {
		s := make([]float64, n)
		for i := range s {
			s[i] = math.NaN()
		}
		putScratch(s)
	}
}

// TestScratchRecycled: a solve whose work buffers come recycled, full of
// NaN, gives the bits of one whose buffers are new (the reference
// kernels'), for the losses, the factor and the row loop alike; with dead
// rows and a partial last group of four.
func TestScratchRecycled(t *testing.T) {
	for _, s := range []struct{ k, out int }{{70, 48}, {130, 64}} {
		r := rand.New(rand.NewPCG(uint64(s.k), 31))
		h := lowRankHessian(r, s.k, s.k/2, []int{3, s.k - 1})
		w := randomWeight(r, s.out, s.k)
		opts := DefaultOptions(0.01)
		opts.BlockSize = 32
		groups := (s.k + 3) / 4
		for _, n := range []int{s.k * s.k, s.k * s.out, 2 * ((groups + 1) / 2) * 4 * s.out, opts.BlockSize * (s.out &^ 7)} {
			poisonScratch(n)
		}
		f, err := NewFactor(h, s.k, opts)
		if err != nil {
			t.Fatal(err)
		}
		fRef, err := newFactorRef(h, s.k, opts)
		if err != nil {
			t.Fatal(err)
		}
		if at := sameBits(f.u, fRef.u); at >= 0 {
			t.Fatalf("K=%d: U[%d] = %v, reference %v", s.k, at, f.u[at], fRef.u[at])
		}
		got, err := f.Quantize(bfp.BFP4, w, s.out)
		if err != nil {
			t.Fatal(err)
		}
		want, err := quantizeRef(fRef, bfp.BFP4, w, s.out)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Packed) != string(want.Packed) || got.Loss != want.Loss {
			t.Fatalf("K=%d: Quantize differs from the reference (loss %v, reference %v)", s.k, got.Loss, want.Loss)
		}
		qs := [][]float32{got.Q, nil}
		l, err := Losses(h, w, qs, s.out, s.k)
		if err != nil {
			t.Fatal(err)
		}
		lRef, err := lossesRef(h, w, qs, s.out, s.k)
		if err != nil {
			t.Fatal(err)
		}
		if at := sameBits(l, lRef); at >= 0 {
			t.Fatalf("K=%d: loss %d = %v, reference %v", s.k, at, l[at], lRef[at])
		}
	}
}

// TestReleaseScratch: after ReleaseScratch no recycled buffer comes back.
func TestReleaseScratch(t *testing.T) {
	const n = 1000
	poisonScratch(n)
	ReleaseScratch()
	for range 4 {
		s := getScratch(n)
		for i, v := range s {
			if v != 0 {
				t.Fatalf("after ReleaseScratch, value %d of a new buffer is %v", i, v)
			}
		}
	}
}

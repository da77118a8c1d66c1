package gptq

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// TestBandSolverMatchesReference: a weight solved band by band of outputs
// (bands of one and several tiles and an uneven last band, each solved in
// sub-bands too when quantizeBandBytes is lowered) has the packed bytes,
// decoded values and loss of the reference row loop on the whole weight,
// on any number of goroutines.
func TestBandSolverMatchesReference(t *testing.T) {
	const k, out = 130, 200
	bands := []int{64, 32, 96, 8}
	prev := quantizeBandBytes
	defer func() { quantizeBandBytes = prev }()
	for _, qb := range []int{prev, 1} {
		quantizeBandBytes = qb
		withThreads(t, func(t *testing.T, threads int) {
			_, w, f := randomProblem(t, k, out, 64, []int{3}, threads)
			want, err := quantizeRef(f, bfp.BFP8, w, out)
			if err != nil {
				t.Fatal(err)
			}
			s, err := f.NewBandSolver(bfp.BFP8, out)
			if err != nil {
				t.Fatal(err)
			}
			q := make([]float32, out*k)
			n0 := 0
			for _, nb := range bands {
				if err := s.Solve(w[n0*k:(n0+nb)*k], q[n0*k:(n0+nb)*k]); err != nil {
					t.Fatalf("band at %d of %d outputs: %v", n0, nb, err)
				}
				n0 += nb
			}
			got, err := s.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Packed, want.Packed) || math.Float64bits(got.Loss) != math.Float64bits(want.Loss) {
				t.Fatalf("bands %v: packed bytes or loss differ from the reference (loss %v, reference %v)", bands, got.Loss, want.Loss)
			}
			for i := range q {
				if math.Float32bits(q[i]) != math.Float32bits(want.Q[i]) {
					t.Fatalf("Q[%d] = %v, reference %v", i, q[i], want.Q[i])
				}
			}
		})
	}
}

// randomProblem returns a random low-rank Hessian (rank, with the dead
// inputs) for k inputs, a random weight [out, k] and the Hessian's factor
// on threads goroutines, seeded by the shape.
func randomProblem(t *testing.T, k, out, rank int, dead []int, threads int) ([]float64, []float32, *Factor) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(k), uint64(out)))
	h := lowRankHessian(r, k, rank, dead)
	w := randomWeight(r, out, k)
	opts := DefaultOptions(0.01)
	opts.Threads = threads
	f, err := NewFactor(h, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h, w, f
}

// TestBandSolverRefusals: bands out of order, of the wrong length or
// shape, with non-finite weights, and a Finish before every output is
// solved are refused with an *InputError.
func TestBandSolverRefusals(t *testing.T) {
	const k, out = 40, 70
	r := rand.New(rand.NewPCG(1, 2))
	f, err := NewFactor(lowRankHessian(r, k, 16, nil), k, DefaultOptions(0.01))
	if err != nil {
		t.Fatal(err)
	}
	w := randomWeight(r, out, k)
	q := make([]float32, out*k)
	s, err := f.NewBandSolver(bfp.BFP4, out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(); !isInput(err) {
		t.Errorf("Finish before any band: %v, want an *InputError", err)
	}
	bad := append([]float32(nil), w[:32*k]...)
	bad[5] = float32(math.NaN())
	for name, call := range map[string]func() error{
		"uneven band, not the last": func() error { return s.Solve(w[:20*k], q[:20*k]) },
		"past the end":              func() error { return s.Solve(randomWeight(r, 96, k), make([]float32, 96*k)) },
		"q of another length":       func() error { return s.Solve(w[:32*k], q[:31*k]) },
		"a partial row":             func() error { return s.Solve(w[:32*k+1], q[:32*k+1]) },
		"empty":                     func() error { return s.Solve(nil, nil) },
		"a NaN weight":              func() error { return s.Solve(bad, q[:32*k]) },
	} {
		if err := call(); !isInput(err) {
			t.Errorf("%s: %v, want an *InputError", name, err)
		}
	}
	if err := s.Solve(w[:64*k], q[:64*k]); err != nil {
		t.Fatalf("after the refusals, a good band: %v", err)
	}
	if _, err := s.Finish(); !isInput(err) {
		t.Errorf("Finish with 6 outputs left: %v, want an *InputError", err)
	}
	if err := s.Solve(w[64*k:], q[64*k:]); err != nil {
		t.Fatalf("the last band: %v", err)
	}
	if _, err := s.Finish(); err != nil {
		t.Fatal(err)
	}
}

func isInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// TestLossStreamMatchesReference: losses formed band by band (bands of
// four outputs, of several tiles, and an uneven last band) have the bits
// of the reference on the whole weight, for a Q and for Q = 0, on any
// number of goroutines and kernel set.
func TestLossStreamMatchesReference(t *testing.T) {
	shapes := []struct {
		in, out int
		bands   []int
	}{
		{5, 9, []int{4, 5}},
		{9, 64, []int{32, 32}},
		{70, 200, []int{4, 64, 100, 32}},
		{130, 97, []int{96, 1}},
		{263, 17, []int{17}},
	}
	withKernels(t, func(t *testing.T) {
		withThreads(t, func(t *testing.T, threads int) {
			for _, sh := range shapes {
				r := rand.New(rand.NewPCG(uint64(sh.in), uint64(sh.out)))
				h := lowRankHessian(r, sh.in, 8, nil)
				w := randomWeight(r, sh.out, sh.in)
				q, err := bfp.UnpackMatrix(bfp.BFP4, mustPack(t, w, sh.out, sh.in), sh.out, sh.in)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := lossesRef(h, w, [][]float32{q, nil}, sh.out, sh.in)
				for m, qm := range [][]float32{q, nil} {
					s, err := NewLossStream(h, sh.out, sh.in, threads, nil)
					if err != nil {
						t.Fatal(err)
					}
					o0 := 0
					for _, ob := range sh.bands {
						var qb []float32
						if qm != nil {
							qb = qm[o0*sh.in : (o0+ob)*sh.in]
						}
						if err := s.Add(w[o0*sh.in:(o0+ob)*sh.in], qb); err != nil {
							t.Fatalf("[%d, %d] band at %d: %v", sh.out, sh.in, o0, err)
						}
						o0 += ob
					}
					got, err := s.Total()
					if err != nil {
						t.Fatal(err)
					}
					if math.Float64bits(got) != math.Float64bits(want[m]) {
						t.Errorf("[%d, %d] in bands %v, Q %d: loss %v, reference %v", sh.out, sh.in, sh.bands, m, got, want[m])
					}
				}
			}
		})
	})
}

// TestLossStreamRefusals: a band of an odd number of outputs that is not
// the last, one past the end or with a Q of another length, and a Total
// before every output is added are refused with an *InputError.
func TestLossStreamRefusals(t *testing.T) {
	const in, out = 8, 20
	r := rand.New(rand.NewPCG(3, 4))
	h := lowRankHessian(r, in, 4, nil)
	w := randomWeight(r, out, in)
	if _, err := NewLossStream(h[1:], out, in, 1, nil); !isInput(err) {
		t.Errorf("a short Hessian: %v, want an *InputError", err)
	}
	s, err := NewLossStream(h, out, in, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"odd band, not the last": func() error { return s.Add(w[:3*in], nil) },
		"past the end":           func() error { return s.Add(append(w, w[:4*in]...), nil) },
		"Q of another length":    func() error { return s.Add(w[:4*in], w[:3*in]) },
		"empty":                  func() error { return s.Add(nil, nil) },
	} {
		if err := call(); !isInput(err) {
			t.Errorf("%s: %v, want an *InputError", name, err)
		}
	}
	if err := s.Add(w[:16*in], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Total(); !isInput(err) {
		t.Errorf("Total with 4 outputs left: %v, want an *InputError", err)
	}
	if err := s.Add(w[16*in:], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Total(); err != nil {
		t.Fatal(err)
	}
}

package score

import (
	"math"
	"math/rand/v2"
	"testing"
)

func logits(p ...float64) []float32 {
	z := make([]float32, len(p))
	for i, x := range p {
		z[i] = float32(math.Log(x))
	}
	return z
}

func TestKLIdenticalIsZero(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, V := range []int{1, 2, 17, 8192} {
		z := make([]float32, V)
		for i := range z {
			z[i] = float32(rng.NormFloat64() * 8)
		}
		ref := NewRef(V)
		if !ref.SetLogits(z, V/2) {
			t.Fatal("finite logits refused")
		}
		tok, ok := Compare(ref, z, V/2, make([]float64, V))
		if !ok || tok.KL != 0 || tok.NLLCand != tok.NLLRef || tok.DP != 0 || !tok.Same {
			t.Errorf("V=%d: %+v, want KL exactly 0 and equal NLL", V, tok)
		}
	}
}

func TestKLKnownPairs(t *testing.T) {
	tests := []struct {
		p, q []float64
		want float64
	}{
		// docs/scoring.md, "Per-token quantities": 0.5·ln(0.5/0.9) +
		// 0.5·ln(0.5/0.1).
		{[]float64{0.5, 0.5}, []float64{0.9, 0.1}, 0.5*math.Log(0.5/0.9) + 0.5*math.Log(0.5/0.1)},
		{[]float64{0.9, 0.1}, []float64{0.5, 0.5}, 0.9*math.Log(0.9/0.5) + 0.1*math.Log(0.1/0.5)},
		{[]float64{0.7, 0.2, 0.1}, []float64{0.1, 0.2, 0.7}, 0.7*math.Log(7) + 0.1*math.Log(1.0/7)},
	}
	if math.Abs(tests[0].want-0.5108256237659907) > 1e-15 {
		t.Fatalf("hand value %v", tests[0].want)
	}
	for _, tt := range tests {
		ref := NewRef(len(tt.p))
		ref.SetLogits(logits(tt.p...), 0)
		tok, _ := Compare(ref, logits(tt.q...), 0, make([]float64, len(tt.q)))
		// The logits are float32, so p and q are what they are to ~6e-8.
		if math.Abs(tok.KL-tt.want) > 1e-6 {
			t.Errorf("KL(%v‖%v) = %.15g, want %.15g", tt.p, tt.q, tok.KL, tt.want)
		}
		// In float64 throughout (the stored-row path), 1e-12.
		lp := make([]float64, len(tt.p))
		for i, x := range tt.p {
			lp[i] = math.Log(x)
		}
		ref.SetStored(lp, -math.Log(tt.p[0]), 0)
		lq := make([]float64, len(tt.q))
		for i, x := range tt.q {
			lq[i] = math.Log(x)
		}
		if got := KL(ref.P, ref.LP, lq); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("float64 KL(%v‖%v) = %.17g, want %.17g", tt.p, tt.q, got, tt.want)
		}
		if d := tok.NLLCand + math.Log(tt.q[0]); math.Abs(d) > 1e-6 {
			t.Errorf("candidate NLL %v, want %v", tok.NLLCand, -math.Log(tt.q[0]))
		}
		if d := tok.DP - (tt.q[0] - tt.p[0]); math.Abs(d) > 1e-6 {
			t.Errorf("Δp %v, want %v", tok.DP, tt.q[0]-tt.p[0])
		}
	}
}

func TestLogSoftmaxAndArgmax(t *testing.T) {
	z := []float32{1, 3, 3, -2}
	lp := make([]float64, 4)
	lse := LogSoftmax(lp, z)
	want := math.Log(math.Exp(1) + 2*math.Exp(3) + math.Exp(-2))
	if math.Abs(lse-want) > 1e-14 {
		t.Errorf("lse %v, want %v", lse, want)
	}
	var s float64
	for _, x := range lp {
		s += math.Exp(x)
	}
	if math.Abs(s-1) > 1e-15 {
		t.Errorf("Σp = %v", s)
	}
	if Argmax(z) != 1 {
		t.Errorf("argmax %d, want 1 (ties to the lowest id)", Argmax(z))
	}
	// Large logits do not overflow: max subtraction.
	big := float32(1e30)
	if lse := LogSoftmax(lp[:2], []float32{big, big}); lse != float64(big) || lp[0] != -math.Ln2 {
		t.Errorf("lse of large logits %v", lse)
	}
	for _, bad := range [][]float32{{1, float32(math.NaN())}, {float32(math.Inf(1)), 0}, {float32(math.Inf(-1))}} {
		ref := NewRef(len(bad))
		if ref.SetLogits(bad, 0) {
			t.Errorf("%v accepted", bad)
		}
		if _, ok := Compare(NewRef(len(bad)), bad, 0, make([]float64, len(bad))); ok {
			t.Errorf("Compare accepted %v", bad)
		}
	}
}

// TestStoredRenormalises checks that a stored row is renormalised before
// KL, and that the stored NLL and argmax are used as given.
func TestStoredRenormalises(t *testing.T) {
	ref := NewRef(3)
	lp := []float64{math.Log(0.5) + 0.01, math.Log(0.25) + 0.01, math.Log(0.25) + 0.01}
	if !ref.SetStored(lp, 7, 2) {
		t.Fatal("refused")
	}
	for i, want := range []float64{0.5, 0.25, 0.25} {
		if math.Abs(ref.P[i]-want) > 1e-15 {
			t.Errorf("p[%d] = %v, want %v", i, ref.P[i], want)
		}
	}
	if ref.NLL != 7 || ref.Argmax != 2 {
		t.Errorf("NLL %v argmax %d", ref.NLL, ref.Argmax)
	}
	if ref.SetStored([]float64{math.NaN(), 0}, 0, 0) {
		t.Error("NaN row accepted")
	}
}

package score

import (
	"errors"
	"math"
	"testing"
)

func TestQuantileAndMedian(t *testing.T) {
	tests := []struct {
		x          []float64
		q, want    float64
		wantMedian float64
	}{
		{[]float64{7}, 0.99, 7, 7},
		{[]float64{1, 2, 3}, 0.5, 2, 2},
		{[]float64{1, 2, 3, 4}, 0.5, 2.5, 2.5},
		// p99 of 0..9 sits at position 0.99·9 = 8.91: 8 + 0.91·(9 − 8).
		{[]float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0.99, 8.91, 4.5},
		// 0..100: position 99 exactly.
		{seq(101), 0.99, 99, 50},
		// 0..1000 by 1, p99.9 at 999.
		{seq(1001), 0.999, 999, 500},
		{[]float64{0, 10}, 0.25, 2.5, 5},
		{[]float64{1, 2, 3, 4}, 1, 4, 2.5},
		{[]float64{1, 2, 3, 4}, 0, 1, 2.5},
	}
	for _, tt := range tests {
		if got := Quantile(tt.x, tt.q); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Quantile(%v…, %v) = %v, want %v", tt.x[:min(4, len(tt.x))], tt.q, got, tt.want)
		}
		if got := Median(tt.x); got != tt.wantMedian {
			t.Errorf("Median(%v…) = %v, want %v", tt.x[:min(4, len(tt.x))], got, tt.wantMedian)
		}
	}
	if !math.IsNaN(Quantile(nil, 0.5)) || !math.IsNaN(Median(nil)) {
		t.Error("empty sample should give NaN")
	}
}

func seq(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	return x
}

// TestPairedSE checks the paired SE on d_t = t, t = 1…12, against its
// closed form: d̄ = 6.5, Σ(d − d̄)² = N(N² − 1)/12 = 143, SE = √(143/132).
func TestPairedSE(t *testing.T) {
	a := make([]float64, 12)
	b := make([]float64, 12)
	for i := range a {
		a[i] = 3.25
		b[i] = 3.25 + float64(i+1)
	}
	mean, se, err := Paired(a, b)
	if err != nil || mean != 6.5 || se == nil || math.Abs(*se-math.Sqrt(143.0/132)) > 1e-15 {
		t.Fatalf("Paired = %v ± %v, %v; want 6.5 ± %v", mean, se, err, math.Sqrt(143.0/132))
	}
	if _, se, _ := Paired(a[:10], b[:10]); se != nil {
		t.Error("SE reported for N = 10")
	}
	if _, _, err := Paired(nil, nil); !errors.Is(err, ErrNoTokens) {
		t.Errorf("empty: %v", err)
	}
	if _, _, err := Paired(a, b[:3]); err == nil {
		t.Error("different lengths accepted")
	}
}

func TestSummarize(t *testing.T) {
	// 12 tokens: nll_r = 2, nll_c = 2 + d_t with d_t = (t − 6.5)/100 + 0.01,
	// KL_t = t/1000, the first 9 argmaxes agree, Δp = ±0.1.
	toks := make([]Token, 12)
	for i := range toks {
		d := (float64(i+1)-6.5)/100 + 0.01
		toks[i] = Token{NLLRef: 2, NLLCand: 2 + d, KL: float64(i+1) / 1000, DP: 0.1 * float64(1-2*(i%2)), Same: i < 9}
	}
	st, err := Summarize(toks)
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %.17g, want %.17g", name, got, want)
		}
	}
	seD := math.Sqrt(143.0/132) / 100
	near("tokens", float64(st.Tokens), 12, 0)
	near("ppl_ref", float64(st.PPLRef), math.Exp(2), 1e-13)
	near("ppl_cand", float64(st.PPLCand), math.Exp(2.01), 1e-13)
	near("ln_ratio", float64(st.LnRatio), 0.01, 1e-15)
	near("ln_ratio_se", float64(*st.LnRatioSE), seD, 1e-15)
	near("dppl_pct", float64(st.DPPLPct), 100*(math.Exp(0.01)-1), 1e-12)
	near("dppl_pct_se", float64(*st.DPPLPctSE), 100*math.Exp(0.01)*seD, 1e-12)
	near("top1", float64(st.Top1), 0.75, 0)
	near("top1_se", float64(*st.Top1SE), math.Sqrt(0.75*0.25/11), 1e-15)
	near("kl_mean", float64(st.KLMean), 0.0065, 1e-15)
	near("kl_mean_se", float64(*st.KLMeanSE), math.Sqrt(143.0/132)/1000, 1e-15)
	near("kl_median", float64(st.KLMedian), 0.0065, 1e-15)
	near("kl_p99", float64(st.KLP99), 0.011+0.89*0.001, 1e-15)
	near("kl_p90", float64(st.KLP90), 0.010+0.9*0.001, 1e-15)
	near("kl_min", float64(st.KLMin), 0.001, 0)
	near("kl_max", float64(st.KLMax), 0.012, 0)
	near("rms_dp", float64(st.RMSDP), 0.1, 1e-15)

	// N ≤ 10: no SEs.
	st, _ = Summarize(toks[:10])
	if st.LnRatioSE != nil || st.DPPLPctSE != nil || st.Top1SE != nil || st.KLMeanSE != nil {
		t.Error("SEs reported for N = 10")
	}
	if _, err := Summarize(nil); !errors.Is(err, ErrNoTokens) {
		t.Errorf("empty: %v", err)
	}

	// Identical tokens: ΔPPL exactly 0.
	same := []Token{{NLLRef: 1.5, NLLCand: 1.5, Same: true}, {NLLRef: 0.25, NLLCand: 0.25, Same: true}}
	st, _ = Summarize(same)
	if st.DPPLPct != 0 || st.LnRatio != 0 || st.Top1 != 1 || st.KLMean != 0 || st.KLMax != 0 || st.PPLRef != st.PPLCand {
		t.Errorf("self: %+v", st)
	}
}

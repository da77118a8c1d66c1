package gptq

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// TestBadExponentOptions: an unknown rule or cost is an *InputError naming
// the setting, before any work.
func TestBadExponentOptions(t *testing.T) {
	h := []float64{1, 0, 0, 1}
	for _, opts := range []Options{
		{BlockSize: 1, Exponent: ExponentHessian + 1},
		{BlockSize: 1, Exponent: ExponentHessian, HessianCost: CostLookahead + 1},
	} {
		_, err := NewFactor(h, 2, opts)
		var ie *InputError
		if !errors.As(err, &ie) || ie.What != "Exponent" {
			t.Errorf("%+v: err = %v, want an InputError for Exponent", opts, err)
		}
	}
	for _, c := range []struct {
		got, want string
	}{
		{ExponentMax.String(), "max"}, {ExponentSearch.String(), "search"}, {ExponentHessian.String(), "hessian"},
		{CostGreedy.String(), "greedy"}, {CostLookahead.String(), "lookahead"},
	} {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
}

// BenchmarkQuantizeRule times the row loop (Factor.Quantize, the part the
// exponent rule changes) for each rule on one factor, so the ratios to
// "max" in one run give the rules' cost; the factorization, which no rule
// touches, is left out.
func BenchmarkQuantizeRule(b *testing.B) {
	const k, out = 512, 512
	r := rand.New(rand.NewPCG(1, 1))
	h := randomHessian(r, k, k, nil)
	w := randomWeight(r, out, k)
	for _, rule := range exponentRules {
		b.Run(fmt.Sprintf("K=%d/%s", k, rule.name), func(b *testing.B) {
			opts := DefaultOptions(0.01)
			opts.Exponent, opts.HessianCost = rule.rule, rule.cost
			f, err := NewFactor(h, k, opts)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := f.Quantize(bfp.BFP4, w, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLookaheadBlockInvariance: the lookahead cost reads the next row,
// which at a block boundary still lacks the block's deferred feedback and
// is rebuilt from the pending errors; wide rows (32 groups each) make the
// choices depend on those values, so block sizes 1, 8 and 128 giving the
// same bytes shows that the rebuilt row is the one the solve will see.
func TestLookaheadBlockInvariance(t *testing.T) {
	testBlockInvariance(t, Options{Alpha: 0.01, ActOrder: true, Exponent: ExponentHessian, HessianCost: CostLookahead},
		128, 512, 256, nil, []int{1, 8, 128})
}

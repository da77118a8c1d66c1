package gptq

import (
	"errors"
	"testing"
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

package quant

import (
	"fmt"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/gptq"
	"github.com/lfmq/lfmq/quant/plan"
)

// ExponentRule names how the shared exponent of each 16-value BFP group is
// chosen (docs/bfp.md, "Encoding"; docs/gptq.md §4). Every rule writes
// ordinary lfmq-1 bytes; the rule is recorded in the manifest.
type ExponentRule string

const (
	// ExponentMax is the plain packer's rule, the group's largest exponent:
	// tt-metal's default and the reference release's method. The empty
	// rule means ExponentMax.
	ExponentMax ExponentRule = "max"
	// ExponentSearch is tt-metal's optional search (optimize_bfp): E_max − 1
	// when it lowers the group's squared error. For RTN on the source
	// values, for GPTQ on the error-updated values.
	ExponentSearch ExponentRule = "search"
	// ExponentHessian, for GPTQ's experts only, picks among E_max,
	// E_max − 1 and E_max − 2 the exponent of least GPTQ loss for the
	// group (gptq.ExponentHessian).
	ExponentHessian ExponentRule = "hessian"
)

// ParseExponentRule validates an --exponent-rule value.
func ParseExponentRule(s string) (ExponentRule, error) {
	switch r := ExponentRule(s); r {
	case ExponentMax, ExponentSearch, ExponentHessian:
		return r, nil
	}
	return "", fmt.Errorf("quant: unknown exponent rule %q (available: max, search, hessian)", s)
}

// orMax returns r, or ExponentMax for the empty rule.
func (r ExponentRule) orMax() ExponentRule {
	if r == "" {
		return ExponentMax
	}
	return r
}

// packRule is the Hessian-free packer rule for r: search for search, the
// plain packer otherwise.
func (r ExponentRule) packRule() bfp.ExponentRule {
	if r == ExponentSearch {
		return bfp.RuleSearch
	}
	return bfp.RuleMax
}

// gptqRule is r as the GPTQ solver's rule.
func (r ExponentRule) gptqRule() gptq.ExponentRule {
	switch r {
	case ExponentSearch:
		return gptq.ExponentSearch
	case ExponentHessian:
		return gptq.ExponentHessian
	}
	return gptq.ExponentMax
}

// RuleError reports an exponent rule that the run cannot apply: an unknown
// name, or hessian where there is no Hessian (RTN experts, BFP8 dense
// tensors).
type RuleError struct {
	// Field is the option: ExponentRule or DenseExponentRule.
	Field string
	Rule  ExponentRule
	Msg   string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("quant: %s %q: %s", e.Field, e.Rule, e.Msg)
}

// checkRules validates the run's exponent rules against its method.
func checkRules(opts *Options) error {
	for _, c := range []struct {
		field string
		r     ExponentRule
	}{{"ExponentRule", opts.ExponentRule}, {"DenseExponentRule", opts.DenseExponentRule}} {
		if _, err := ParseExponentRule(string(c.r.orMax())); err != nil {
			return &RuleError{Field: c.field, Rule: c.r, Msg: "want max, search or hessian"}
		}
	}
	if opts.DenseExponentRule == ExponentHessian {
		return &RuleError{Field: "DenseExponentRule", Rule: ExponentHessian, Msg: "the BFP8 dense tensors have no Hessian; use max or search"}
	}
	if opts.ExponentRule == ExponentHessian && (opts.Method != GPTQ || opts.KeepExperts || opts.FFNFormat == lfmq1.BFP8) {
		return &RuleError{Field: "ExponentRule", Rule: ExponentHessian, Msg: "needs GPTQ's Hessian: use --method gptq, or max or search"}
	}
	return nil
}

// packRules gives the packer rule of each RTN-packed tensor by class: the
// experts' rule for BFP4 experts (RTN runs), the dense rule for the BFP8
// dense tensors and the head.
type packRules struct {
	experts, dense bfp.ExponentRule
}

func (opts *Options) packRules() packRules {
	return packRules{experts: opts.ExponentRule.packRule(), dense: opts.DenseExponentRule.packRule()}
}

func (p packRules) of(c plan.Class, f lfmq1.TensorFormat) bfp.ExponentRule {
	if c == plan.Experts || (c == plan.FFN && f == lfmq1.BFP4) {
		return p.experts
	}
	return p.dense
}

// RuleSettings is the manifest's quantization.settings of an RTN run: the
// exponent rules, which GPTQSettings records for a GPTQ run.
type RuleSettings struct {
	ExponentRule      string `json:"exponent_rule"`
	DenseExponentRule string `json:"dense_exponent_rule"`
}

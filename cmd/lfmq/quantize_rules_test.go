package main

import (
	"testing"

	"github.com/lfmq/lfmq/quant"
)

// TestQuantizeExponentRuleFlags: --exponent-rule and --dense-exponent-rule
// reach the options, hessian is refused where there is no Hessian, and
// created_by names a rule only when it is not max.
func TestQuantizeExponentRuleFlags(t *testing.T) {
	tests := []struct {
		args        string
		experts     quant.ExponentRule
		dense       quant.ExponentRule
		wantCreated string
		wantErr     string
	}{
		{"--calib c", "max", "max", "lfmq quantize --method gptq", ""},
		{"--calib c --exponent-rule hessian", "hessian", "max", "lfmq quantize --method gptq --exponent-rule hessian", ""},
		{"--calib c --exponent-rule search --dense-exponent-rule search", "search", "search",
			"lfmq quantize --method gptq --exponent-rule search --dense-exponent-rule search", ""},
		{"--method rtn --exponent-rule search", "search", "max", "lfmq quantize --method rtn --exponent-rule search", ""},
		{"--method rtn --exponent-rule max", "max", "max", "lfmq quantize --method rtn", ""},
		{"--method rtn --exponent-rule hessian", "", "", "", "--exponent-rule hessian needs --method gptq"},
		{"--experts keep --method rtn --exponent-rule hessian", "", "", "", "--exponent-rule hessian needs"},
		{"--calib c --dense-exponent-rule hessian", "", "", "", "--dense-exponent-rule must be max or search"},
		{"--calib c --exponent-rule min", "", "", "", "--exponent-rule must be max, search or hessian"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			got, err := parseQuantize("--model m --out o " + tt.args)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ExponentRule != tt.experts || got.DenseExponentRule != tt.dense {
				t.Errorf("rules %q / %q, want %q / %q", got.ExponentRule, got.DenseExponentRule, tt.experts, tt.dense)
			}
			if c := createdBy(got); c != tt.wantCreated {
				t.Errorf("created_by %q, want %q", c, tt.wantCreated)
			}
		})
	}
}

package quant

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// manifestOf reads a checkpoint's manifest, its per-tensor metrics (RTN
// runs) and its quantization settings.
func manifestOf(t *testing.T, dir string) (*lfmq1.Manifest, map[string]TensorMetric, RuleSettings) {
	t.Helper()
	man, _, err := lfmq1.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Tensors map[string]TensorMetric `json:"tensors"`
	}
	json.Unmarshal(man.Metrics, &m)
	var s RuleSettings
	if err := json.Unmarshal(man.Quantization.Settings, &s); err != nil {
		t.Fatalf("%s: settings %s: %v", dir, man.Quantization.Settings, err)
	}
	return man, m.Tensors, s
}

// TestRTNExponentRules: RTN with the search rule for the experts, and for
// the dense tensors, changes exactly the tensors of the class asked for,
// never raises a tensor's weight error (the search keeps a group's
// exponent unless the lower one has strictly less error), stays canonical
// and deterministic, and records both rules in the manifest; max records
// max.
func TestRTNExponentRules(t *testing.T) {
	_, maxMetrics, s := manifestOf(t, tinyRTN(t))
	if s != (RuleSettings{ExponentRule: "max", DenseExponentRule: "max"}) {
		t.Errorf("RTN max settings %+v", s)
	}
	for _, c := range []struct {
		name          string
		experts       ExponentRule
		dense         ExponentRule
		expertsChange bool
		denseChange   bool
	}{
		{"experts search", ExponentSearch, "", true, false},
		{"dense search", "", ExponentSearch, false, true},
		{"both", ExponentSearch, ExponentSearch, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rtn")
			opts := Options{ModelDir: tinyModel, OutDir: dir, Method: RTN, CreatedBy: "test", ExponentRule: c.experts, DenseExponentRule: c.dense}
			if _, err := Quantize(context.Background(), opts); err != nil {
				t.Fatal(err)
			}
			got := tensorFileSums(t, dir)
			for name, sum := range goldenDense {
				if (got[name] != sum) != c.denseChange {
					t.Errorf("%s changed: %v, want %v", name, got[name] != sum, c.denseChange)
				}
			}
			for name, sum := range goldenRTNExperts {
				if (got[name] != sum) != c.expertsChange {
					t.Errorf("%s changed: %v, want %v", name, got[name] != sum, c.expertsChange)
				}
			}
			man, metrics, s := manifestOf(t, dir)
			if s.ExponentRule != string(c.experts.orMax()) || s.DenseExponentRule != string(c.dense.orMax()) {
				t.Errorf("settings %+v", s)
			}
			ck, err := lfmq1.Open(dir, lfmq1.CheckTensors)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			var lower, total int
			for _, e := range man.Tensors {
				if !e.Format.IsBFP() {
					continue
				}
				f := bfp.BFP8
				if e.Format == lfmq1.BFP4 {
					f = bfp.BFP4
				}
				st, err := ck.Tensor(e.Name)
				if err != nil {
					t.Fatal(err)
				}
				if err := bfp.Canonical(f, st.Data, int(e.Shape[0]), int(e.Shape[1])); err != nil {
					t.Errorf("%s: %v", e.Name, err)
				}
				m, base := metrics[e.Name], maxMetrics[e.Name]
				if m.RelError > base.RelError*(1+1e-12) {
					t.Errorf("%s: relative error %.6g with the search, %.6g without", e.Name, m.RelError, base.RelError)
				}
				total++
				if m.RelError < base.RelError {
					lower++
				}
			}
			t.Logf("%d of %d BFP tensors have a lower weight error than with max", lower, total)
			if c.name == "both" {
				other := filepath.Join(t.TempDir(), "one")
				prev := runtime.GOMAXPROCS(1)
				opts.OutDir, opts.Workers = other, 1
				_, err := Quantize(context.Background(), opts)
				runtime.GOMAXPROCS(prev)
				if err != nil {
					t.Fatal(err)
				}
				sameFiles(t, dir, other)
			}
		})
	}
}

// TestExponentRuleRefusals: hessian needs GPTQ's Hessian, so RTN experts,
// kept experts and the dense tensors refuse it, as they refuse an unknown
// rule, before any output exists.
func TestExponentRuleRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  Options
		field string
	}{
		{"rtn hessian", Options{Method: RTN, ExponentRule: ExponentHessian}, "ExponentRule"},
		{"kept experts hessian", Options{Method: GPTQ, KeepExperts: true, ExponentRule: ExponentHessian}, "ExponentRule"},
		{"dense hessian", Options{Method: RTN, DenseExponentRule: ExponentHessian}, "DenseExponentRule"},
		{"unknown", Options{Method: RTN, ExponentRule: "min"}, "ExponentRule"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.ModelDir, c.opts.OutDir = tinyModel, filepath.Join(t.TempDir(), "o")
			_, err := Quantize(context.Background(), c.opts)
			var re *RuleError
			if !errors.As(err, &re) || re.Field != c.field {
				t.Fatalf("err = %v, want a RuleError for %s", err, c.field)
			}
		})
	}
	for _, s := range []string{"max", "search", "hessian"} {
		if r, err := ParseExponentRule(s); err != nil || string(r) != s {
			t.Errorf("ParseExponentRule(%q) = %q, %v", s, r, err)
		}
	}
	if _, err := ParseExponentRule("Max"); err == nil {
		t.Error("ParseExponentRule accepted Max")
	}
}

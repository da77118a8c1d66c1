package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
)

// TestSolveHeadMatchesSolveAs: the fixture's head (tied to the embedding),
// solved band by band from the mapped source by solveHead in bands of 96
// outputs with an uneven last band, has the packed bytes, the matrix
// metrics (losses, ratios, method, damping) and the tensor metric of
// solveAs on the whole matrix: under the plain and the search exponent
// rules, for a Hessian that factors, one that cannot be factored (stored
// RTN by the rule's fallback), and no tokens at all.
func TestSolveHeadMatchesSolveAs(t *testing.T) {
	src, err := hf.Open(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	whole, err := weightValues(src, plan.Entry{Source: "model.embed_tokens.weight"})
	if err != nil {
		t.Fatal(err)
	}
	const k = 128
	const out = 8010 // of the 8,192 rows: a last band of 42 outputs, not a whole tile
	e := &plan.Entry{Name: "lm_head.weight", Source: "model.embed_tokens.weight", Class: plan.Head, Format: lfmq1.BFP8, Shape: []int64{out, k}}
	w := whole[:out*k]

	prev := headBandBytes
	defer func() { headBandBytes = prev }()
	headBandBytes = 4 * k * 96
	if b := headBand(out, k); b != 96 {
		t.Fatalf("band of %d outputs, want 96", b)
	}

	r := rand.New(rand.NewPCG(7, 9))
	random := hessian.NewStat(k)
	x := make([]float32, k)
	for range 300 {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		if err := random.Add(x, 1+r.Float64()); err != nil {
			t.Fatal(err)
		}
	}
	// Inputs 0 and 1 always equal and no damping: singular even after the
	// retries, so the head falls back to RTN.
	singular := hessian.NewStat(k)
	x = make([]float32, k)
	x[0], x[1] = 2, 2
	singular.Add(x, 1)
	singular.Add(make([]float32, k), 1)
	empty := hessian.NewStat(k)
	for _, st := range []*hessian.Stat{random, singular, empty} {
		if err := st.Finish(); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name   string
		st     *hessian.Stat
		rule   ExponentRule
		damp   float64
		method string
	}{
		{"gptq max", random, ExponentMax, 0.01, "gptq"},
		{"gptq search", random, ExponentSearch, 0.01, "gptq"},
		{"fallback max", singular, ExponentMax, 0, "rtn"},
		{"fallback search", singular, ExponentSearch, 0, "rtn"},
		{"no tokens", empty, ExponentSearch, 0.01, "rtn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := DefaultGPTQOptions()
			g.DampDense = tc.damp
			run := func() *gptqRun {
				return &gptqRun{g: g, opts: Options{DenseExponentRule: tc.rule}, src: src, workers: 2, report: &GPTQReport{}}
			}
			ra, rh := run(), run()
			want, err := ra.solveAs(t.Context(), denseSpec(ra), 6, -1, e.Name, tc.st, tc.st, g.DampDense, [][]float32{w}, []*plan.Entry{e}, out, k, 2)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rh.solveHead(t.Context(), 6, e, tc.st)
			if err != nil {
				t.Fatal(err)
			}
			if got.metric.Method != tc.method {
				t.Errorf("method %q, want %q", got.metric.Method, tc.method)
			}
			if !bytes.Equal(got.packed, want[0].packed) {
				t.Error("packed bytes differ from solveAs's")
			}
			if !reflect.DeepEqual(got.metric, want[0].metric) {
				t.Errorf("metric %+v, solveAs %+v", got.metric, want[0].metric)
			}
			if got.tensor != want[0].tensor {
				t.Errorf("tensor metric %+v, solveAs %+v", got.tensor, want[0].tensor)
			}
			if !reflect.DeepEqual(rh.report.Warnings, ra.report.Warnings) {
				t.Errorf("warnings %q, solveAs %q", rh.report.Warnings, ra.report.Warnings)
			}
			if m := got.metric; tc.method == "gptq" && (m.Ratio == nil || !(*m.Ratio < 1) || math.IsNaN(m.LossGPTQ)) {
				t.Errorf("GPTQ ratio %v: not better than RTN", m.Ratio)
			}
		})
	}
}

package report

import (
	"bytes"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/evidence"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n%s\nwant:\n%s", name, got, want)
	}
}

func stats(tokens int, pplR, pplC, dppl, dpplSE, top1, top1SE, kl, klSE, p99 float64) evidence.Stats {
	se := func(x float64) *evidence.Float {
		if math.IsNaN(x) {
			return nil
		}
		return evidence.Ptr(x)
	}
	return evidence.Stats{
		Tokens: tokens, PPLRef: evidence.Float(pplR), PPLCand: evidence.Float(pplC),
		DPPLPct: evidence.Float(dppl), DPPLPctSE: se(dpplSE), Top1: evidence.Float(top1), Top1SE: se(top1SE),
		KLMean: evidence.Float(kl), KLMeanSE: se(klSE), KLP99: evidence.Float(p99),
	}
}

func file(results ...evidence.Result) *evidence.File {
	return &evidence.File{Format: evidence.Format, Kind: evidence.KindScore,
		Receipts: evidence.Receipts{Reference: evidence.Checkpoint{Name: "BF16"}}, Results: results}
}

func TestMarkdownGolden(t *testing.T) {
	nan := math.NaN()
	single := file(
		evidence.Result{Candidate: "rtn", Kind: evidence.KindCandidate, Corpus: "chat", Stats: stats(34763, 50.425787, 51.2, 1.5342, 0.1234, 0.97812, 0.00081, 0.012345, 0.00043, 0.0912)},
		evidence.Result{Candidate: "rtn", Kind: evidence.KindCandidate, Corpus: "tiny|pipe", Stats: stats(9, 8.1234, 8.1234, -0.0001, nan, 1, nan, 0, nan, 0)},
		evidence.Result{Candidate: "rtn", Kind: evidence.KindCandidate, Corpus: "all", Stats: stats(1234567, 123.456, 124.5, 0.84, 0.05, 0.95, 0, 2.5e-7, 3.1e-9, 1.34e-6)},
	)
	golden(t, "single.golden.md", []byte(Markdown(single)))

	abl := file(
		evidence.Result{Candidate: "noise floor (chunk 32)", Kind: evidence.KindNoiseFloor, Corpus: "book", Stats: stats(52627, 87.636, 87.636, 0, 0, 1, 0, 0, 0, 0)},
		evidence.Result{Candidate: "storage floor (fp16)", Kind: evidence.KindStorageFloor, Corpus: "book", Stats: stats(52627, 87.636, 87.636, 0, 0, 1, 0, 6.95e-7, 3.9e-9, 1.34e-6)},
		evidence.Result{Candidate: "bf16-experts", Kind: evidence.KindCandidate, Corpus: "book", Stats: stats(52627, 87.636, 87.65, 0.016, 0.021, 0.9808, 0.0006, 0.000737, 0.000032, 0.0112)},
		evidence.Result{Candidate: "rtn", Kind: evidence.KindCandidate, Corpus: "book", Stats: stats(52627, 87.636, 88.1, 0.53, 0.04, 0.9552, 0.0009, 0.003187, 0.000065, 0.0284)},
	)
	abl.Comparisons = []evidence.Comparison{{Corpus: "book", A: "bf16-experts", B: "rtn", Tokens: 52627, KLDiff: 0.00245, KLDiffSE: evidence.Ptr(0.000061), NLLDiff: -0.0011, NLLDiffSE: evidence.Ptr(0.0008)}}
	abl.Notes = []string{"The noise floor (chunk 32) is exactly zero.", "Second note."}
	golden(t, "ablation.golden.md", []byte(Markdown(abl)))
}

func TestNumberFormats(t *testing.T) {
	p := func(x float64) *evidence.Float { return evidence.Ptr(x) }
	tests := []struct{ got, want string }{
		{sig(0, 3), "0"},
		{sig(50.425787, 4), "50.43"},
		{sig(123.456, 4), "123.5"},
		{sig(8.1234, 4), "8.123"},
		{sig(0.0912, 3), "0.0912"},
		{sig(1.34e-6, 3), "1.34e-06"},
		{sig(2e6, 3), "2.00e+06"},
		{sig(-0.00001, 3), "-1.00e-05"},
		{pm(1.5342, p(0.1234), 1, true), "+1.53 ± 0.12"},
		{pm(-0.0001, nil, 1, true), "-0.000100"},
		{pm(-0.0004, p(0.03), 1, true), "0.000 ± 0.030"},
		{pm(0.97812, p(0.00081), 100, false), "97.812 ± 0.081"},
		{pm(1, p(0), 100, false), "100 ± 0"},
		{pm(2.5e-7, p(3.1e-9), 1, false), "2.50e-07 ± 3.1e-09"},
		{pm(0.012345, p(0.00043), 1, false), "0.01235 ± 0.00043"},
		{pm(1234.5, p(250), 1, false), "1234 ± 250"},
		{thousands(0), "0"},
		{thousands(999), "999"},
		{thousands(1000), "1,000"},
		{thousands(1234567), "1,234,567"},
		{thousands(-1234), "-1,234"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%d: %q, want %q", i, tt.got, tt.want)
		}
	}
}

func TestCDFGolden(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	draw := func(n int, scale float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = scale * math.Exp(rng.NormFloat64())
		}
		return x
	}
	curves := []Curve{
		{Name: "noise floor (chunk 32)", KL: make([]float64, 500), Dashed: true},
		{Name: "storage floor (fp16)", KL: draw(500, 7e-7), Dashed: true},
		{Name: "bf16-experts", KL: draw(500, 7e-4)},
		{Name: "rtn <&>", KL: append(draw(499, 3e-3), -1e-12)},
	}
	svg := CDF("KL(BF16 ‖ candidate) per token: book, 500 tokens", curves)
	golden(t, "cdf.golden.svg", svg)
	if !bytes.Equal(svg, CDF("KL(BF16 ‖ candidate) per token: book, 500 tokens", curves)) {
		t.Error("CDF is not deterministic")
	}
	for _, want := range []string{"noise floor (chunk 32) (all 0)", "rtn &lt;&amp;&gt; (1 ≤ 0)", "<polyline", "1e-8"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// Degenerate inputs draw without panicking.
	CDF("empty", nil)
	CDF("one", []Curve{{Name: "x", KL: []float64{0.5}}, {Name: "none"}})
}

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{"chat": "chat", "a b/c": "a_b_c", "..x": "x", "": "corpus", "é": "_"} {
		if got := FileName(in); got != want {
			t.Errorf("FileName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLinesGolden pins the bytes of a throughput plot (lfmq bench --plot)
// and checks its geometry: the points of a series lie where their values
// put them on the axis drawn (computed by hand), and a NaN cuts the line.
func TestLinesGolden(t *testing.T) {
	xs := []string{"1", "2", "4", "8", "16"}
	series := []Series{
		{Name: "prompt 128", Y: []float64{54, 70, 78, 81, 82}},
		{Name: "prompt 2048 <all>", Y: []float64{30, math.NaN(), 50, 55, 57}},
	}
	svg := Lines("aggregate output tokens/s", "concurrent streams", "tokens/s", xs, series)
	golden(t, "lines.golden.svg", svg)
	if !bytes.Equal(svg, Lines("aggregate output tokens/s", "concurrent streams", "tokens/s", xs, series)) {
		t.Error("Lines is not deterministic")
	}
	// top 82 → step 10, bound 90; the plot area is 446 × 344 from (64, 44):
	// y(54) = 44 + (1 − 54/90)·344 = 181.6; x of the first of 5 = 64 + 0.5/5·446 = 108.6.
	for _, want := range []string{`<circle cx="108.6" cy="181.6"`, ">90</text>", "prompt 2048 &lt;all&gt;"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// The NaN splits the second series: its lone first point is a marker
	// without a line, the rest one line.
	if n := strings.Count(string(svg), "<polyline"); n != 2 {
		t.Errorf("%d polylines, want 2", n)
	}
	for _, tt := range []struct{ top, step, bound float64 }{{82, 10, 90}, {0.37, 0.05, 0.4}, {1, 0.1, 1}, {0, 0.25, 1}, {1234, 200, 1400}} {
		if s, b := niceStep(tt.top); math.Abs(s-tt.step) > 1e-12 || math.Abs(b-tt.bound) > 1e-9 {
			t.Errorf("niceStep(%v) = %v, %v; want %v, %v", tt.top, s, b, tt.step, tt.bound)
		}
	}
}

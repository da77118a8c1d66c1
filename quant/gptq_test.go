package quant

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/safetensors"
	"github.com/lfmq/lfmq/quant/calib"
	"github.com/lfmq/lfmq/quant/gptq"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
)

const (
	tinyFixture = "../testdata/tiny-lfm2-moe"
	tinyCalib   = tinyFixture + "/calibration/calibration.jsonl"
	// fastSeqs is the calibration size of the tests that run by default:
	// 16 of the fixture's 128 windows keep a GPTQ run of the tiny model to
	// a few seconds on two cores; the long tests use all 128.
	fastSeqs = 16
)

var evalCorpora = []string{"chat", "instruct", "code", "book"}

// gptqOptions are the defaults with the fixture's calibration file, seqs of
// its windows and the fixture's eval corpora for the disjointness check.
func gptqOptions(seqs int) GPTQOptions {
	g := DefaultGPTQOptions()
	g.Calib, g.CalibSeqs, g.CalibLen, g.Seed = tinyCalib, seqs, 256, 1
	for _, c := range evalCorpora {
		g.EvalCorpora = append(g.EvalCorpora, EvalCorpus{Name: c, Path: tinyFixture + "/corpora/" + c + ".jsonl"})
	}
	return g
}

type gptqRunCache struct {
	once sync.Once
	dir  string
	res  *Result
	err  error
}

var gptqRuns sync.Map // gptqRunKey → *gptqRunCache

type gptqRunKey struct {
	seqs   int
	rule   ExponentRule
	dampW2 float64
}

// tinyGPTQ quantizes the tiny model with GPTQ on seqs calibration windows,
// once per test binary.
func tinyGPTQ(t *testing.T, seqs int) (string, *Result) {
	t.Helper()
	return tinyGPTQRule(t, seqs, ExponentMax)
}

// tinyGPTQRule is tinyGPTQ with the experts' exponent rule.
func tinyGPTQRule(t *testing.T, seqs int, rule ExponentRule) (string, *Result) {
	t.Helper()
	return tinyGPTQRun(t, gptqRunKey{seqs, rule, DefaultGPTQOptions().DampW2})
}

// tinyGPTQRun quantizes the tiny model with GPTQ as k says, once per test
// binary.
func tinyGPTQRun(t *testing.T, k gptqRunKey) (string, *Result) {
	t.Helper()
	v, _ := gptqRuns.LoadOrStore(k, &gptqRunCache{})
	c := v.(*gptqRunCache)
	c.once.Do(func() {
		c.dir = filepath.Join(testRoot, fmt.Sprintf("gptq-%d-%s-w2-%g", k.seqs, k.rule, k.dampW2))
		g := gptqOptions(k.seqs)
		g.DampW2 = k.dampW2
		c.res, c.err = Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: c.dir, Method: GPTQ, CreatedBy: "test", GPTQ: g, ExponentRule: k.rule})
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.dir, c.res
}

// checkQuality asserts the quality bar on a GPTQ checkpoint's
// metrics: every matrix solved by GPTQ (no fallback) and
// loss_gptq ≤ 0.85·loss_rtn for at least 95 % of the expert matrices.
func checkQuality(t *testing.T, dir string) {
	t.Helper()
	man, _, err := lfmq1.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var metrics gptqMetrics
	if err := json.Unmarshal(man.Metrics, &metrics); err != nil {
		t.Fatal(err)
	}
	if len(metrics.Layers) != 6 {
		t.Fatalf("metrics for %d MoE layers, want 6", len(metrics.Layers))
	}
	var ratios, expertRatios []float64
	for _, l := range metrics.Layers {
		if len(l.Experts) != 16 || l.Fallbacks != 0 {
			t.Errorf("layer %d: %d experts, %d fallbacks", l.Layer, len(l.Experts), l.Fallbacks)
		}
		for _, e := range l.Experts {
			var g, r float64
			for _, m := range []MatrixMetrics{e.W1, e.W3, e.W2} {
				if m.Method != "gptq" || m.Ratio == nil || m.Tokens == 0 {
					t.Fatalf("layer %d expert %d: method %s, ratio %v, tokens %d", l.Layer, e.Expert, m.Method, m.Ratio, m.Tokens)
				}
				ratios = append(ratios, *m.Ratio)
				g += m.LossGPTQ
				r += m.LossRTN
			}
			expertRatios = append(expertRatios, g/r)
		}
		t.Logf("layer %d: mean ratio %.3f (w1 %.3f, w3 %.3f, w2 %.3f), max %.3f; tokens per expert %d / %.1f / %d",
			l.Layer, l.MeanRatio, l.MeanRatioW1, l.MeanRatioW3, l.MeanRatioW2, l.MaxRatio, l.TokensMin, l.TokensMedian, l.TokensMax)
	}
	frac := func(v []float64) float64 {
		n := 0
		for _, x := range v {
			if x <= 0.85 {
				n++
			}
		}
		return float64(n) / float64(len(v))
	}
	sort.Float64s(ratios)
	t.Logf("matrices: %d, ratio ≤ 0.85 for %.1f %%, median %.3f, max %.3f; experts (w1+w3+w2 losses): ≤ 0.85 for %.1f %%",
		len(ratios), 100*frac(ratios), ratios[len(ratios)/2], ratios[len(ratios)-1], 100*frac(expertRatios))
	if f := frac(ratios); f < 0.95 {
		t.Errorf("GPTQ loss ≤ 0.85 × RTN loss for only %.1f %% of expert matrices, want ≥ 95 %%", 100*f)
	}
}

// TestGPTQTiny checks a GPTQ checkpoint of the tiny model: the quality bar,
// canonical tiles, the non-expert tensors equal to RTN's, the recorded
// settings and a clean output directory.
func TestGPTQTiny(t *testing.T) {
	dir, res := tinyGPTQ(t, fastSeqs)
	checkQuality(t, dir)
	ck, err := lfmq1.Open(dir, lfmq1.CheckTensors)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	rtn, err := lfmq1.Open(tinyRTN(t), lfmq1.CheckStructure)
	if err != nil {
		t.Fatal(err)
	}
	defer rtn.Close()
	experts := 0
	for _, e := range ck.Manifest.Tensors {
		r, ok := rtn.Manifest.Tensor(e.Name)
		if !ok {
			t.Fatalf("%s is not in the RTN checkpoint", e.Name)
		}
		if e.Format != lfmq1.BFP4 {
			if e.SHA256 != r.SHA256 {
				t.Errorf("%s: a non-expert tensor differs from RTN's", e.Name)
			}
			continue
		}
		experts++
		st, err := ck.Tensor(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := bfp.Canonical(bfp.BFP4, st.Data, int(e.Shape[0]), int(e.Shape[1])); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
		if e.SHA256 == r.SHA256 {
			t.Errorf("%s: GPTQ bytes equal RTN's", e.Name)
		}
	}
	if experts != 288 {
		t.Errorf("%d BFP4 tensors, want 288", experts)
	}
	q := ck.Manifest.Quantization
	if q.Experts.Method != "gptq" || q.Dense.Method != "rtn" {
		t.Errorf("quantization methods: experts %s, dense %s", q.Experts.Method, q.Dense.Method)
	}
	var s GPTQSettings
	if err := json.Unmarshal(q.Settings, &s); err != nil {
		t.Fatal(err)
	}
	enc, err := calib.NewEncoder(tinyModel, 8192, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := calib.Load(tinyCalib, enc, calib.Options{Seqs: fastSeqs, Len: 256, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Calibration
	if !s.ActOrder || s.Damp.W1 != 0.01 || s.Damp.W3 != 0.01 || s.Damp.W2 != 0.01 ||
		s.Damp.Retries != 3 || s.ShrinkTokens != 128 || s.HessianWeight["w2"] != "g" || s.HessianWeight["w1"] != "g" ||
		s.Order != "sequential" || s.Precision != "float64" || s.ExponentRule != "max" {
		t.Errorf("settings %+v", s)
	}
	if c.Digest != set.Digest || c.Seqs != fastSeqs || c.Len != 256 || c.Seed != 1 || c.ChatDate != "2025-01-01" || c.Tokens != fastSeqs*256 || c.FileSHA256 != set.FileSHA256 {
		t.Errorf("calibration settings %+v, want digest %s", c, set.Digest)
	}
	if d := s.Disjointness; !d.Checked || d.Result != "disjoint" || len(d.Corpora) != 4 || d.EvalWindows == 0 {
		t.Errorf("disjointness %+v", d)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range entries {
		if e.Name()[0] == '.' {
			t.Errorf("left behind beside the checkpoint: %s", e.Name())
		}
	}
	if res.GPTQ == nil || len(res.GPTQ.Layers) != 6 || res.GPTQ.Fallbacks != 0 || res.GPTQ.CalibTokens != fastSeqs*256 {
		t.Fatalf("report %+v", res.GPTQ)
	}
}

// exponentRules are the experts' exponent rules every GPTQ property must
// hold for.
var exponentRules = []ExponentRule{ExponentMax, ExponentSearch, ExponentHessian}

// TestGPTQDeterministic: GOMAXPROCS=1 with one worker gives the same bytes
// as the default, for every exponent rule.
func TestGPTQDeterministic(t *testing.T) {
	for _, rule := range exponentRules {
		t.Run(string(rule), func(t *testing.T) {
			base, _ := tinyGPTQRule(t, fastSeqs, rule)
			other := filepath.Join(t.TempDir(), "one")
			prev := runtime.GOMAXPROCS(1)
			_, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: other, Method: GPTQ, Workers: 1, CreatedBy: "test",
				GPTQ: gptqOptions(fastSeqs), ExponentRule: rule})
			runtime.GOMAXPROCS(prev)
			if err != nil {
				t.Fatal(err)
			}
			sameFiles(t, base, other)
		})
	}
}

// TestGPTQExponentRules: the search and hessian rules give canonical
// tiles, other expert bytes than max with the same dense bytes, record
// their rule, stay within the quality bar, and lower the mean GPTQ loss
// below max's: the loss the hessian rule minimises group by group.
func TestGPTQExponentRules(t *testing.T) {
	maxDir, maxRes := tinyGPTQ(t, fastSeqs)
	for _, rule := range []ExponentRule{ExponentSearch, ExponentHessian} {
		t.Run(string(rule), func(t *testing.T) {
			dir, res := tinyGPTQRule(t, fastSeqs, rule)
			checkQuality(t, dir)
			ck, err := lfmq1.Open(dir, lfmq1.CheckTensors)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			base, err := lfmq1.Open(maxDir, lfmq1.CheckStructure)
			if err != nil {
				t.Fatal(err)
			}
			defer base.Close()
			differ := 0
			for _, e := range ck.Manifest.Tensors {
				b, _ := base.Manifest.Tensor(e.Name)
				if e.Format != lfmq1.BFP4 {
					if e.SHA256 != b.SHA256 {
						t.Errorf("%s: a dense tensor changed with the experts' rule", e.Name)
					}
					continue
				}
				st, err := ck.Tensor(e.Name)
				if err != nil {
					t.Fatal(err)
				}
				if err := bfp.Canonical(bfp.BFP4, st.Data, int(e.Shape[0]), int(e.Shape[1])); err != nil {
					t.Errorf("%s: %v", e.Name, err)
				}
				if e.SHA256 != b.SHA256 {
					differ++
				}
			}
			if differ != 288 {
				t.Errorf("%d of 288 expert tensors differ from the max rule's", differ)
			}
			var s GPTQSettings
			if err := json.Unmarshal(ck.Manifest.Quantization.Settings, &s); err != nil {
				t.Fatal(err)
			}
			if s.ExponentRule != string(rule) || s.DenseExponentRule != "max" {
				t.Errorf("settings record exponent rules %q / %q, want %q / max", s.ExponentRule, s.DenseExponentRule, rule)
			}
			mean := func(r *Result) (m float64) {
				for _, l := range r.GPTQ.Layers {
					m += l.Metrics.MeanRatio / float64(len(r.GPTQ.Layers))
				}
				return m
			}
			t.Logf("mean GPTQ/RTN loss ratio: %s %.4f, max %.4f", rule, mean(res), mean(maxRes))
			if !(mean(res) < mean(maxRes)) {
				t.Errorf("mean loss ratio %.4f with %s, not below max's %.4f", mean(res), rule, mean(maxRes))
			}
		})
	}
}

// sameFiles asserts that two directories hold the same files, byte for byte.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	ea, _ := os.ReadDir(a)
	eb, _ := os.ReadDir(b)
	if len(ea) != len(eb) || len(ea) == 0 {
		t.Fatalf("%d files vs %d", len(ea), len(eb))
	}
	for _, e := range ea {
		x, err1 := os.ReadFile(filepath.Join(a, e.Name()))
		y, err2 := os.ReadFile(filepath.Join(b, e.Name()))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs", e.Name())
		}
	}
}

// cancelAfter cancels a context once MoE layer layer is done.
type cancelAfter struct {
	layer  int
	cancel context.CancelFunc
}

func (c *cancelAfter) Start(int)   {}
func (c *cancelAfter) Done(string) {}
func (c *cancelAfter) Stage(layer int, stage string) {
	if layer == c.layer && stage == "done" {
		c.cancel()
	}
}

// progressLog records what a GPTQ run reports, in order.
type progressLog struct {
	mu     sync.Mutex
	total  int
	events []string // "stage L S", "done NAME" or "warn MSG"
}

func (p *progressLog) Warn(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, "warn "+msg)
}

func (p *progressLog) Start(total int) { p.total = total }
func (p *progressLog) Done(tensor string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, "done "+tensor)
}
func (p *progressLog) Stage(layer int, stage string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, fmt.Sprintf("stage %d %s", layer, stage))
}

// check: every one of the run's tensors was reported once, and a solved
// layer's experts as their solves ended: w1 and w3 during "solve w1/w3",
// w2 during "solve w2", so the count moves while a layer is solved; a
// resumed layer's between its "resumed" and "done".
func (p *progressLog) check(t *testing.T, tensors int) {
	t.Helper()
	if p.total != tensors {
		t.Errorf("Start(%d), the checkpoint has %d tensors", p.total, tensors)
	}
	seen := map[string]bool{}
	stage := map[int]string{}
	var layer, experts int
	for _, ev := range p.events {
		if strings.HasPrefix(ev, "warn ") {
			continue
		}
		if rest, ok := strings.CutPrefix(ev, "stage "); ok {
			var s string
			n, _ := fmt.Sscanf(rest, "%d", &layer)
			if n != 1 {
				t.Fatalf("event %q", ev)
			}
			_, s, _ = strings.Cut(rest, " ")
			stage[layer] = s
			continue
		}
		name := strings.TrimPrefix(ev, "done ")
		if seen[name] {
			t.Errorf("%s reported twice", name)
		}
		seen[name] = true
		var l, e int
		var kind string
		if n, _ := fmt.Sscanf(name, "model.layers.%d.feed_forward.experts.%d.%s", &l, &e, &kind); n != 3 {
			continue // a dense, head or copied tensor
		}
		experts++
		want := map[string]string{"w1.weight": "solve w1/w3", "w3.weight": "solve w1/w3", "w2.weight": "solve w2"}[kind]
		if got := stage[l]; got != want && got != "resumed" {
			t.Errorf("%s reported during layer %d's %q, want %q (or a resumed layer)", name, l, got, want)
		}
	}
	if len(seen) != tensors || experts == 0 {
		t.Errorf("%d tensors reported (%d experts'), the checkpoint has %d", len(seen), experts, tensors)
	}
}

// TestGPTQResume interrupts a run after its third MoE layer and resumes
// it: the result is byte-identical to an uninterrupted run, the interrupted
// run leaves no directory that looks complete, and a resume with other
// settings or without --resume is refused.
func TestGPTQResume(t *testing.T) {
	base, _ := tinyGPTQ(t, fastSeqs)
	out := filepath.Join(t.TempDir(), "resumed")
	partial := lfmq1.PartialDir(out)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Quantize(ctx, Options{ModelDir: tinyModel, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: gptqOptions(fastSeqs),
		Progress: &cancelAfter{layer: 4, cancel: cancel}})
	var pe *PartialError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &pe) || pe.Layers != 3 || pe.Partial != partial {
		t.Fatalf("interrupted run: err = %v, want a PartialError with 3 layers wrapping context.Canceled", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the interrupted run created %s", out)
	}
	if lfmq1.IsCheckpoint(partial) {
		t.Fatal("the partial directory looks like a checkpoint")
	}
	for _, f := range []string{"experts-02.safetensors", "experts-04.safetensors", ".resume/progress.json"} {
		if _, err := os.Stat(filepath.Join(partial, f)); err != nil {
			t.Errorf("partial directory lacks %s: %v", f, err)
		}
	}

	// Without Resume the partial run is refused, and left alone.
	_, err = Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: gptqOptions(fastSeqs)})
	if !errors.As(err, new(*lfmq1.PartialExistsError)) {
		t.Fatalf("a new run over a partial one: err = %v", err)
	}
	// Other settings cannot resume it; the differing field is named.
	other := gptqOptions(fastSeqs)
	other.Resume, other.DampW2 = true, 0.5
	_, err = Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: other})
	var me *ResumeMismatchError
	if !errors.As(err, &me) || me.Field != "settings.damp.w2" || me.Recorded != "0.01" || me.Current != "0.5" {
		t.Fatalf("resume with another damping: err = %v", err)
	}

	g := gptqOptions(fastSeqs)
	g.Resume = true
	rec := &progressLog{}
	res, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: g, Progress: rec})
	if err != nil {
		t.Fatal(err)
	}
	rec.check(t, res.Tensors)
	resumed := resumedLayers(res)
	if len(resumed) != 3 || resumed[0] != 2 || resumed[2] != 4 {
		t.Errorf("resumed layers %v, want [2 3 4]", resumed)
	}
	sameFiles(t, base, out)
	if _, err := os.Stat(partial); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the partial directory outlived the commit")
	}
}

func TestGPTQRefusals(t *testing.T) {
	t.Run("no calibration file", func(t *testing.T) {
		g := DefaultGPTQOptions()
		_, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: filepath.Join(t.TempDir(), "o"), Method: GPTQ, GPTQ: g})
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Field != "Calib" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("calibration shares text with an eval corpus", func(t *testing.T) {
		dir := t.TempDir()
		// Calibrate on the code corpus itself.
		g := gptqOptions(4)
		g.Calib = tinyFixture + "/corpora/code.jsonl"
		out := filepath.Join(dir, "o")
		_, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: out, Method: GPTQ, GPTQ: g})
		var ov *calib.OverlapError
		if !errors.As(err, &ov) || ov.Corpus != "code" {
			t.Fatalf("err = %v, want an OverlapError naming code", err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("a refused run left %d entries", len(left))
		}
	})
	t.Run("bad option", func(t *testing.T) {
		g := gptqOptions(4)
		g.BlockSize = 0
		_, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: filepath.Join(t.TempDir(), "o"), Method: GPTQ, GPTQ: g})
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Field != "BlockSize" {
			t.Fatalf("err = %v", err)
		}
	})
}

// meanKL returns the mean over scored positions of KL(ref ‖ cand) in
// float64 (docs/scoring.md, "Per-token quantities") for each record,
// run from an empty state.
func meanKL(t *testing.T, ref, cand *model.Model, records [][]int) float64 {
	t.Helper()
	var sum float64
	var n int
	for _, ids := range records {
		lr, err := ref.Forward(context.Background(), []*model.Sequence{ref.NewSequence()}, [][]int{ids}, model.ForwardOptions{Logits: model.AllLogits})
		if err != nil {
			t.Fatal(err)
		}
		lc, err := cand.Forward(context.Background(), []*model.Sequence{cand.NewSequence()}, [][]int{ids}, model.ForwardOptions{Logits: model.AllLogits})
		if err != nil {
			t.Fatal(err)
		}
		V := ref.Config.VocabSize
		for p := 0; p+1 < len(ids); p++ {
			sum += klRow(lr[0][p*V:(p+1)*V], lc[0][p*V:(p+1)*V])
			n++
		}
	}
	return sum / float64(n)
}

func klRow(zr, zc []float32) float64 {
	lse := func(z []float32) float64 {
		m := math.Inf(-1)
		for _, v := range z {
			m = max(m, float64(v))
		}
		var s float64
		for _, v := range z {
			s += math.Exp(float64(v) - m)
		}
		return m + math.Log(s)
	}
	a, b := lse(zr), lse(zc)
	var kl float64
	for v := range zr {
		lpr, lpc := float64(zr[v])-a, float64(zc[v])-b
		kl += math.Exp(lpr) * (lpr - lpc)
	}
	return kl
}

// evalRecords returns the first n records of each fixture eval corpus, cut
// to at most maxLen tokens.
func evalRecords(t *testing.T, n, maxLen int) [][]int {
	t.Helper()
	enc, err := calib.NewEncoder(tinyModel, 8192, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int
	for _, c := range evalCorpora {
		cp, err := calib.LoadCorpus(c, tinyFixture+"/corpora/"+c+".jsonl", enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range cp.Records[:n] {
			out = append(out, r.IDs[:min(len(r.IDs), maxLen)])
		}
	}
	return out
}

// compareKL checks that the GPTQ checkpoint's logits are closer to BF16's
// than the RTN checkpoint's (mean KL over the records).
func compareKL(t *testing.T, gptqDir string, records [][]int) {
	t.Helper()
	load := func(dir string) *model.Model {
		m, err := load.Load(dir, load.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	ref, rtn, gq := load(tinyModel), load(tinyRTN(t)), load(gptqDir)
	klRTN := meanKL(t, ref, rtn, records)
	klGPTQ := meanKL(t, ref, gq, records)
	t.Logf("mean KL(BF16 ‖ ·) over %d records: RTN %.5f, GPTQ %.5f (GPTQ/RTN %.3f)", len(records), klRTN, klGPTQ, klGPTQ/klRTN)
	if !(klGPTQ < klRTN) {
		t.Errorf("GPTQ mean KL %.5f is not below RTN's %.5f", klGPTQ, klRTN)
	}
}

// TestGPTQCloserToBF16 compares the fast GPTQ checkpoint with RTN on a few
// records of every eval corpus.
func TestGPTQCloserToBF16(t *testing.T) {
	dir, _ := tinyGPTQ(t, fastSeqs)
	compareKL(t, dir, evalRecords(t, 2, 256))
}

// TestSolveFallback: a Hessian that cannot be factored even after the
// retries (singular, with no damping and no shrinkage to help) falls back
// to RTN with its reason recorded, or fails with Strict.
func TestSolveFallback(t *testing.T) {
	const k, out = 32, 32
	st := hessian.NewStat(k)
	// H = S (two rows of weight 1): inputs 0 and 1 always equal, so H is
	// exactly singular: the second pivot is 4 − (4/2)² = 0.
	x := make([]float32, k)
	x[0], x[1] = 2, 2
	st.Add(x, 1)
	st.Add(make([]float32, k), 1)
	if err := st.Finish(); err != nil {
		t.Fatal(err)
	}
	pool, _ := hessian.Pool([]*hessian.Stat{st})
	w := make([]float32, out*k)
	for i := range w {
		w[i] = math.Float32frombits(math.Float32bits(float32(math.Sin(float64(i))/10)) &^ 0xFFFF)
	}
	g := DefaultGPTQOptions()
	g.DampW13, g.Shrink = 0, 0
	r := &gptqRun{g: g, report: &GPTQReport{}}
	pe := &plan.Entry{Name: "w", Source: "w"}
	res, err := r.solve(t.Context(), 2, 5, "w1/w3", st, pool, 0, [][]float32{w}, []*plan.Entry{pe}, out, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := res[0].metric
	if m.Method != "rtn" || m.Reason != "cholesky_failed" || m.Retries != 3 || m.Ratio == nil || *m.Ratio != 1 {
		t.Errorf("metric %+v, want an RTN fallback after 3 retries with ratio 1", m)
	}
	want, _ := bfp.PackMatrix(bfp.BFP4, w, out, k)
	if !bytes.Equal(res[0].packed, want) {
		t.Error("the fallback did not store the RTN bytes")
	}
	if len(r.report.Warnings) != 1 {
		t.Errorf("warnings %q", r.report.Warnings)
	}
	r.g.Strict = true
	_, err = r.solve(t.Context(), 2, 5, "w1/w3", st, pool, 0, [][]float32{w}, []*plan.Entry{pe}, out, k, 1)
	var fe *FallbackError
	if !errors.As(err, &fe) || fe.Layer != 2 || fe.Expert != 5 || !errors.Is(err, gptq.ErrFactor) {
		t.Errorf("strict: err = %v", err)
	}
}

// TestGPTQAblations runs the non-default paths once: statistics from the
// unquantized model, g² weights for w2, no act-order. The result still
// beats RTN and the settings say how it was made.
func TestGPTQAblations(t *testing.T) {
	g := gptqOptions(8)
	g.Sequential, g.W2Weight, g.ActOrder, g.EvalCorpora = false, hessian.WeightG2, false, nil
	out := filepath.Join(t.TempDir(), "ablation")
	res, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: g})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.GPTQ.Layers {
		if m := l.Metrics; m.MaxRatio >= 1 || m.Fallbacks != 0 {
			t.Errorf("layer %d: max ratio %.3f, %d fallbacks", l.Layer, m.MaxRatio, m.Fallbacks)
		}
	}
	man, _, err := lfmq1.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	var s GPTQSettings
	json.Unmarshal(man.Quantization.Settings, &s)
	if s.Order != "parallel" || s.HessianWeight["w2"] != "g2" || s.ActOrder || s.Disjointness.Checked || s.Disjointness.Result != "not_checked" {
		t.Errorf("settings %+v", s)
	}
	base, _ := tinyGPTQ(t, fastSeqs)
	a, _ := os.ReadFile(filepath.Join(base, "experts-02.safetensors"))
	b, _ := os.ReadFile(filepath.Join(out, "experts-02.safetensors"))
	if bytes.Equal(a, b) {
		t.Error("the ablation wrote the default run's experts")
	}
}

// TestReplaceLinearMatchesCheckpoint: the BF16 model with every BFP weight
// swapped in through ReplaceLinear (BFP8 dense and head, BFP4 experts), as
// sequential calibration runs it, gives the logits of the lfmq-1
// checkpoint loaded directly, bit for bit.
func TestReplaceLinearMatchesCheckpoint(t *testing.T) {
	dir, _ := tinyGPTQ(t, fastSeqs)
	direct, err := load.Load(dir, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	swapped, err := load.Load(tinyModel, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer swapped.Close()
	ck, err := lfmq1.Open(dir, lfmq1.CheckStructure)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	n := 0
	for _, e := range ck.Manifest.Tensors {
		if !e.Format.IsBFP() {
			continue
		}
		st, err := ck.Tensor(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		f := kernels.BFP8
		if e.Format == lfmq1.BFP4 {
			f = kernels.BFP4
		}
		mat, err := kernels.NewBFP(f, int(e.Shape[0]), int(e.Shape[1]), st.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := swapped.ReplaceLinear(e.Name, mat); err != nil {
			t.Fatal(err)
		}
		n++
	}
	ids := evalRecords(t, 1, 200)[0]
	a, err := direct.Forward(context.Background(), []*model.Sequence{direct.NewSequence()}, [][]int{ids}, model.ForwardOptions{Logits: model.AllLogits})
	if err != nil {
		t.Fatal(err)
	}
	b, err := swapped.Forward(context.Background(), []*model.Sequence{swapped.NewSequence()}, [][]int{ids}, model.ForwardOptions{Logits: model.AllLogits})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a[0] {
		if a[0][i] != b[0][i] {
			t.Fatalf("logit %d: checkpoint %v, BF16 model with %d weights replaced %v", i, a[0][i], n, b[0][i])
		}
	}
}

// TestGPTQWithoutTokenizer: calibration records of input_ids need no
// tokenizer, so a checkpoint without tokenizer.json quantizes; a text
// record then names the missing file.
func TestGPTQWithoutTokenizer(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.json", "generation_config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(tinyModel, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g := DefaultGPTQOptions()
	g.Calib, g.CalibSeqs, g.CalibLen, g.Seed = tinyCalib, 4, 256, 1
	out := filepath.Join(t.TempDir(), "gptq")
	if _, err := Quantize(t.Context(), Options{ModelDir: dir, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: g}); err != nil {
		t.Fatalf("GPTQ from input_ids without a tokenizer: %v", err)
	}
	text := filepath.Join(t.TempDir(), "text.jsonl")
	if err := os.WriteFile(text, []byte(`{"text": "hello"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Calib = text
	_, err := Quantize(t.Context(), Options{ModelDir: dir, OutDir: filepath.Join(t.TempDir(), "g2"), Method: GPTQ, CreatedBy: "test", GPTQ: g})
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json") || !strings.Contains(err.Error(), "input_ids") {
		t.Errorf("a text record without a tokenizer: %v, want an error naming tokenizer.json and input_ids", err)
	}
}

// TestGPTQNaNIsNotResumable: a NaN weight found after some layers are done
// stops the run without keeping a partial run or suggesting --resume, which
// would only meet the same NaN again.
func TestGPTQNaNIsNotResumable(t *testing.T) {
	const bad = "model.layers.6.feed_forward.experts.5.w2.weight"
	model := copyModelWith(t, func(tensors []safetensors.Tensor) []safetensors.Tensor {
		for i := range tensors {
			if tensors[i].Name == bad {
				tensors[i].Data[14], tensors[i].Data[15] = 0xC0, 0x7F // element 7: NaN
			}
		}
		return tensors
	})
	g := gptqOptions(4)
	g.EvalCorpora = nil
	out := filepath.Join(t.TempDir(), "o")
	_, err := Quantize(context.Background(), Options{ModelDir: model, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: g})
	var nf *NonFiniteError
	if !errors.As(err, &nf) || nf.Tensor != bad {
		t.Fatalf("err = %v, want a NonFiniteError for %s", err, bad)
	}
	if strings.Contains(err.Error(), "resume") || errors.As(err, new(*PartialError)) {
		t.Errorf("a NaN weight suggests resuming: %v", err)
	}
	if _, err := os.Stat(lfmq1.PartialDir(out)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a NaN weight left a partial run: %v", err)
	}
}

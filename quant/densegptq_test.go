package quant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/calib"
)

var denseGPTQRun struct {
	once sync.Once
	dir  string
	err  error
}

// denseGPTQOptions is a tiny-model GPTQ run with DenseMethod GPTQ.
func denseGPTQOptions(out string) Options {
	return Options{ModelDir: tinyModel, OutDir: out, Method: GPTQ, DenseMethod: GPTQ, CreatedBy: "test", GPTQ: gptqOptions(fastSeqs)}
}

// tinyDenseGPTQ quantizes the tiny MoE with --dense-method gptq, once per
// test binary.
func tinyDenseGPTQ(t *testing.T) string {
	t.Helper()
	c := &denseGPTQRun
	c.once.Do(func() {
		c.dir = filepath.Join(testRoot, "gptq-dense")
		_, c.err = Quantize(context.Background(), denseGPTQOptions(c.dir))
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.dir
}

// openMetrics opens a GPTQ checkpoint and reads its metrics.
func openMetrics(t *testing.T, dir string) (*lfmq1.Checkpoint, gptqMetrics) {
	t.Helper()
	ck, err := lfmq1.Open(dir, lfmq1.CheckStructure)
	if err != nil {
		t.Fatal(err)
	}
	var metrics gptqMetrics
	if err := json.Unmarshal(ck.Manifest.Metrics, &metrics); err != nil {
		ck.Close()
		t.Fatal(err)
	}
	return ck, metrics
}

// linearInputs keeps the input rows of the named linear weights.
type linearInputs struct {
	model.BaseObserver
	want map[string]bool
	x    map[string][]float32
}

func (o *linearInputs) Linear(_ int, name string, _ model.Rows, x []float32) {
	if o.want[name] {
		o.x[name] = append(o.x[name], x...)
	}
}

// TestDenseMethodGPTQLoss: with DenseMethod GPTQ every BFP8 dense tensor
// and the head are solved by GPTQ, each with a loss ≤ RTN's, and the
// manifest's losses are ½·tr(ΔW·H·ΔWᵀ) with H = 2·Σx·xᵀ/n over the inputs
// the run saw: recomputed here as Σ‖ΔW·x‖²/n from a forward of the
// finished checkpoint, for the matrices whose inputs depend only on the
// layers below (q/k/v, the conv in_proj, the head), which in sequential
// mode are those of the finished checkpoint.
func TestDenseMethodGPTQLoss(t *testing.T) {
	dir := tinyDenseGPTQ(t)
	ck, metrics := openMetrics(t, dir)
	defer ck.Close()
	if !strings.Contains(string(ck.Manifest.Quantization.Settings), `"dense_gptq"`) {
		t.Errorf("settings %s lack dense_gptq", ck.Manifest.Quantization.Settings)
	}
	// The quantization block (what inspect and the model card show) names
	// the method of each class.
	if q := ck.Manifest.Quantization; q.Experts.Method != "gptq" || q.Dense.Method != "gptq" || q.Head.Method != "gptq" || q.Kept.Method != "none" {
		t.Errorf("class methods experts %s, dense %s, head %s, kept %s; want gptq, gptq, gptq, none", q.Experts.Method, q.Dense.Method, q.Head.Method, q.Kept.Method)
	}
	want := 0
	for _, e := range ck.Manifest.Tensors {
		if e.Format == lfmq1.BFP8 {
			want++
			m, ok := metrics.Dense[e.Name]
			if !ok || m.Method != "gptq" || m.Tokens == 0 {
				t.Errorf("%s: dense metrics %+v, want a GPTQ solve", e.Name, m)
				continue
			}
			if m.LossGPTQ > m.LossRTN {
				t.Errorf("%s: GPTQ loss %g above RTN's %g", e.Name, m.LossGPTQ, m.LossRTN)
			}
		}
	}
	if want == 0 || len(metrics.Dense) != want {
		t.Fatalf("%d dense metrics for %d BFP8 tensors", len(metrics.Dense), want)
	}

	g := gptqOptions(fastSeqs)
	enc, err := calib.NewEncoder(tinyModel, 8192, g.chatTime())
	if err != nil {
		t.Fatal(err)
	}
	set, err := calib.Load(g.Calib, enc, calib.Options{Seqs: g.CalibSeqs, Len: g.CalibLen, Seed: g.Seed})
	if err != nil {
		t.Fatal(err)
	}
	obs := &linearInputs{want: map[string]bool{"lm_head.weight": true}, x: map[string][]float32{}}
	for name := range metrics.Dense {
		if strings.HasSuffix(name, "_proj.weight") && !strings.HasSuffix(name, "out_proj.weight") {
			obs.want[name] = true
		}
	}
	m, err := load.Load(dir, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, w := range set.Windows {
		if _, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{w}, model.ForwardOptions{Logits: model.AllLogits, Observer: obs}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := hf.Open(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	checked := 0
	for name := range obs.want {
		rec := metrics.Dense[name]
		e, _ := ck.Manifest.Tensor(name)
		out, in := int(e.Shape[0]), int(e.Shape[1])
		source := name
		if name == "lm_head.weight" {
			source = "model.embed_tokens.weight" // tied
		}
		w, err := src.Float32(source)
		if err != nil {
			t.Fatal(err)
		}
		st, err := ck.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		qg, err := bfp.UnpackMatrix(bfp.BFP8, st.Data, out, in)
		if err != nil {
			t.Fatal(err)
		}
		packed, _ := bfp.PackMatrix(bfp.BFP8, w, out, in)
		qr, _ := bfp.UnpackMatrix(bfp.BFP8, packed, out, in)
		x := obs.x[name]
		n := float64(len(x) / in)
		if int(n) != rec.Tokens {
			t.Errorf("%s: %d tokens, manifest %d", name, int(n), rec.Tokens)
		}
		lg, lr := outputLoss(t, w, qg, x, out, in)/n, outputLoss(t, w, qr, x, out, in)/n
		t.Logf("%s: loss GPTQ %.4g (manifest %.4g), RTN %.4g (manifest %.4g)", name, lg, rec.LossGPTQ, lr, rec.LossRTN)
		for _, c := range [][2]float64{{lg, rec.LossGPTQ}, {lr, rec.LossRTN}} {
			if math.Abs(c[0]-c[1]) > 1e-3*c[1] {
				t.Errorf("%s: recomputed loss %.6g, manifest %.6g", name, c[0], c[1])
			}
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("checked %d tensors", checked)
	}
}

// TestDenseMethodDeterministic: --dense-method gptq gives the same bytes
// at GOMAXPROCS 1 with one worker and another lazy block size.
func TestDenseMethodDeterministic(t *testing.T) {
	base := tinyDenseGPTQ(t)
	other := filepath.Join(t.TempDir(), "one")
	opts := denseGPTQOptions(other)
	opts.Workers, opts.GPTQ.BlockSize = 1, 7
	prev := runtime.GOMAXPROCS(1)
	_, err := Quantize(context.Background(), opts)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, base, other)
}

// TestDenseMethodResume: a --dense-method gptq run interrupted after MoE
// layer 3 keeps layers 0–3's dense and expert files; resuming it gives the
// bytes of an uninterrupted run.
func TestDenseMethodResume(t *testing.T) {
	base := tinyDenseGPTQ(t)
	out := filepath.Join(t.TempDir(), "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := denseGPTQOptions(out)
	opts.Progress = &cancelAfter{layer: 3, cancel: cancel}
	_, err := Quantize(ctx, opts)
	var pe *PartialError
	// Layers 0–3: four dense results and two expert ones (2, 3), four
	// layers, not six.
	if !errors.Is(err, context.Canceled) || !errors.As(err, &pe) || pe.Layers != 4 || !strings.Contains(err.Error(), "4 layers are done") {
		t.Fatalf("interrupted run: err = %v, want a PartialError with 4 layers", err)
	}
	for _, f := range []string{"layer-03.safetensors", "experts-03.safetensors", ".resume/dense-03.json"} {
		if !fileExists(filepath.Join(lfmq1.PartialDir(out), f)) {
			t.Errorf("the partial directory lacks %s", f)
		}
	}
	opts = denseGPTQOptions(out)
	opts.GPTQ.Resume = true
	rec := &progressLog{}
	opts.Progress = rec
	res, err := Quantize(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	rec.check(t, res.Tensors)
	// The head's stages are the head's (StageHead), not a layer 8's.
	head := false
	for _, ev := range rec.events {
		head = head || strings.HasPrefix(ev, fmt.Sprintf("stage %d ", StageHead))
		if strings.HasPrefix(ev, "stage 8 ") {
			t.Errorf("event %q: the head is no layer 8", ev)
		}
	}
	if !head {
		t.Error("no stage of the head was reported")
	}
	if resumed := resumedLayers(res); fmt.Sprint(resumed) != "[2 3]" {
		t.Errorf("resumed expert layers %v, want [2 3]", resumed)
	}
	sameFiles(t, base, out)
}

// TestDenseMethodKeepExperts: BF16 experts with GPTQ dense tensors (the
// ablation) store the experts unquantized and solve the rest.
func TestDenseMethodKeepExperts(t *testing.T) {
	out := filepath.Join(t.TempDir(), "keep")
	opts := denseGPTQOptions(out)
	opts.KeepExperts = true
	if _, err := Quantize(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	man, _, err := lfmq1.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	var metrics gptqMetrics
	if err := json.Unmarshal(man.Metrics, &metrics); err != nil {
		t.Fatal(err)
	}
	if len(metrics.Layers) != 0 || len(metrics.Dense) == 0 {
		t.Errorf("%d expert layers and %d dense metrics; want none and some", len(metrics.Layers), len(metrics.Dense))
	}
	if q := man.Quantization; q.Experts.Method != "none" || q.Dense.Method != "gptq" || q.Head.Method != "gptq" {
		t.Errorf("class methods experts %s, dense %s, head %s; want none, gptq, gptq", q.Experts.Method, q.Dense.Method, q.Head.Method)
	}
	experts := 0
	for _, e := range man.Tensors {
		if strings.Contains(e.Name, ".experts.") {
			experts++
			if e.Format != lfmq1.BF16 {
				t.Fatalf("%s stored as %s, want bf16", e.Name, e.Format)
			}
		}
	}
	if experts != 6*16*3 {
		t.Errorf("%d expert tensors, want %d", experts, 6*16*3)
	}
	if _, err := lfmq1.Open(out, lfmq1.CheckStructure); err != nil {
		t.Error(err)
	}
	// RTN has no calibration statistics for the dense tensors.
	_, err = Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: filepath.Join(t.TempDir(), "rtn"), Method: RTN, DenseMethod: GPTQ})
	if oe := new(OptionError); !errors.As(err, &oe) || oe.Field != "DenseMethod" {
		t.Errorf("RTN with DenseMethod GPTQ: err = %v, want an OptionError on DenseMethod", err)
	}
}

// TestDenseMethodParallel: without --sequential the dense statistics come
// from the unquantized model, whose stream reaches the head past the last
// MoE layer; the run completes with every BFP8 tensor solved.
func TestDenseMethodParallel(t *testing.T) {
	out := filepath.Join(t.TempDir(), "parallel")
	opts := denseGPTQOptions(out)
	opts.GPTQ.Sequential = false
	if _, err := Quantize(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	ck, metrics := openMetrics(t, out)
	defer ck.Close()
	if m, ok := metrics.Dense["lm_head.weight"]; !ok || m.Method != "gptq" || m.LossGPTQ > m.LossRTN {
		t.Errorf("head metrics %+v", m)
	}
	var settings GPTQSettings
	if err := json.Unmarshal(ck.Manifest.Quantization.Settings, &settings); err != nil {
		t.Fatal(err)
	}
	if d := settings.DenseGPTQ; d == nil || d.Order != "parallel" || d.Damp != 0.01 {
		t.Errorf("dense_gptq settings %+v", d)
	}
}

// resumedLayers lists the layers a run took over from its partial directory.
func resumedLayers(res *Result) []int {
	var resumed []int
	for _, l := range res.GPTQ.Layers {
		if l.Resumed {
			resumed = append(resumed, l.Layer)
		}
	}
	return resumed
}

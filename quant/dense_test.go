package quant

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/calib"
)

// denseModel is the dense fixture (model_type "lfm2"); it shares the MoE
// fixture's tokenizer, so the MoE fixture's calibration set and corpora
// serve it too.
const denseModel = "../testdata/tiny-lfm2/model"

var denseRuns sync.Map // string → *gptqRunCache

// denseCheckpoint quantizes the dense fixture once per test binary under
// key: "rtn" (BFP4 FFN), "rtn-bfp8" (BFP8 FFN) or "gptq" (fastSeqs windows).
func denseCheckpoint(t *testing.T, key string) string {
	t.Helper()
	v, _ := denseRuns.LoadOrStore(key, &gptqRunCache{})
	c := v.(*gptqRunCache)
	c.once.Do(func() {
		c.dir = filepath.Join(testRoot, "dense-"+key)
		opts := Options{ModelDir: denseModel, OutDir: c.dir, Method: RTN, CreatedBy: "test"}
		switch key {
		case "rtn-bfp8":
			opts.FFNFormat = lfmq1.BFP8
		case "gptq":
			opts.Method, opts.GPTQ = GPTQ, gptqOptions(fastSeqs)
		}
		c.res, c.err = Quantize(context.Background(), opts)
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.dir
}

// TestDenseRTNBytes: every BFP tensor of a dense RTN checkpoint (BFP4 or
// BFP8 FFN) is exactly what the plain packer makes of the decoded source
// weights, kept tensors are the source bytes, and the manifest records
// the architecture and the FFN class.
func TestDenseRTNBytes(t *testing.T) {
	src, err := hf.Open(denseModel)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, tc := range []struct {
		key string
		ffn lfmq1.TensorFormat
	}{{"rtn", lfmq1.BFP4}, {"rtn-bfp8", lfmq1.BFP8}} {
		t.Run(tc.key, func(t *testing.T) {
			ck, err := lfmq1.Open(denseCheckpoint(t, tc.key), lfmq1.CheckStructure)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			m := ck.Manifest
			if m.Architecture != "lfm2" {
				t.Errorf("architecture %q, want lfm2", m.Architecture)
			}
			q := m.Quantization
			if q.FFN == nil || q.FFN.Method != "rtn" || fmt.Sprint(q.FFN.Formats) != fmt.Sprint([]lfmq1.TensorFormat{tc.ffn}) || q.FFN.Tensors != 24 {
				t.Errorf("ffn class %+v, want rtn [%s] 24 tensors", q.FFN, tc.ffn)
			}
			if q.Experts.Tensors != 0 || q.Experts.Method != "none" || q.Dense.Tensors != 22 || q.Head.Tensors != 1 {
				t.Errorf("classes: experts %d, dense %d, head %d; want 0, 22, 1", q.Experts.Tensors, q.Dense.Tensors, q.Head.Tensors)
			}
			packed := map[lfmq1.TensorFormat]int{}
			for _, e := range m.Tensors {
				st, err := ck.Tensor(e.Name)
				if err != nil {
					t.Fatal(err)
				}
				srcName := sourceName(e.Name)
				if isFFN := strings.Contains(e.Name, "feed_forward."); isFFN != strings.HasPrefix(e.File, "ffn-") || (isFFN && e.Format != tc.ffn) {
					t.Errorf("%s: %s in %s", e.Name, e.Format, e.File)
				}
				if !e.Format.IsBFP() {
					raw, _ := src.Bytes(srcName)
					if !bytes.Equal(raw, st.Data) {
						t.Errorf("%s: kept bytes differ from the source", e.Name)
					}
					continue
				}
				w, err := src.Float32(srcName)
				if err != nil {
					t.Fatal(err)
				}
				f, _ := bfp.ParseFormat(string(e.Format))
				want, err := bfp.PackMatrix(f, w, int(e.Shape[0]), int(e.Shape[1]))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(st.Data, want) {
					t.Errorf("%s (%s): bytes differ from the plain packer's", e.Name, e.Format)
				}
				packed[e.Format]++
			}
			want := map[lfmq1.TensorFormat]int{lfmq1.BFP8: 23, tc.ffn: 24}
			if tc.ffn == lfmq1.BFP8 {
				want = map[lfmq1.TensorFormat]int{lfmq1.BFP8: 47}
			}
			if fmt.Sprint(packed) != fmt.Sprint(want) {
				t.Errorf("packed tensors %v, want %v", packed, want)
			}
		})
	}
}

// TestDenseDeterministic: a dense checkpoint's bytes do not depend on the
// workers or GOMAXPROCS, by RTN and by GPTQ.
func TestDenseDeterministic(t *testing.T) {
	for _, tc := range []struct {
		key  string
		opts Options
	}{
		{"rtn", Options{Method: RTN}},
		{"gptq", Options{Method: GPTQ, GPTQ: gptqOptions(fastSeqs)}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			base := denseCheckpoint(t, tc.key)
			for _, workers := range []int{1, 3} {
				o := tc.opts
				o.ModelDir, o.OutDir, o.Workers, o.CreatedBy = denseModel, filepath.Join(t.TempDir(), "out"), workers, "test"
				prev := runtime.GOMAXPROCS(workers)
				_, err := Quantize(context.Background(), o)
				runtime.GOMAXPROCS(prev)
				if err != nil {
					t.Fatal(err)
				}
				sameFiles(t, base, o.OutDir)
			}
		})
	}
}

// TestDenseGPTQLoss: GPTQ's FFN matrices lose at most 0.6× what RTN's do
// under the same Hessian, mean over the 24 matrices. The losses are
// recomputed here from the activations of the finished checkpoint (whose
// weights below and around each FFN are those the sequential run
// calibrated with), not read from the manifest, whose figures are checked
// against them.
func TestDenseGPTQLoss(t *testing.T) {
	dir := denseCheckpoint(t, "gptq")
	ck, err := lfmq1.Open(dir, lfmq1.CheckStructure)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if q := ck.Manifest.Quantization.FFN; q == nil || q.Method != "gptq" || q.Tensors != 24 {
		t.Fatalf("ffn class %+v, want gptq, 24 tensors", q)
	}
	var metrics gptqMetrics
	if err := json.Unmarshal(ck.Manifest.Metrics, &metrics); err != nil {
		t.Fatal(err)
	}
	if len(metrics.Layers) != 8 {
		t.Fatalf("metrics for %d layers, want 8", len(metrics.Layers))
	}

	// The calibration windows, as the run chose them.
	g := gptqOptions(fastSeqs)
	enc, err := calib.NewEncoder(denseModel, 8192, g.chatTime())
	if err != nil {
		t.Fatal(err)
	}
	set, err := calib.Load(g.Calib, enc, calib.Options{Seqs: g.CalibSeqs, Len: g.CalibLen, Seed: g.Seed})
	if err != nil {
		t.Fatal(err)
	}
	m, err := load.Load(dir, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	obs := &ffnInputs{x: map[string][]float32{}}
	for _, w := range set.Windows {
		if _, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{w}, model.ForwardOptions{Logits: model.NoLogits, Observer: obs}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := hf.Open(denseModel)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	var sum float64
	n := 0
	for l := range 8 {
		lm := metrics.Layers[l]
		if len(lm.Experts) != 1 || lm.Fallbacks != 0 {
			t.Fatalf("layer %d: %d FFN entries, %d fallbacks; want 1, 0", l, len(lm.Experts), lm.Fallbacks)
		}
		for _, mat := range []struct {
			name string
			rec  MatrixMetrics
		}{{"w1", lm.Experts[0].W1}, {"w3", lm.Experts[0].W3}, {"w2", lm.Experts[0].W2}} {
			name := fmt.Sprintf("model.layers.%d.feed_forward.%s.weight", l, mat.name)
			e, _ := ck.Manifest.Tensor(name)
			out, in := int(e.Shape[0]), int(e.Shape[1])
			w, err := src.Float32(name)
			if err != nil {
				t.Fatal(err)
			}
			st, err := ck.Tensor(name)
			if err != nil {
				t.Fatal(err)
			}
			qg, err := bfp.UnpackMatrix(bfp.BFP4, st.Data, out, in)
			if err != nil {
				t.Fatal(err)
			}
			rtn, err := bfp.PackMatrix(bfp.BFP4, w, out, in)
			if err != nil {
				t.Fatal(err)
			}
			qr, _ := bfp.UnpackMatrix(bfp.BFP4, rtn, out, in)
			x := obs.x[name]
			lg, lr := outputLoss(t, w, qg, x, out, in), outputLoss(t, w, qr, x, out, in)
			ratio := lg / lr
			t.Logf("layer %d %s: GPTQ/RTN output loss %.3f (manifest %.3f)", l, mat.name, ratio, *mat.rec.Ratio)
			if mat.rec.Method != "gptq" || mat.rec.Tokens != len(x)/in {
				t.Errorf("%s: method %s over %d tokens, want gptq over %d", name, mat.rec.Method, mat.rec.Tokens, len(x)/in)
			}
			// The manifest's ratio is the same quantity in float64 sums.
			if d := ratio - *mat.rec.Ratio; d > 1e-3 || d < -1e-3 {
				t.Errorf("%s: recomputed ratio %.5f, manifest %.5f", name, ratio, *mat.rec.Ratio)
			}
			sum += ratio
			n++
		}
	}
	mean := sum / float64(n)
	t.Logf("mean GPTQ/RTN loss ratio over %d FFN matrices: %.3f", n, mean)
	if mean > 0.6 {
		t.Errorf("mean GPTQ/RTN loss ratio %.3f, want ≤ 0.6", mean)
	}
}

// ffnInputs keeps the input rows of every FFN matrix.
type ffnInputs struct {
	model.BaseObserver
	x map[string][]float32
}

func (o *ffnInputs) Linear(_ int, name string, _ model.Rows, x []float32) {
	if strings.Contains(name, "feed_forward.") {
		o.x[name] = append(o.x[name], x...)
	}
}

// outputLoss is Σ over the rows x of ‖(W − Q)·x‖², the output error that
// GPTQ's Hessian loss measures (up to its ½ and damping).
func outputLoss(t *testing.T, w, q, x []float32, out, in int) float64 {
	t.Helper()
	d := make([]float32, len(w))
	for i := range d {
		d[i] = w[i] - q[i]
	}
	mat, err := kernels.NewF32(out, in, d)
	if err != nil {
		t.Fatal(err)
	}
	rows := len(x) / in
	y := make([]float32, rows*out)
	mat.MatMul(y, x, rows)
	var s float64
	for _, v := range y {
		s += float64(v) * float64(v)
	}
	return s
}

// TestDenseRefusals: options a dense checkpoint has no use for are refused
// before any output exists, and --ffn-format on an MoE checkpoint too.
func TestDenseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		option string
	}{
		{"keep experts", Options{ModelDir: denseModel, Method: RTN, KeepExperts: true}, "KeepExperts"},
		{"gptq with bfp8 ffn", Options{ModelDir: denseModel, Method: GPTQ, FFNFormat: lfmq1.BFP8, GPTQ: gptqOptions(fastSeqs)}, "Method"},
		{"unknown ffn format", Options{ModelDir: denseModel, Method: RTN, FFNFormat: lfmq1.BF16}, "FFNFormat"},
		{"ffn format on moe", Options{ModelDir: tinyModel, Method: RTN, FFNFormat: lfmq1.BFP8}, "FFNFormat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.OutDir = filepath.Join(t.TempDir(), "out")
			_, err := Quantize(context.Background(), tc.opts)
			var ae *ArchitectureError
			if !errors.As(err, &ae) || ae.Option != tc.option {
				t.Fatalf("err %v, want an ArchitectureError on %s", err, tc.option)
			}
			if fileExists(tc.opts.OutDir) || fileExists(lfmq1.PartialDir(tc.opts.OutDir)) {
				t.Error("a refused run left output behind")
			}
		})
	}
}

// TestDenseResume: a dense GPTQ run interrupted after its third layer
// keeps those layers' ffn files, and resuming it gives the bytes of an
// uninterrupted run.
func TestDenseResume(t *testing.T) {
	base := denseCheckpoint(t, "gptq")
	out := filepath.Join(t.TempDir(), "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Quantize(ctx, Options{ModelDir: denseModel, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: gptqOptions(fastSeqs),
		Progress: &cancelAfter{layer: 2, cancel: cancel}})
	var pe *PartialError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &pe) || pe.Layers != 3 {
		t.Fatalf("interrupted run: err = %v, want a PartialError with 3 layers", err)
	}
	if !fileExists(filepath.Join(lfmq1.PartialDir(out), "ffn-02.safetensors")) {
		t.Error("the partial directory lacks ffn-02.safetensors")
	}
	g := gptqOptions(fastSeqs)
	g.Resume = true
	res, err := Quantize(context.Background(), Options{ModelDir: denseModel, OutDir: out, Method: GPTQ, CreatedBy: "test", GPTQ: g})
	if err != nil {
		t.Fatal(err)
	}
	var resumed []int
	for _, l := range res.GPTQ.Layers {
		if l.Resumed {
			resumed = append(resumed, l.Layer)
		}
	}
	if fmt.Sprint(resumed) != "[0 1 2]" {
		t.Errorf("resumed layers %v, want [0 1 2]", resumed)
	}
	sameFiles(t, base, out)
}

// TestDenseErrorsNameTheFFN: a dense layer's GPTQ errors name its FFN, an
// MoE layer's the expert.
func TestDenseErrorsNameTheFFN(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&FallbackError{Layer: 3, Expert: -1, Matrix: "w2", Reason: "cholesky_failed", Err: errors.New("x")}, "quant: layer 3 FFN w2: GPTQ failed"},
		{&FallbackError{Layer: 3, Expert: 5, Matrix: "w2", Reason: "cholesky_failed", Err: errors.New("x")}, "quant: layer 3 expert 5 w2: GPTQ failed"},
		{&StatsError{Layer: 1, Expert: -1, Matrix: "w1/w3", Err: errors.New("NaN")}, "quant: layer 1 FFN w1/w3 input statistics: NaN"},
	} {
		if got := tc.err.Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q, want it to start with %q", got, tc.want)
		}
	}
}

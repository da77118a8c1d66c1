package quant

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/quant/plan"
)

// workRecorder is a Progress that follows the work by kind and records,
// for each MoE layer, how much work was reported before its first expert
// tensor was done, and which kinds were reported under which stages.
type workRecorder struct {
	mu           sync.Mutex
	total, done  WorkTotals
	starts       int
	negative     bool
	layer        int
	stage        string
	beforeSolves map[int]float64 // layer: work reported in its forward and statistics
	layerStart   float64
	stages       map[WorkKind]map[string]bool // kind: the stages it was reported under
}

func newWorkRecorder() *workRecorder {
	return &workRecorder{layer: -1, beforeSolves: map[int]float64{}, stages: map[WorkKind]map[string]bool{}}
}

func (w *workRecorder) Start(int) {}

func (w *workRecorder) Done(string) {}

func (w *workRecorder) StartWork(total WorkTotals) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total = total
	w.starts++
}

func (w *workRecorder) Work(kind WorkKind, d float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d < 0 || kind < 0 || kind >= NumWorkKinds {
		w.negative = true
		return
	}
	w.done[kind] += d
	if w.stages[kind] == nil {
		w.stages[kind] = map[string]bool{}
	}
	stage := w.stage
	if strings.HasPrefix(stage, "forward ") {
		stage = "forward" // "forward 3/8"
	}
	w.stages[kind][stage] = true
	if strings.HasPrefix(w.stage, "forward") || strings.HasPrefix(w.stage, "statistics") {
		w.beforeSolves[w.layer] = w.done.Sum() - w.layerStart
	}
}

func (w *workRecorder) Stage(layer int, stage string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if layer != w.layer {
		w.layer, w.layerStart = layer, w.done.Sum()
	}
	w.stage = stage
}

// TestGPTQWork: a GPTQ run tells a WorkProgress its work of each kind
// once, reports exactly that much of each kind as it goes, gives every
// kind it does some work (none counted as free, which would make an
// estimate of the time left from the work skip it), reports each kind
// under its own stage, and reports a share of each MoE layer during the
// layer's forward and statistics, before any of its expert tensors is
// done. With the BFP8 tensors solved too, their statistics and solves are
// part of the work, the statistics reported as they end.
func TestGPTQWork(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		kinds []WorkKind // the kinds the run does
	}{
		{"moe-dense-rtn", Options{ModelDir: tinyModel, DenseMethod: RTN},
			[]WorkKind{WorkPack, WorkForward, WorkUpStats, WorkUpSolve, WorkDownStats, WorkDownSolve}},
		{"moe-dense-gptq", Options{ModelDir: tinyModel, DenseMethod: GPTQ},
			[]WorkKind{WorkPack, WorkForward, WorkUpStats, WorkUpSolve, WorkDownStats, WorkDownSolve, WorkDenseStats, WorkDenseSolve, WorkHeadStats, WorkHeadSolve}},
		{"dense-lfm2", Options{ModelDir: denseModel},
			[]WorkKind{WorkPack, WorkForward, WorkUpStats, WorkUpSolve, WorkDownStats, WorkDownSolve}},
	}
	// The stage each kind is reported under (a packed tensor's may be
	// any: the dense pass packs the rest of a file after its solves).
	stageOf := map[WorkKind]string{
		WorkForward: "forward", WorkUpStats: "statistics w1/w3", WorkUpSolve: "solve w1/w3",
		WorkDownStats: "statistics w2", WorkDownSolve: "solve w2",
		WorkDenseStats: "statistics dense", WorkDenseSolve: "solve dense",
		WorkHeadStats: "statistics dense", WorkHeadSolve: "solve dense",
	}
	var totals []float64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkRecorder()
			opts := tt.opts
			opts.OutDir, opts.Method, opts.CreatedBy, opts.GPTQ, opts.Progress = filepath.Join(t.TempDir(), "gptq"), GPTQ, "test", gptqOptions(fastSeqs), w
			if _, err := Quantize(context.Background(), opts); err != nil {
				t.Fatal(err)
			}
			if w.starts != 1 || w.negative {
				t.Fatalf("StartWork called %d times; bad Work call: %v", w.starts, w.negative)
			}
			does := map[WorkKind]bool{}
			for _, k := range tt.kinds {
				does[k] = true
			}
			for k := range NumWorkKinds {
				switch {
				case does[k] && !(w.total[k] > 0):
					t.Errorf("%s: announced %v of work; the run does it", k, w.total[k])
				case !does[k] && (w.total[k] != 0 || w.done[k] != 0):
					t.Errorf("%s: announced %v, reported %v; the run does none", k, w.total[k], w.done[k])
				case math.Abs(w.done[k]-w.total[k]) > 1e-9*w.total[k]:
					t.Errorf("%s: reported %v of the announced %v", k, w.done[k], w.total[k])
				}
				if s, ok := stageOf[k]; ok && does[k] {
					for got := range w.stages[k] {
						if got != s {
							t.Errorf("%s reported during stage %q, want %q", k, got, s)
						}
					}
				}
			}
			if len(w.beforeSolves) == 0 {
				t.Fatal("no work was reported in any layer's forward or statistics")
			}
			for l, before := range w.beforeSolves {
				if !(before > 0) {
					t.Errorf("layer %d: no work reported before its solves", l)
				}
			}
			// The kinds' units differ; weighted by their priors they
			// are comparable (a prior estimate of the time).
			var weighted float64
			for k := range NumWorkKinds {
				weighted += w.total[k] * k.Cost()
			}
			totals = append(totals, weighted)
		})
	}
	if len(totals) >= 2 {
		t.Logf("announced work weighted by the priors: dense rtn %.4g, dense gptq %.4g (%.2f×)", totals[0], totals[1], totals[1]/totals[0])
		if !(totals[1] > totals[0]) {
			t.Errorf("solving the dense tensors announced %v of weighted work, no more than rounding them (%v)", totals[1], totals[0])
		}
	}
}

// TestWorkKinds: every kind has a name and a positive prior cost.
func TestWorkKinds(t *testing.T) {
	names := map[string]bool{}
	for k := range NumWorkKinds {
		if s := k.String(); s == "" || strings.HasPrefix(s, "WorkKind(") || names[s] {
			t.Errorf("kind %d: name %q (empty, a number or repeated)", int(k), s)
		} else {
			names[s] = true
		}
		if c := k.Cost(); !(c > 0) || math.IsInf(c, 0) {
			t.Errorf("%s: prior cost %v", k, c)
		}
	}
	if s := NumWorkKinds.String(); s != "WorkKind(10)" {
		t.Errorf("an unknown kind is named %q", s)
	}
}

// TestGPTQWorkResumed: a run that resumes an interrupted one announces only
// the work it has left, and reports exactly that much of each kind (the
// forwards of the layers the interrupted run left unfinished included).
func TestGPTQWorkResumed(t *testing.T) {
	out := filepath.Join(t.TempDir(), "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := denseGPTQOptions(out)
	opts.Progress = &cancelAfter{layer: 3, cancel: cancel}
	if _, err := Quantize(ctx, opts); err == nil {
		t.Fatal("the interrupted run finished")
	}
	full := newWorkRecorder()
	opts = denseGPTQOptions(filepath.Join(t.TempDir(), "full"))
	opts.Progress = full
	if _, err := Quantize(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	w := newWorkRecorder()
	opts = denseGPTQOptions(out)
	opts.GPTQ.Resume, opts.Progress = true, w
	if _, err := Quantize(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	for k := range NumWorkKinds {
		// A resumed dense file's tensors are read back, counted as packing.
		more := w.total[k] > full.total[k] && k != WorkPack
		if math.Abs(w.done[k]-w.total[k]) > 1e-9*w.total[k] || more {
			t.Errorf("%s: reported %v of the announced %v (an uninterrupted run: %v)", k, w.done[k], w.total[k], full.total[k])
		}
	}
	// Layers 2 and 3's expert solves were taken over.
	if got, want := w.total[WorkUpSolve], full.total[WorkUpSolve]*4/6; math.Abs(got-want) > 1e-9*want {
		t.Errorf("w1/w3 solves announced %v, want 4 of the 6 MoE layers' %v", got, want)
	}
}

// TestLayerForwardWork: each decoder layer's forward work per token, and
// its parts where a calibration forward stops (model.LayerPart), are two
// operations per weight of the products that part runs, counted here from
// the config's widths: a conv layer's in_proj (3H×H) and out_proj (H×H),
// an attention layer's q/k/v and out_proj, a dense FFN's w1/w3 (F×H each)
// and w2, an MoE layer's router (E×H) and k of its E experts, for both
// fixtures (MoE with dense layers, and a dense LFM2).
func TestLayerForwardWork(t *testing.T) {
	for _, dir := range []string{tinyModel, denseModel} {
		cfg, err := config.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		src, err := hf.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := planSource(cfg, src, plan.Options{})
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := layerForwardWork(cfg, p)
		H := float64(cfg.HiddenSize)
		for l, f := range got {
			var mixer, out, ffnIn, up, down float64
			if cfg.LayerKinds[l] == config.Conv {
				mixer, out = 2*3*H*H, 2*H*H
			} else {
				qd, kvd := float64(cfg.NumHeads*cfg.HeadDim), float64(cfg.NumKVHeads*cfg.HeadDim)
				mixer, out = 2*H*(qd+2*kvd), 2*qd*H
			}
			if cfg.IsMoE(l) {
				share := float64(cfg.NumExpertsPerTok)
				ffnIn = 2 * float64(cfg.NumExperts) * H
				up, down = share*2*2*H*float64(cfg.MoEIntermediateSize), share*2*H*float64(cfg.MoEIntermediateSize)
			} else {
				up, down = 2*2*H*float64(cfg.IntermediateSize), 2*H*float64(cfg.IntermediateSize)
			}
			want := map[model.LayerPart]float64{
				model.MixerInputs:  mixer,
				model.FFNInput:     mixer + out + ffnIn,
				model.LinearInputs: mixer + out + ffnIn,
				model.WholeLayer:   mixer + out + ffnIn + up + down,
			}
			if !cfg.IsMoE(l) {
				want[model.LinearInputs] = mixer + out + up
			}
			for part, w := range want {
				if g := f.upTo(part); math.Abs(g-w) > 1e-9*w {
					t.Errorf("%s layer %d, part %d: %v operations per token, want %v", dir, l, part, g, w)
				}
			}
		}
	}
}

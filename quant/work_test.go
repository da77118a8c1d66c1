package quant

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// workRecorder is a Progress that follows the work and records, for each
// MoE layer, how much work was reported before its first expert tensor
// was done.
type workRecorder struct {
	mu           sync.Mutex
	total, done  float64
	starts       int
	layer        int
	stage        string
	beforeSolves map[int]float64 // layer: work reported in its forward and statistics
	layerStart   float64
	denseStats   float64 // work reported while a dense file's statistics ran
}

func (w *workRecorder) Start(int) {}

func (w *workRecorder) Done(string) {}

func (w *workRecorder) StartWork(total float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total = total
	w.starts++
}

func (w *workRecorder) Work(d float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d < 0 {
		w.done = math.NaN()
	}
	w.done += d
	if w.stage == "statistics dense" {
		w.denseStats += d
	}
	if strings.HasPrefix(w.stage, "forward") || strings.HasPrefix(w.stage, "statistics") {
		w.beforeSolves[w.layer] = w.done - w.layerStart
	}
}

func (w *workRecorder) Stage(layer int, stage string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if layer != w.layer {
		w.layer, w.layerStart = layer, w.done
	}
	w.stage = stage
}

// TestGPTQWork: a GPTQ run tells a WorkProgress its work once, reports
// exactly that much as it goes, and reports a share of each MoE layer
// during the layer's forward and statistics, before any of its expert
// tensors is done, so that an estimate of the time left from the share
// done does not stand still (and the time left climb) through them. With
// the BFP8 tensors solved too, their statistics and solves are part of the
// work, the statistics reported as they end.
func TestGPTQWork(t *testing.T) {
	var totals []float64
	for _, dense := range []Method{RTN, GPTQ} {
		t.Run("dense-"+string(dense), func(t *testing.T) {
			w := &workRecorder{layer: -1, beforeSolves: map[int]float64{}}
			dir := filepath.Join(t.TempDir(), "gptq")
			if _, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: dir, Method: GPTQ, DenseMethod: dense, CreatedBy: "test", GPTQ: gptqOptions(fastSeqs), Progress: w}); err != nil {
				t.Fatal(err)
			}
			if w.starts != 1 || !(w.total > 0) {
				t.Fatalf("StartWork called %d times with %v", w.starts, w.total)
			}
			if math.Abs(w.done-w.total) > 1e-9*w.total {
				t.Errorf("reported %v of the announced %v", w.done, w.total)
			}
			if len(w.beforeSolves) == 0 {
				t.Fatal("no work was reported in any layer's forward or statistics")
			}
			for l, before := range w.beforeSolves {
				if !(before > 0) {
					t.Errorf("layer %d: no work reported before its solves", l)
				}
			}
			// A solved dense file's statistics count as they end, not
			// with its tensors' solves.
			if dense == GPTQ && !(w.denseStats > 0) {
				t.Error("no work was reported as the dense files' statistics ended")
			}
			totals = append(totals, w.total)
		})
	}
	if len(totals) == 2 {
		t.Logf("announced work: dense rtn %.4g, dense gptq %.4g (%.2f×)", totals[0], totals[1], totals[1]/totals[0])
	}
	if len(totals) == 2 && !(totals[1] > totals[0]) {
		t.Errorf("solving the dense tensors announced %v of work, no more than rounding them (%v)", totals[1], totals[0])
	}
}

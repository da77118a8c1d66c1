package quant

import (
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/model/synth"
)

// TestRunMemoryBudget: a GPTQ run with the dense pass (the default) on a
// reduced LFM2-MoE shape whose head and MoE layer are large next to the
// process's fixed memory keeps its live heap, sampled as the collector
// measures it (/gc/heap/live:bytes) through the whole run, under the
// budget runMemory gives and the run reports; and the budget is not so
// loose that the run never comes near it.
func TestRunMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a GPTQ run of a 0.1 GB model")
	}
	shape := synth.Shape{
		VocabSize: 32768, HiddenSize: 512, IntermediateSize: 1536, MoEIntermediateSize: 256,
		LayerTypes: []string{"conv", "full_attention"}, NumHeads: 8, NumKVHeads: 2, HeadDim: 64,
		NumDenseLayers: 1, NumExperts: 8, NumExpertsPerTok: 2, MaxPositions: 4096,
	}
	dir := filepath.Join(t.TempDir(), "model")
	if _, err := synth.Write(t.Context(), dir, synth.Options{Shape: shape, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := DefaultGPTQOptions()
	g.Calib, g.CalibSeqs, g.CalibLen, g.Seed = tinyCalib, 8, 256, 1
	runtime.GC()

	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	res, err := Quantize(t.Context(), Options{ModelDir: dir, OutDir: filepath.Join(t.TempDir(), "q"), Method: GPTQ, DenseMethod: GPTQ, CreatedBy: "test", GPTQ: g})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	budget := runMemory(cfg, 8*256, 256, defaultSolveMemory(cfg.NumExperts, cfg.HiddenSize))
	if res.GPTQ.MemoryBudget != budget {
		t.Errorf("the run reports a budget of %d bytes, runMemory gives %d", res.GPTQ.MemoryBudget, budget)
	}
	t.Logf("peak live heap %.1f MB, budget %.1f MB", float64(peak)/1e6, float64(budget)/1e6)
	if int64(peak) > budget {
		t.Errorf("peak live heap %d bytes, over the budget of %d", peak, budget)
	}
	if int64(peak) < budget/3 {
		t.Errorf("peak live heap %d bytes, under a third of the budget of %d: the model overestimates", peak, budget)
	}
}

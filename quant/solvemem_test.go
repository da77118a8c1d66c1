package quant

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/quant/plan"
)

// TestSolveSlots: the solves admitted at once and the goroutines of each
// cover the workers without the solves' scratch passing the budget (one
// solve at least, however small the budget).
func TestSolveSlots(t *testing.T) {
	for _, c := range []struct {
		workers        int
		limit, scratch int64
		solves, thr    int
	}{
		{1, 100, 10, 1, 1},
		{2, 100, 10, 2, 1},
		{16, 100, 10, 10, 2},
		{16, 100, 30, 3, 6},
		{7, 100, 30, 3, 3},
		{16, 5, 10, 1, 16},
		{16, 0, 10, 1, 16},
		{0, 100, 10, 1, 1},
		{4, 100, 0, 4, 1},
		// 8B-A1B shapes under the default budget, 16 workers.
		{16, defaultSolveMemory(32, 2048), solveScratch(1792, 2048, 2, 128), 4, 4},
		{16, defaultSolveMemory(32, 2048), solveScratch(2048, 1792, 1, 128), 6, 3},
	} {
		s, th := solveSlots(c.workers, c.limit, c.scratch)
		if s != c.solves || th != c.thr {
			t.Errorf("solveSlots(%d, %d, %d) = %d solves × %d goroutines, want %d × %d", c.workers, c.limit, c.scratch, s, th, c.solves, c.thr)
		}
		if s > 1 && int64(s)*c.scratch > c.limit {
			t.Errorf("solveSlots(%d, %d, %d): %d solves exceed the budget", c.workers, c.limit, c.scratch, s)
		}
	}
}

// TestSolveScratchShapes pins the figures the memory notes quote: a w1/w3
// and a w2 solve at 8B-A1B's shapes and the default budget.
func TestSolveScratchShapes(t *testing.T) {
	mb := func(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }
	for _, c := range []struct {
		got  int64
		want string
	}{
		{solveScratch(1792, 2048, 2, 128), "215 MB"},
		{solveScratch(2048, 1792, 1, 128), "159 MB"},
		{defaultSolveMemory(32, 2048), "1074 MB"},
	} {
		if mb(c.got) != c.want {
			t.Errorf("%s, want %s", mb(c.got), c.want)
		}
	}
}

// TestMemBudget: under concurrent requests of random sizes the bytes
// admitted never pass the limit, except by a request larger than the limit
// admitted alone; a waiting request gives up when its context ends.
func TestMemBudget(t *testing.T) {
	const limit = 100
	var mu sync.Mutex
	var peak, over int64
	b := newMemBudget(limit, func(used, l int64) {
		mu.Lock()
		defer mu.Unlock()
		peak = max(peak, used)
		if used > l {
			over = used
		}
	})
	var wg sync.WaitGroup
	big := make(chan int64, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				n := 1 + r.Int64N(60)
				if r.IntN(50) == 0 {
					n = limit + 1 + r.Int64N(50) // larger than the whole budget
				}
				if err := b.acquire(context.Background(), n); err != nil {
					t.Error(err)
					return
				}
				if n > limit {
					big <- n
				}
				time.Sleep(time.Duration(r.IntN(20)) * time.Microsecond)
				b.release(n)
			}
		}()
	}
	wg.Wait()
	close(big)
	// Only a lone oversize request may pass the limit, and then exactly
	// by its own size.
	if over != 0 {
		found := false
		for n := range big {
			found = found || n == over
		}
		if !found {
			t.Errorf("%d bytes admitted at once, over the limit of %d without a lone oversize request", over, limit)
		}
	}
	if peak == 0 || b.used != 0 {
		t.Errorf("peak %d, %d bytes left admitted", peak, b.used)
	}

	if err := b.acquire(context.Background(), 90); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.acquire(ctx, 20); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acquire past the budget with an ending context: %v", err)
	}
	b.release(90)
}

// TestGPTQWorkersSameBytes: the tiny model's GPTQ checkpoint has the same
// bytes with 7 workers running one solve at a time on 7 goroutines and with
// 2 workers whose budget admits two solves, as with the default (all
// cores); and the solves in flight never hold more than the budget. One
// worker is TestGPTQDeterministic's case.
func TestGPTQWorkersSameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("two GPTQ runs of the tiny model")
	}
	base, _ := tinyGPTQ(t, fastSeqs)
	// The tiny model: H = F = 128, so a w1/w3 solve is the largest.
	one := solveScratch(128, 128, 2, DefaultGPTQOptions().BlockSize)
	// The default budget of the tiny model (16·128²·8 bytes) admits one
	// w1/w3 solve at a time (two of w2), as the first case does.
	for _, c := range []struct {
		workers int
		budget  int64
	}{
		{7, one},
		{2, 2*one + one/2},
	} {
		t.Run(fmt.Sprintf("workers=%d/budget=%d", c.workers, c.budget), func(t *testing.T) {
			var mu sync.Mutex
			var peak int64
			g := gptqOptions(fastSeqs)
			g.SolveMemory = c.budget
			g.solveAccount = func(used, limit int64) {
				mu.Lock()
				defer mu.Unlock()
				peak = max(peak, used)
				if used > limit {
					t.Errorf("%d bytes of solves in flight, budget %d", used, limit)
				}
			}
			dir := filepath.Join(t.TempDir(), "out")
			if _, err := Quantize(context.Background(), Options{ModelDir: tinyModel, OutDir: dir, Method: GPTQ, Workers: c.workers,
				CreatedBy: "test", GPTQ: g}); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, base, dir)
			if peak == 0 {
				t.Error("no solve went through the budget")
			}
		})
	}
}

// TestPackPassUnderBudget: the RTN pass admits tensors by the float32
// bytes they hold (produceScratch), so with a budget of the largest
// tensor's scratch and 8 workers, no two tensors that do not fit together
// are ever in memory at once; and what it produces does not depend on the
// budget.
func TestPackPassUnderBudget(t *testing.T) {
	cfg, err := config.Load(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	src, err := hf.Open(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p, _, err := planSource(cfg, src, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var entries []plan.Entry
	var largest int64
	for _, file := range p.Files() {
		for _, e := range p.ByFile(file) {
			if e.Class != plan.Experts {
				entries = append(entries, e)
				largest = max(largest, produceScratch(e))
			}
		}
	}
	if len(entries) < 8 || largest == 0 {
		t.Fatalf("%d dense entries, the largest holding %d bytes: not a test of the budget", len(entries), largest)
	}
	var opts Options
	rules := opts.packRules()
	free, err := produceAll(context.Background(), src, entries, rules, 8, nil, newMemBudget(1<<40, nil))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var peak int64
	b := newMemBudget(largest, func(used, limit int64) {
		mu.Lock()
		defer mu.Unlock()
		peak = max(peak, used)
		if used > limit {
			t.Errorf("%d bytes of tensors in flight, budget %d", used, limit)
		}
	})
	bounded, err := produceAll(context.Background(), src, entries, rules, 8, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if peak == 0 || b.used != 0 {
		t.Errorf("peak %d bytes, %d still admitted: the pass did not go through the budget", peak, b.used)
	}
	for i := range entries {
		if !bytes.Equal(free[i].tensor.Data, bounded[i].tensor.Data) || free[i].metric != nil && *free[i].metric != *bounded[i].metric {
			t.Errorf("%s: the budget changed what was produced", entries[i].Name)
		}
	}
}

// TestHeadMemoryVocabulary: of the head's stage of the memory model, only
// the packed result grows with the vocabulary (1.0625 bytes a weight in
// BFP8), and at 8B-A1B's shapes the rest is the 0.33 GB the memory notes
// quote; so the run's budget at those shapes is the same for a 65K and a
// 256K vocabulary (the head is not the largest stage), where the whole
// matrix's solve made it grow by 16 bytes a weight.
func TestHeadMemoryVocabulary(t *testing.T) {
	const h = 2048
	rest := func(v int) int64 { return headSolveMemory(v, h) - int64(bfp.PackedSize(bfp.BFP8, v, h)) }
	if got := fmt.Sprintf("%.2f GB", float64(rest(65536))/1e9); got != "0.33 GB" {
		t.Errorf("the head's solve besides its result: %s, want 0.33 GB", got)
	}
	for _, v := range []int{8192, 131072, 262144} {
		if rest(v) != rest(65536) {
			t.Errorf("vocabulary %d: %d bytes besides the result, %d at 65,536", v, rest(v), rest(65536))
		}
	}
	cfg := func(v int) *config.Config {
		return &config.Config{ModelType: config.ModelTypeMoE, HiddenSize: h, IntermediateSize: 7168, MoEIntermediateSize: 1792,
			NumExperts: 32, NumExpertsPerTok: 4, NumDenseLayers: 2, NumLayers: 24, VocabSize: v}
	}
	small, large := runMemory(cfg(65536), 128*2048, 2048, defaultSolveMemory(32, h)), runMemory(cfg(262144), 128*2048, 2048, defaultSolveMemory(32, h))
	if small != large {
		t.Errorf("budget %d bytes at a 65K vocabulary, %d at 256K", small, large)
	}
}

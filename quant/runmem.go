package quant

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/quant/calib"
	"github.com/lfmq/lfmq/quant/gptq"
	"github.com/lfmq/lfmq/quant/plan"
)

// runBudget is a GPTQ run's memory budgeting: the budget of the expert
// solves in flight, and what the whole run is expected to hold, on the heap
// and in mapped pages (runMemory, runMappedMemory), which its report
// gives.
type runBudget struct {
	solve  *memBudget
	memory int64
	mapped int64
}

// budgetRun budgets a GPTQ run of the settings g over a checkpoint of cfg's
// shapes planned as p, with the calibration set's tokens, on workers
// goroutines: the solve budget is g.SolveMemory, or when that is 0 the
// automatic one (defaultSolveMemory).
func budgetRun(g GPTQOptions, cfg *config.Config, p *plan.Plan, src *hf.Checkpoint, set *calib.Set, workers int) runBudget {
	limit := g.SolveMemory
	if limit == 0 {
		limit = defaultSolveMemory(cfg.NumExperts, cfg.HiddenSize)
	}
	return runBudget{
		solve:  newMemBudget(limit, g.solveAccount),
		memory: runMemory(cfg, set.Tokens, set.MaxLen, limit),
		mapped: runMappedMemory(cfg, p, src, set.Tokens, workers),
	}
}

// limitMemory makes the run's budget the collector's soft limit, unless the
// user set one (GOMEMLIMIT) or another run in the process has, and returns
// what puts the limit back.
func limitMemory(budget int64) (restore func()) {
	if prev := debug.SetMemoryLimit(-1); prev == math.MaxInt64 {
		debug.SetMemoryLimit(runMemoryLimit(budget))
		return func() { debug.SetMemoryLimit(prev) }
	}
	return func() {}
}

// releaseMemory collects the garbage of a finished stage (a layer's
// statistics, its solve buffers, its packed results once written) and
// returns the freed pages to the OS. Without it the heap may grow to twice
// what is live before the collector runs, so the next stage's statistics
// could sit on top of the last stage's garbage: a GPTQ run's peak is set by
// the largest single stage only when each stage starts from a collected heap.
// The solver's recycled work buffers go too.
func releaseMemory() {
	gptq.ReleaseScratch()
	debug.FreeOSMemory()
}

// releasePages drops the pages of every mapped file the run has read (the
// source through src and through the engine, and the finished layers'
// files the engine runs) from the process's resident memory, between
// stages: a forward reads every weight of the layers it runs, and those
// pages would otherwise stay counted in the resident set for the rest of
// the run, so that it would grow with every layer (runMemory). The pages
// stay in the page cache, and whatever reads them again gets the same
// bytes. A failure (which would be a bug: the mappings are the run's own)
// costs memory, not correctness, so it is a warning.
func (r *gptqRun) releasePages() {
	errs := []error{r.src.ReleasePages(), r.cal.m.ReleasePages()}
	for _, f := range r.cal.mapped.files {
		errs = append(errs, f.ReleasePages())
	}
	if err := errors.Join(errs...); err != nil {
		r.warn(fmt.Sprintf("could not release mapped pages: %v", err))
	}
}

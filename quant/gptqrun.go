package quant

import (
	"context"
	"sync"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/plan"
)

// gptqRun is what every stage of one GPTQ quantization shares: its options
// and settings, the source and its plan, the model it calibrates with, the
// expert solves' memory budget, its progress reporting and its report.
// What a stage makes for the next (the prepared calibration, the output
// being written) is handed on as its own value (gptqPrep, runOutput), and
// what belongs to one solve stays in that stage's functions.
type gptqRun struct {
	opts    Options
	g       GPTQOptions
	cfg     *config.Config
	src     *hf.Checkpoint
	plan    *plan.Plan
	workers int
	// cal is the model the calibration forwards run, and their stream.
	cal *calibration
	// budget bounds the scratch of the expert solves in flight.
	budget *memBudget
	prog   runProgress
	report *GPTQReport
	mu     sync.Mutex // guards report.Warnings
}

// quantizeGPTQ is Quantize for Method GPTQ: RTN for every BFP8 tensor, then
// the routed experts layer by layer with GPTQ, resumable.
// It runs the stages in order: prepare (calibration and fingerprint, with
// the plan p already made), the dense pass, the layers, the head and
// finish, around the calibration model, the output (with its resume
// state) and the memory budget they share.
func quantizeGPTQ(ctx context.Context, opts Options, cfg *config.Config, src *hf.Checkpoint, p *plan.Plan, source lfmq1.Source) (res *Result, err error) {
	prep, err := prepareGPTQ(opts, cfg, source)
	if err != nil {
		return nil, err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = max(1, runtimeProcs())
	}
	cal, err := openCalibration(opts.ModelDir, workers, prep.set.Windows)
	if err != nil {
		return nil, err
	}
	defer cal.close()
	out, err := openOutput(opts.OutDir, opts.GPTQ.Resume, prep.fingerprint)
	if err != nil {
		return nil, err
	}
	defer out.settle(&err)

	mem := budgetRun(opts.GPTQ, cfg, p, src, prep.set, workers)
	r := &gptqRun{opts: opts, g: opts.GPTQ, cfg: cfg, src: src, plan: p, workers: workers, cal: cal, budget: mem.solve,
		report: &GPTQReport{CalibTokens: prep.set.Tokens, FFN: cfg.Dense(), MemoryBudget: mem.memory, MappedBudget: mem.mapped}}
	defer limitMemory(mem.memory)()
	r.startProgress(out.rs, prep.set.Tokens)
	out.res = &Result{OutDir: opts.OutDir, Tensors: len(p.Entries), GPTQ: r.report}

	if err := r.denseStage(ctx, out); err != nil {
		return nil, err
	}
	if err := r.layersStage(ctx, out); err != nil {
		return nil, err
	}
	if err := r.headStage(ctx, out); err != nil {
		return nil, err
	}
	if err := r.finishStage(out, source, prep.settingsJSON); err != nil {
		return nil, err
	}
	return out.res, nil
}

// warn records a warning for the report and tells it at once to a
// Progress that takes warnings (WarnProgress): a damaged partial file or a
// fallback is news when it is found, not only at the end of a long run.
func (r *gptqRun) warn(s string) {
	// Warnings come from expert goroutines.
	r.mu.Lock()
	r.report.Warnings = append(r.report.Warnings, s)
	r.mu.Unlock()
	if wp, ok := r.opts.Progress.(WarnProgress); ok {
		wp.Warn(s)
	}
}

package quant

import (
	"context"
	"time"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/plan"
)

// solvedByGPTQ reports whether a GPTQ run solves e (an MoE's routed
// experts, a dense LFM2's BFP4 FFN) rather than packing it by RTN.
func solvedByGPTQ(e plan.Entry) bool {
	return (e.Class == plan.Experts || e.Class == plan.FFN) && e.Format == lfmq1.BFP4
}

// denseStage is a GPTQ run's dense pass: every file that no GPTQ solve
// writes (the dense, head and kept tensors unless DenseMethod GPTQ solves
// them) packed by RTN, as in an RTN run, and written to out. In sequential
// mode the engine then runs with every BFP8 weight quantized.
func (r *gptqRun) denseStage(ctx context.Context, out *runOutput) error {
	start := time.Now()
	packBudget := newMemBudget(packMemory(r.cfg, r.g.SolveMemory), nil)
	for _, file := range r.plan.Files() {
		entries := r.plan.ByFile(file)
		if solvedByGPTQ(entries[0]) || fileHasDenseSolve(r.opts, entries) {
			continue
		}
		packed, err := produceAll(ctx, r.src, entries, r.opts.packRules(), r.workers, r.prog.denseProg, packBudget)
		if err != nil {
			return err
		}
		tensors := make([]lfmq1.Tensor, len(packed))
		var run []lfmq1.Tensor
		for i, o := range packed {
			tensors[i] = o.tensor
			if o.metric != nil {
				out.metrics[o.tensor.Name] = *o.metric
			}
			out.res.Bytes += int64(len(o.tensor.Data))
			if r.g.Sequential && entries[i].Class == plan.Dense {
				run = append(run, o.tensor)
			}
		}
		if err := out.w.WriteFile(file, tensors); err != nil {
			return err
		}
		if err := r.cal.install(out.w, file, run); err != nil {
			return err
		}
	}
	r.report.Dense = time.Since(start)
	// The dense tensors' float32 copies are garbage now; the heap they
	// grew must not stay under the MoE layers' statistics.
	releaseMemory()
	r.releasePages()
	return nil
}

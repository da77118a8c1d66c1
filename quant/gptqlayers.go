package quant

import (
	"context"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/plan"
)

// layersStage is a GPTQ run's layer stage: layer by layer, the layer file's
// dense GPTQ step (denseLayer) where DenseMethod GPTQ solves its tensors,
// then its solved FFN (ffnLayer): the routed experts of every MoE layer
// unless they are kept, or every layer's FFN of a dense LFM2.
func (r *gptqRun) layersStage(ctx context.Context, out *runOutput) error {
	cfg, p := r.cfg, r.plan
	for l := range cfg.NumLayers {
		if lf := lfmq1.LayerFile(l, cfg.NumLayers); fileHasDenseSolve(r.opts, p.ByFile(lf)) {
			if err := r.denseLayer(ctx, out, l, lf, p.ByFile(lf)); err != nil {
				return err
			}
		}
		file := lfmq1.ExpertsFile(l, cfg.NumLayers)
		switch {
		case cfg.Dense():
			file = lfmq1.FFNFile(l, cfg.NumLayers)
		case !cfg.IsMoE(l) || r.opts.KeepExperts:
			continue
		}
		if err := r.ffnLayer(ctx, out, l, file, p.ByFile(file)); err != nil {
			return err
		}
	}
	return nil
}

// ffnLayer solves layer l's FFN (entries, of file) or takes it over from
// the partial run, writes it and records it for --resume, adds it to out
// and, in sequential mode, installs it in the engine before the next layer
// reads it.
func (r *gptqRun) ffnLayer(ctx context.Context, out *runOutput, l int, file string, entries []plan.Entry) error {
	var lr *layerResult
	var err error
	if d, ok := out.rs.done(l); ok {
		lr, err = r.resumeLayer(out.w, out.rs, d, entries)
		if err != nil {
			return err
		}
	}
	resumed := lr != nil
	if !resumed {
		if err := ctx.Err(); err != nil {
			return err
		}
		lr, err = r.layer(ctx, l, entries)
		if err != nil {
			return err
		}
		if err := out.w.WriteFile(file, lr.tensors); err != nil {
			return err
		}
		if err := out.rs.complete(l, file, &layerRecord{Metrics: lr.report.Metrics, Tensors: lr.tensorMetrics}); err != nil {
			return err
		}
	}
	if resumed {
		for _, t := range lr.tensors {
			r.prog.done(t.Name) // a solved layer reported each tensor as its solve ended
		}
	}
	out.addTensors(lr.tensors, lr.tensorMetrics)
	if r.g.Sequential {
		if err := r.cal.install(out.w, file, lr.tensors); err != nil {
			return err
		}
	}
	out.layers = append(out.layers, lr.report.Metrics)
	r.report.Layers = append(r.report.Layers, lr.report)
	r.report.Fallbacks += lr.report.Metrics.Fallbacks
	lr = nil
	releaseMemory()
	r.releasePages()
	r.prog.setStage(l, "done")
	return nil
}

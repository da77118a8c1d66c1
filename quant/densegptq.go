package quant

import (
	"context"
	"time"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
)

// denseSolved reports whether a run with DenseMethod GPTQ solves e: a BFP8
// attention, conv or dense-FFN matrix of an LFM2-MoE, or the head. (A
// dense LFM2's FFN in BFP8, --ffn-format bfp8, stays RTN.)
func denseSolved(opts Options, e plan.Entry) bool {
	return opts.DenseMethod == GPTQ && (e.Class == plan.Dense || e.Class == plan.Head) && e.Format == lfmq1.BFP8
}

// fileHasDenseSolve reports whether any of a file's entries is solved by
// the dense GPTQ pass, which then writes the whole file.
func fileHasDenseSolve(opts Options, entries []plan.Entry) bool {
	for _, e := range entries {
		if denseSolved(opts, e) {
			return true
		}
	}
	return false
}

// denseSpec is the solve of a BFP8 dense tensor: the dense exponent rule
// and the tensor's own Hessian (no pool to shrink toward).
func denseSpec(r *gptqRun) matrixSpec {
	return matrixSpec{format: bfp.BFP8, rule: r.opts.DenseExponentRule, kappa: 0}
}

// denseStep is one file of dense GPTQ results.
type denseStep struct {
	tensors []lfmq1.Tensor // the file's, in the plan's order
	metrics tensorMetrics
	dense   map[string]MatrixMetrics
}

// denseFile quantizes a file holding BFP8 tensors solved by GPTQ: layer
// l's file (layer ≥ 0), or the global file with the head (layer =
// NumLayers). Its solved tensors' input statistics come from one forward
// of the calibration windows from the stream to layer (the weights below
// already quantized in sequential mode); the rest of the file is packed as
// in an RTN run.
func (r *gptqRun) denseFile(ctx context.Context, layer int, entries []plan.Entry) (*denseStep, error) {
	var names []string
	for _, e := range entries {
		if denseSolved(r.opts, e) {
			names = append(names, e.Name)
		}
	}
	r.prog.setStage(layer, "statistics dense")
	t0 := time.Now()
	stats, err := hessian.CollectLinear(ctx, r.cal.m, layer, names, r.cal.windows, hessian.CollectOptions{Stream: &r.cal.stream, Threads: r.workers})
	r.report.DenseStats += time.Since(t0)
	if err != nil {
		return nil, err
	}
	r.releasePages() // the forward's weights
	r.prog.addWork(r.prog.denseStatsWork[layer].kind, r.prog.denseStatsWork[layer].work)
	st := &denseStep{metrics: tensorMetrics{}, dense: map[string]MatrixMetrics{}}
	solvedBy := map[string]*solved{}
	r.prog.setStage(layer, "solve dense")
	for i := range entries {
		e := &entries[i]
		if !denseSolved(r.opts, *e) {
			continue
		}
		// Each name leaves the map as its solve starts, so that a Stat
		// (q/k/v share one, w1/w3 another) goes once its last solve has
		// formed its Hessian: at a dense FFN's w2, 0.4 GB of 8B-A1B's
		// layer-0 peak.
		s := stats.Stats[e.Name]
		delete(stats.Stats, e.Name)
		var res solved
		if e.Class == plan.Head {
			// The head, whose size grows with the vocabulary, is read
			// and solved a band at a time.
			if res, err = r.solveHead(ctx, layer, e, s); err != nil {
				return nil, err
			}
		} else {
			w, err := weightValues(r.src, *e)
			if err != nil {
				return nil, err
			}
			out, k := int(e.Shape[0]), int(e.Shape[1])
			all, err := r.solveAs(ctx, denseSpec(r), layer, -1, e.Name, s, s, r.g.DampDense, [][]float32{w}, []*plan.Entry{e}, out, k, r.workers)
			if err != nil {
				return nil, err
			}
			res = all[0]
		}
		solvedBy[e.Name] = &res
		st.dense[e.Name] = res.metric
		st.metrics[e.Name] = res.tensor
		r.prog.doneDense(e.Name)
	}
	stats = nil
	rest, err := r.packRest(ctx, entries, st.metrics)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if s, ok := solvedBy[e.Name]; ok {
			st.tensors = append(st.tensors, bfp8Tensor(e, s.packed))
			continue
		}
		st.tensors = append(st.tensors, rest[e.Name])
	}
	return st, nil
}

// packRest packs a file's entries that are not solved, as an RTN run does.
func (r *gptqRun) packRest(ctx context.Context, entries []plan.Entry, metrics tensorMetrics) (map[string]lfmq1.Tensor, error) {
	var rest []plan.Entry
	for _, e := range entries {
		if !denseSolved(r.opts, e) {
			rest = append(rest, e)
		}
	}
	out, err := produceAll(ctx, r.src, rest, r.opts.packRules(), r.workers, r.prog.denseProg, newMemBudget(packMemory(r.cfg, r.g.SolveMemory), nil))
	if err != nil {
		return nil, err
	}
	m := map[string]lfmq1.Tensor{}
	for _, o := range out {
		m[o.tensor.Name] = o.tensor
		if o.metric != nil {
			metrics[o.tensor.Name] = *o.metric
		}
	}
	return m, nil
}

func bfp8Tensor(e plan.Entry, packed []byte) lfmq1.Tensor {
	out, in := int(e.Shape[0]), int(e.Shape[1])
	return lfmq1.Tensor{Name: e.Name, Format: lfmq1.BFP8, Shape: e.Shape, DType: dtype.U8,
		StoredShape: []int64{int64(bfp.NumTiles(out, in)), int64(bfp.BFP8.TileBytes())}, Data: packed}
}

// installDense makes the engine run a dense step's BFP8 tensors from file,
// where they are written (the head is not replaced: nothing is calibrated
// after it).
func (r *gptqRun) installDense(w *lfmq1.Writer, file string, st *denseStep) error {
	var solved []lfmq1.Tensor
	for _, t := range st.tensors {
		if t.Format == lfmq1.BFP8 && t.Name != "lm_head.weight" {
			solved = append(solved, t)
		}
	}
	return r.cal.install(w, file, solved)
}

// record adds a finished dense step's metrics and bytes to the run's.
func (st *denseStep) record(out *runOutput) {
	for n, m := range st.metrics {
		out.metrics[n] = m
	}
	for n, m := range st.dense {
		out.dense[n] = m
	}
	for _, t := range st.tensors {
		out.res.Bytes += int64(len(t.Data))
	}
}

// denseLayer runs (or takes over from a partial run) layer l's dense GPTQ
// step: its layer file solved, written, recorded for --resume and, in
// sequential mode, installed in the engine before anything above reads it.
func (r *gptqRun) denseLayer(ctx context.Context, out *runOutput, l int, file string, entries []plan.Entry) error {
	t0 := time.Now()
	defer func() { r.report.DenseGPTQ += time.Since(t0) }()
	var st *denseStep
	if d, ok := out.rs.doneKind(l, "dense"); ok {
		var err error
		if st, err = r.resumeDense(out.w, out.rs, d, entries); err != nil {
			return err
		}
	}
	if st == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if st, err = r.denseFile(ctx, l, entries); err != nil {
			return err
		}
		if err := out.w.WriteFile(file, st.tensors); err != nil {
			return err
		}
		if err := out.rs.completeKind(l, "dense", file, &layerRecord{Metrics: LayerMetrics{Layer: l}, Tensors: st.metrics, Dense: st.dense}); err != nil {
			return err
		}
	}
	st.record(out)
	if r.g.Sequential {
		if err := r.installDense(out.w, file, st); err != nil {
			return err
		}
	}
	releaseMemory()
	r.releasePages()
	return nil
}

package quant

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/safetensors"
	"github.com/lfmq/lfmq/quant/gptq"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
)

// resumeLayer takes a completed layer from the partial directory: its
// experts file (checked against the progress record, then written again
// through the Writer, which gives the same bytes) and its metrics. It
// returns nil when the stored layer does not verify, which makes the run
// compute it again.
func (r *gptqRun) resumeLayer(w *lfmq1.Writer, rs *resumeState, d doneLayer, entries []plan.Entry) (*layerResult, error) {
	rec, problem := rs.load(d)
	if problem == "" && r.g.Strict && rec.Metrics.Fallbacks > 0 {
		// The interrupted run was not strict; this one is.
		for _, e := range rec.Metrics.Experts {
			for name, m := range map[string]MatrixMetrics{"w1": e.W1, "w3": e.W3, "w2": e.W2} {
				if m.Method != string(GPTQ) {
					return nil, &FallbackError{Layer: d.Layer, Expert: r.who(d.Layer, e.Expert), Matrix: name, Reason: m.Reason, Err: errors.New("stored by the interrupted run")}
				}
			}
		}
	}
	if problem != "" {
		r.warn(fmt.Sprintf("layer %d: the interrupted run's result is damaged: %s; computing it and every later layer again", d.Layer, problem))
		return nil, rs.save()
	}
	path := filepath.Join(w.Dir(), d.File)
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lr := &layerResult{tensorMetrics: rec.Tensors, report: LayerReport{Layer: d.Layer, Resumed: true, Metrics: rec.Metrics}}
	for _, pe := range entries {
		raw, err := f.Bytes(pe.Name)
		if err != nil {
			return nil, fmt.Errorf("quant: resuming layer %d: %w", d.Layer, err)
		}
		out, in := int(pe.Shape[0]), int(pe.Shape[1])
		if len(raw) != bfp.PackedSize(bfp.BFP4, out, in) {
			return nil, fmt.Errorf("quant: resuming layer %d: %s has %d bytes", d.Layer, pe.Name, len(raw))
		}
		lr.tensors = append(lr.tensors, lfmq1.Tensor{Name: pe.Name, Format: lfmq1.BFP4, Shape: pe.Shape, DType: dtype.U8,
			StoredShape: []int64{int64(bfp.NumTiles(out, in)), int64(bfp.BFP4.TileBytes())}, Data: append([]byte(nil), raw...)})
	}
	if err := w.WriteFile(d.File, lr.tensors); err != nil {
		return nil, err
	}
	if sum, _, err := lfmq1.HashFile(path); err != nil || sum != d.SHA256 {
		return nil, fmt.Errorf("quant: resuming layer %d: %s rewritten with sha256 %s, recorded %s", d.Layer, d.File, sum, d.SHA256)
	}
	r.prog.setStage(d.Layer, "resumed")
	return lr, nil
}

// resumable reports whether a run stopped by err is worth resuming: an
// interruption or an I/O failure may not recur, while bad values in the
// weights or statistics, or a solver that cannot proceed, would stop the
// resumed run the same way; those keep no partial run and suggest no
// --resume.
func resumable(err error) bool {
	var nf *NonFiniteError
	var se *StatsError
	var fe *FallbackError
	var gi *gptq.InputError
	var gf *gptq.FactorError
	var hi *hessian.InputError
	var hn *hessian.NonFiniteError
	return !(errors.As(err, &nf) || errors.As(err, &se) || errors.As(err, &fe) || errors.As(err, &gi) ||
		errors.As(err, &gf) || errors.As(err, &hi) || errors.As(err, &hn))
}

// resumeDense takes layer l's dense file from the partial directory: the
// solved tensors' bytes from the file, the rest packed again (RTN is
// deterministic), written again through the Writer and checked against
// the recorded digest. It returns nil when the stored step does not verify,
// which makes the run compute it (and every later step) again.
func (r *gptqRun) resumeDense(w *lfmq1.Writer, rs *resumeState, d doneLayer, entries []plan.Entry) (*denseStep, error) {
	rec, problem := rs.load(d)
	if problem != "" {
		r.warn(fmt.Sprintf("layer %d: the interrupted run's dense result is damaged: %s; computing it and every later layer again", d.Layer, problem))
		return nil, rs.save()
	}
	if r.g.Strict {
		for name, m := range rec.Dense {
			if m.Method != string(GPTQ) {
				return nil, &FallbackError{Layer: d.Layer, Expert: -1, Matrix: name, Reason: m.Reason, Err: errors.New("stored by the interrupted run")}
			}
		}
	}
	path := filepath.Join(w.Dir(), d.File)
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := &denseStep{metrics: tensorMetrics{}, dense: rec.Dense}
	for name, m := range rec.Tensors {
		st.metrics[name] = m
	}
	rest, err := r.packRest(context.Background(), entries, st.metrics)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !denseSolved(r.opts, e) {
			st.tensors = append(st.tensors, rest[e.Name])
			continue
		}
		raw, err := f.Bytes(e.Name)
		if err != nil {
			return nil, fmt.Errorf("quant: resuming layer %d: %w", d.Layer, err)
		}
		if len(raw) != bfp.PackedSize(bfp.BFP8, int(e.Shape[0]), int(e.Shape[1])) {
			return nil, fmt.Errorf("quant: resuming layer %d: %s has %d bytes", d.Layer, e.Name, len(raw))
		}
		st.tensors = append(st.tensors, bfp8Tensor(e, append([]byte(nil), raw...)))
		r.prog.doneDense(e.Name)
	}
	if err := w.WriteFile(d.File, st.tensors); err != nil {
		return nil, err
	}
	if sum, _, err := lfmq1.HashFile(path); err != nil || sum != d.SHA256 {
		return nil, fmt.Errorf("quant: resuming layer %d: %s rewritten with sha256 %s, recorded %s", d.Layer, d.File, sum, d.SHA256)
	}
	r.prog.setStage(d.Layer, "resumed dense")
	return st, nil
}

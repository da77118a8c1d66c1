package quant

import (
	"github.com/lfmq/lfmq/format/lfmq1"
)

// runOutput is the checkpoint a GPTQ run is writing, which every stage
// after prepare adds to: the partial directory's Writer and resume state,
// the result, and the metrics the manifest will hold.
type runOutput struct {
	w  *lfmq1.Writer
	rs *resumeState
	// res is the run's result, its Bytes counting every tensor written.
	res *Result
	// metrics, dense and layers are the manifest's metrics (gptqMetrics).
	metrics tensorMetrics
	dense   map[string]MatrixMetrics
	layers  []LayerMetrics
	// committed is set once the checkpoint is in place.
	committed bool
}

// openOutput creates the partial output directory for dir, or with resume
// reuses one, and opens its resume state for a run of fingerprint fp.
func openOutput(dir string, resume bool, fp map[string]string) (*runOutput, error) {
	w, resumed, err := lfmq1.CreateResumable(dir, resume)
	if err != nil {
		return nil, err
	}
	rs, err := openResume(w.Dir(), fp, resumed)
	if err != nil {
		// A partial run from other inputs is the user's to resume or
		// remove: leave it exactly as it is.
		w.Keep()
		return nil, err
	}
	return &runOutput{w: w, rs: rs, metrics: tensorMetrics{}, dense: map[string]MatrixMetrics{}}, nil
}

// settle ends a run that stopped with *err before its checkpoint was
// committed: one that completed some layers and may succeed when resumed
// keeps its partial directory and turns *err into a *PartialError;
// otherwise the directory is removed.
func (o *runOutput) settle(err *error) {
	if o.committed {
		return
	}
	if len(o.rs.prog.Layers) > 0 && resumable(*err) {
		o.w.Keep()
		*err = &PartialError{Partial: o.w.Dir(), Layers: o.rs.prog.layersDone(), Err: *err}
		return
	}
	o.w.Abort()
}

// addTensors adds tensors written to the output to the result's bytes, and
// their metrics to the manifest's.
func (o *runOutput) addTensors(tensors []lfmq1.Tensor, metrics map[string]TensorMetric) {
	for _, t := range tensors {
		o.res.Bytes += int64(len(t.Data))
	}
	for name, tm := range metrics {
		o.metrics[name] = tm
	}
}

package quant

import (
	"github.com/lfmq/lfmq/format/lfmq1"
)

// gptqMetrics is the manifest's metrics block of a GPTQ checkpoint.
type gptqMetrics struct {
	Tensors tensorMetrics  `json:"tensors"`
	Layers  []LayerMetrics `json:"layers"`
	// Dense holds the GPTQ metrics of each BFP8 tensor solved with
	// DenseMethod GPTQ (absent otherwise).
	Dense map[string]MatrixMetrics `json:"dense,omitempty"`
}

// finishStage ends a GPTQ run: the manifest's quantization block with the
// run's settings (settingsJSON, from prepareGPTQ) and its metrics, the
// copied files, and the checkpoint moved into place (finish).
func (r *gptqRun) finishStage(out *runOutput, source lfmq1.Source, settingsJSON []byte) error {
	q := quantizationSpec(r.plan, r.opts)
	q.Settings = settingsJSON
	layers, dense := out.layers, out.dense
	if layers == nil {
		layers = []LayerMetrics{}
	}
	if len(dense) == 0 {
		dense = nil
	}
	if err := finish(out.w, r.opts, r.cfg.ModelType, source, q, gptqMetrics{Tensors: out.metrics, Layers: layers, Dense: dense}, out.res); err != nil {
		return err
	}
	out.committed = true
	return nil
}

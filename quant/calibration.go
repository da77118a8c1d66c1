package quant

import (
	"fmt"
	"path/filepath"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/safetensors"
	"github.com/lfmq/lfmq/quant/hessian"
)

// calibration is the model a GPTQ run calibrates with, and where its
// calibration windows stand: the engine runs the source checkpoint, with
// each solved tensor installed in its source's place once written (in
// sequential mode), and the windows' residual stream advances through it
// layer by layer. The dense GPTQ files, the layers and the head read it in
// turn.
type calibration struct {
	m       *model.Model
	mapped  *mappedFiles
	windows [][]int
	// stream is the calibration windows' residual stream at the input of
	// the lowest layer whose weights may still change or that no stream
	// has passed yet; every MoE layer's statistics start from it.
	stream hessian.Stream
}

// openCalibration loads the model at dir for the calibration forwards, run
// on workers threads, and checks that every window fits its context.
func openCalibration(dir string, workers int, windows [][]int) (*calibration, error) {
	c := &calibration{mapped: &mappedFiles{}, windows: windows}
	// Quantization checks every weight it reads and refuses a non-finite
	// one by name (NonFiniteError): no second scan in the background.
	m, err := load.Load(dir, load.Options{Threads: workers, SkipFiniteScan: true})
	if err != nil {
		return nil, err
	}
	c.m = m
	for i, w := range windows {
		if len(w) > m.MaxContext() {
			c.close()
			return nil, fmt.Errorf("quant: calibration window %d has %d tokens, more than the model's context of %d", i, len(w), m.MaxContext())
		}
	}
	return c, nil
}

// close closes the model, then the mapped output files it runs installed
// tensors from.
func (c *calibration) close() {
	c.m.Close()
	c.mapped.close()
}

// install makes the engine run quantized tensors in place of their
// sources: a finished layer's experts (BFP4) or solved dense tensors
// (BFP8), which the run has just written to file in its output. The engine
// reads them from the file's read-only mapping, not from the heap copies
// the run made them in: the finished layers then sit in the page cache,
// which the kernel can drop and read again, and the run's heap does not
// grow with every layer done (runMemory).
func (c *calibration) install(w *lfmq1.Writer, file string, tensors []lfmq1.Tensor) error {
	if len(tensors) == 0 {
		return nil
	}
	f, err := c.mapped.open(filepath.Join(w.Dir(), file))
	if err != nil {
		return err
	}
	for _, t := range tensors {
		data, err := f.Bytes(t.Name)
		if err != nil {
			return err
		}
		if len(data) != len(t.Data) {
			return fmt.Errorf("quant: %s: %s holds %d bytes, %d were written", t.Name, file, len(data), len(t.Data))
		}
		fm := kernels.BFP4
		if t.Format == lfmq1.BFP8 {
			fm = kernels.BFP8
		}
		mat, err := kernels.NewBFP(fm, int(t.Shape[0]), int(t.Shape[1]), data)
		if err != nil {
			return fmt.Errorf("quant: %s: %w", t.Name, err)
		}
		if err := c.m.ReplaceLinear(t.Name, mat); err != nil {
			return err
		}
	}
	return nil
}

// mappedFiles are the output files whose mappings the engine runs; they
// are closed when the run ends, after the model.
type mappedFiles struct{ files []*safetensors.File }

func (m *mappedFiles) open(path string) (*safetensors.File, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	m.files = append(m.files, f)
	return f, nil
}

func (m *mappedFiles) close() {
	for _, f := range m.files {
		f.Close()
	}
	m.files = nil
}

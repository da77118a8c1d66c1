// Package pick opens the device the --device flag names: cpu, opencl,
// cuda, or auto, which takes a CUDA GPU, then an OpenCL GPU, else the CPU,
// and says which and why in one line.
package pick

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/cuda"
	"github.com/lfmq/lfmq/engine/device/opencl"
)

// Auto is the default choice.
const Auto = "auto"

// Choices lists the values --device takes, for help and errors.
var Choices = []string{Auto, string(device.CPU), string(device.OpenCL), string(device.CUDA)}

// ChoiceError is a --device value that is none of Choices.
type ChoiceError struct{ Value string }

func (e *ChoiceError) Error() string {
	return fmt.Sprintf("--device %q: expected one of %s", e.Value, strings.Join(Choices, ", "))
}

// Check validates a --device value without opening anything.
func Check(choice string) error {
	for _, c := range Choices {
		if choice == c {
			return nil
		}
	}
	return &ChoiceError{Value: choice}
}

// openers are the bindings, replaceable in tests.
var (
	openCUDA   = func() (device.Device, error) { return cuda.Open(cuda.Options{}) }
	openOpenCL = func(gpuOnly bool) (device.Device, error) { return opencl.Open(opencl.Options{GPUOnly: gpuOnly}) }
)

// Open returns the device choice names, or nil for the CPU engine. An
// explicit opencl or cuda that cannot be used is an error naming the
// library or the kernel build (with its log); auto never fails: it falls
// back to the CPU. logf, if set, gets one line saying what auto chose and
// why.
func Open(choice string, logf func(format string, args ...any)) (device.Device, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	switch choice {
	case string(device.CPU):
		return nil, nil
	case string(device.OpenCL):
		return openOpenCL(false)
	case string(device.CUDA):
		return openCUDA()
	case Auto, "":
	default:
		return nil, &ChoiceError{Value: choice}
	}
	d, cerr := openCUDA()
	if cerr == nil {
		logf("device: %s (auto: a CUDA GPU)", d.Info())
		return d, nil
	}
	d, oerr := openOpenCL(true)
	if oerr == nil {
		logf("device: %s (auto: no CUDA GPU, %s; an OpenCL GPU)", d.Info(), short(cerr))
		return d, nil
	}
	logf("device: cpu (auto: no CUDA GPU, %s; no OpenCL GPU, %s)", short(cerr), short(oerr))
	return nil, nil
}

// short is an error's first line, for the auto log line: a build log
// belongs in an explicit request's error, not in a fallback's note.
func short(err error) string {
	var de *device.Error
	if errors.As(err, &de) && de.Log != "" {
		c := *de
		c.Log = ""
		return c.Error()
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

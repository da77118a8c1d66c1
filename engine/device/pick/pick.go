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

// Open returns the device choice names, or nil for the CPU engine, and
// one line saying what was chosen and, for auto, why. An explicit opencl
// or cuda that cannot be used is an error naming the library or the
// kernel build (with its log); auto never fails: it falls back to the CPU.
func Open(choice string) (device.Device, string, error) {
	var d device.Device
	var err error
	switch choice {
	case string(device.CPU):
		return nil, "device: cpu", nil
	case string(device.OpenCL):
		if d, err = openOpenCL(false); err != nil {
			return nil, "", err
		}
		return d, "device: " + d.Info().String(), nil
	case string(device.CUDA):
		if d, err = openCUDA(); err != nil {
			return nil, "", err
		}
		return d, "device: " + d.Info().String(), nil
	case Auto, "":
	default:
		return nil, "", &ChoiceError{Value: choice}
	}
	d, cerr := openCUDA()
	if cerr == nil {
		return d, fmt.Sprintf("device: %s (auto: a CUDA GPU)", d.Info()), nil
	}
	d, oerr := openOpenCL(true)
	if oerr == nil {
		return d, fmt.Sprintf("device: %s (auto: %s; an OpenCL GPU)", d.Info(), reason(cerr)), nil
	}
	return nil, fmt.Sprintf("device: cpu (auto: %s; %s)", reason(cerr), reason(oerr)), nil
}

// reason says in a few words why auto could not use a device: the full
// error (and a build log) belongs to an explicit request, not to a
// fallback's note.
func reason(err error) string {
	var de *device.Error
	if !errors.As(err, &de) {
		s, _, _ := strings.Cut(err.Error(), "\n")
		return s
	}
	what := "CUDA"
	if de.Kind == device.OpenCL {
		what = "OpenCL"
	}
	switch de.Stage {
	case device.StageLibrary:
		return "no " + de.Library
	case device.StageDevice:
		return "no " + what + " GPU"
	case device.StageBuild:
		return "the " + what + " kernels did not build (--device " + string(de.Kind) + " shows the log)"
	}
	return what + " failed: " + de.Msg
}

package pick

import (
	"errors"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
)

func libErr(k device.Kind, lib string) error {
	return &device.Error{Kind: k, Stage: device.StageLibrary, Library: lib, Msg: "cannot open shared object file"}
}

// TestOpen: auto falls back to the CPU with one line naming both reasons;
// an explicit device that cannot be used is an error naming its library;
// a kernel build failure keeps its log in the explicit error only.
func TestOpen(t *testing.T) {
	defer func(c func() (device.Device, error), o func(bool) (device.Device, error)) {
		openCUDA, openOpenCL = c, o
	}(openCUDA, openOpenCL)
	openCUDA = func() (device.Device, error) { return nil, libErr(device.CUDA, "libcuda.so.1") }
	var gpuOnly []bool
	openOpenCL = func(g bool) (device.Device, error) {
		gpuOnly = append(gpuOnly, g)
		return nil, &device.Error{Kind: device.OpenCL, Stage: device.StageBuild, Msg: "the kernels did not compile", Log: "line 1: error"}
	}
	d, line, err := Open(Auto)
	if d != nil || err != nil || line != "device: cpu (auto: no libcuda.so.1; the OpenCL kernels did not build (--device opencl shows the log))" {
		t.Fatalf("auto: %v, %v, line %q", d, err, line)
	}
	if len(gpuOnly) != 1 || !gpuOnly[0] {
		t.Errorf("auto asked OpenCL for gpuOnly=%v, want [true]: PoCL is used only when asked for", gpuOnly)
	}
	_, _, err = Open("cuda")
	var de *device.Error
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Errorf("explicit cuda: %v", err)
	}
	_, _, err = Open("opencl")
	if !errors.As(err, &de) || de.Stage != device.StageBuild || !strings.Contains(err.Error(), "line 1: error") {
		t.Errorf("explicit opencl: %v, want the build log", err)
	}
	if d, line, err := Open("cpu"); d != nil || err != nil || line != "device: cpu" {
		t.Errorf("cpu: %v, %v", d, err)
	}
	var ce *ChoiceError
	if _, _, err := Open("gpu"); !errors.As(err, &ce) || Check("gpu") == nil || Check("auto") != nil {
		t.Errorf("unknown choice: %v", err)
	}
}

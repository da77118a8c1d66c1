package model_test

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/opencl"
	"github.com/lfmq/lfmq/engine/model"
)

var (
	clOnce sync.Once
	clDev  *opencl.Device
	clErr  error
)

// openCL returns the OpenCL device the device tests run on (PoCL here and
// in CI), shared by the test binary, or skips when there is none, unless
// LFMQ_REQUIRE_OPENCL is set (CI sets it, so a missing PoCL fails there).
func openCL(t testing.TB) *opencl.Device {
	t.Helper()
	clOnce.Do(func() { clDev, clErr = opencl.Open(opencl.Options{}) })
	if clErr != nil {
		var de *device.Error
		if errors.As(clErr, &de) && (de.Stage == device.StageLibrary || de.Stage == device.StageDevice) && os.Getenv("LFMQ_REQUIRE_OPENCL") == "" {
			t.Skipf("no OpenCL device: %v", clErr)
		}
		t.Fatal(clErr)
	}
	return clDev
}

// TestDeviceLogitsBits: on an OpenCL device the fixture's logits are the
// golden bits of TestLogitsBits, BF16 and RTN lfmq-1 alike.
func TestDeviceLogitsBits(t *testing.T) {
	checkLogitsBits(t, model.LoadOptions{Device: openCL(t)})
}

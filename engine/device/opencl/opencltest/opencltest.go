// Package opencltest gives tests the OpenCL device they run on (PoCL on
// the development machine and in CI): one per test binary, or a skip where
// there is none, unless LFMQ_REQUIRE_OPENCL is set (CI sets it, so a
// missing PoCL fails there instead of passing unseen).
package opencltest

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/opencl"
)

var (
	once sync.Once
	dev  *opencl.Device
	err  error
)

// Open returns the test binary's OpenCL device, opened on first use, or
// skips t when the machine has no OpenCL library or device (fails it when
// LFMQ_REQUIRE_OPENCL is set, or for any other error).
func Open(t testing.TB) *opencl.Device {
	t.Helper()
	once.Do(func() { dev, err = opencl.Open(opencl.Options{}) })
	if err != nil {
		var de *device.Error
		if errors.As(err, &de) && (de.Stage == device.StageLibrary || de.Stage == device.StageDevice) && os.Getenv("LFMQ_REQUIRE_OPENCL") == "" {
			t.Skipf("no OpenCL device: %v", err)
		}
		t.Fatal(err)
	}
	return dev
}

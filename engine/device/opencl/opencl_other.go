//go:build !linux

package opencl

import (
	"runtime"

	"github.com/lfmq/lfmq/engine/device"
)

// Device is not available on this platform; Open always fails.
type Device struct{ device.Device }

// Open reports that this build has no OpenCL binding.
func Open(Options) (*Device, error) {
	return nil, &device.Error{Kind: device.OpenCL, Stage: device.StageLibrary, Library: Library, Msg: "the OpenCL binding is built for Linux only, not " + runtime.GOOS}
}

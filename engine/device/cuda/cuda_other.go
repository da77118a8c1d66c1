//go:build !linux

package cuda

import (
	"runtime"

	"github.com/lfmq/lfmq/engine/device"
)

// Device is not available on this platform; Open always fails.
type Device struct{ device.Device }

// Open reports that this build has no CUDA binding.
func Open(Options) (*Device, error) {
	return nil, &device.Error{Kind: device.CUDA, Stage: device.StageLibrary, Library: Library, Msg: "the CUDA binding is built for Linux only, not " + runtime.GOOS}
}

// Package cuda runs lfmq's kernels on an NVIDIA GPU through the CUDA
// driver API (libcuda.so.1), loaded at run time with purego: no cgo, and
// a binary that runs unchanged where the driver is missing. The kernels
// are the ahead-of-time PTX of device.PTX, JIT-compiled by the driver at
// Open.
//
// A CUDA context is current per OS thread, so every driver call runs on
// one goroutine locked to its thread; the Device's methods hand their work
// to it and wait.
package cuda

import "github.com/lfmq/lfmq/engine/device"

// Library is the file the binding loads.
const Library = "libcuda.so.1"

// Options selects the GPU Open uses.
type Options struct {
	// Ordinal is the CUDA device number (0 = the first GPU).
	Ordinal int
	// PTX replaces the kernels (tests of the JIT-failure path).
	PTX string
}

// buf is device memory: a CUdeviceptr and its size.
type buf struct {
	ptr uint64
	n   int
}

func (b *buf) Bytes() int { return b.n }

var _ device.Buffer = (*buf)(nil)

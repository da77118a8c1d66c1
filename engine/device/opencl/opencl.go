// Package opencl runs lfmq's kernels on an OpenCL 1.2 device through the
// ICD loader (libOpenCL.so.1), loaded at run time with purego: no cgo, and
// a binary that runs unchanged where the library is missing. The kernels
// are built from the embedded source with the exact level's options
// (device.BuildOptions).
package opencl

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/lfmq/lfmq/engine/device"
)

// Library is the file the binding loads.
const Library = "libOpenCL.so.1"

// Options selects the device Open uses.
type Options struct {
	// GPUOnly skips devices that run on the host CPU (PoCL): auto
	// selection wants an accelerator, a test wants PoCL.
	GPUOnly bool
	// Source replaces the kernel source (tests of the build-failure path).
	Source string
}

// buf is an OpenCL buffer.
type buf struct {
	mem uintptr
	n   int
}

func (b *buf) Bytes() int { return b.n }

var _ device.Buffer = (*buf)(nil)

// kernelNames lists the kernels a source defines, in order: every name
// after "__kernel void".
func kernelNames(src string) []string {
	var names []string
	for rest := src; ; {
		i := strings.Index(rest, "__kernel void ")
		if i < 0 {
			return names
		}
		rest = rest[i+len("__kernel void "):]
		j := strings.IndexByte(rest, '(')
		if j < 0 {
			return names
		}
		names = append(names, strings.TrimSpace(rest[:j]))
	}
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

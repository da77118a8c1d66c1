// Package device is the seam between lfmq's engine and an accelerator: the
// interface a compute device offers the model (memory, copies, kernel
// launches on one in-order queue), the typed errors of loading and running
// it, and the one kernel source every device runs (kernels.cl, OpenCL C),
// with its ahead-of-time PTX for the CUDA driver.
//
// The bindings live in the subpackages opencl and cuda, which load their
// native libraries at run time with purego, so a CGO_ENABLED=0 binary runs
// unchanged where no GPU library exists; package device/pick chooses one.
// The model decides what to compute (engine/model); a Device only runs the
// kernels it is given, in order.
package device

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
)

// Kind names a family of devices as the --device flag spells it.
type Kind string

// The device kinds.
const (
	// CPU is the engine's own CPU path; it needs no Device.
	CPU Kind = "cpu"
	// OpenCL is any OpenCL 1.2 device with cl_khr_fp64, through the ICD
	// loader libOpenCL.so.1.
	OpenCL Kind = "opencl"
	// CUDA is an NVIDIA GPU through the CUDA driver API, libcuda.so.1.
	CUDA Kind = "cuda"
)

// Info describes an opened device for logs, /v1/models and evidence
// receipts.
type Info struct {
	Kind   Kind   `json:"kind"`
	Name   string `json:"name"`             // the device's own name
	Driver string `json:"driver"`           // platform or driver version
	Kernel string `json:"kernel_sha256"`    // sha256 of the kernel source (OpenCL) or PTX (CUDA) it runs
	Memory int64  `json:"memory_bytes"`     // global memory
	IsCPU  bool   `json:"is_cpu,omitempty"` // an OpenCL device that runs on the host CPU (PoCL)
}

// String is the one-line form the logs use. The engine's own CPU path runs
// no kernel source, so it names none.
func (i Info) String() string {
	s := fmt.Sprintf("%s %q (%s)", i.Kind, i.Name, i.Driver)
	if i.Kernel != "" {
		s = fmt.Sprintf("%s %q (%s, kernels %.12s)", i.Kind, i.Name, i.Driver, i.Kernel)
	}
	if i.IsCPU {
		s += ", a CPU device"
	}
	return s
}

// Buffer is a region of device memory. It is only meaningful to the Device
// that allocated it.
type Buffer interface {
	// Bytes is the buffer's size.
	Bytes() int
}

// Device is a compute device with one in-order queue. Every call after
// Open is made by one goroutine at a time (the model serialises its steps);
// launches and copies are queued in order and Read waits for them.
// Errors are *Error values.
type Device interface {
	// Info describes the device.
	Info() Info
	// Alloc returns a zero-filled buffer of n > 0 bytes.
	Alloc(n int) (Buffer, error)
	// Free releases a buffer; it must not be used afterwards.
	Free(b Buffer)
	// Write copies src into b at byte offset off.
	Write(b Buffer, off int, src []byte) error
	// Read waits for the queue and copies b's bytes at off into dst.
	Read(b Buffer, off int, dst []byte) error
	// Copy copies n bytes from src at soff to dst at doff, in queue order.
	Copy(dst Buffer, doff int, src Buffer, soff, n int) error
	// Launch queues kernel name over n work-items in work-groups of local
	// (0: the device chooses), with args of type Buffer, int32, uint32 or
	// float32 in the kernel's parameter order. A kernel rounds nothing
	// up: it checks its global id against the size it is passed.
	Launch(name string, n, local int, args ...any) error
	// Finish waits until everything queued has run.
	Finish() error
	// Close releases the device's resources.
	Close() error
}

//go:embed kernels.cl
var kernelSource string

//go:embed kernels.ptx
var kernelPTX string

// Source returns the OpenCL C source of every kernel.
func Source() string { return kernelSource }

// PTX returns the kernels compiled ahead of time for the CUDA driver
// (clang-14 with libclc; scripts/gen-ptx.sh).
func PTX() string { return kernelPTX }

// SourceDigest is the sha256 of the kernel source, hex.
func SourceDigest() string { return digest(kernelSource) }

// PTXDigest is the sha256 of the PTX, hex.
func PTXDigest() string { return digest(kernelPTX) }

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// BuildOptions are the OpenCL compiler options of the exact level: no
// contraction, no fast math, correctly rounded division and square root.
const BuildOptions = "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt"

//go:build linux

package opencl

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/internal/native"
)

// OpenCL constants (cl.h).
const (
	clSuccess             = 0
	clDeviceTypeAll       = 0xFFFFFFFF
	clDeviceTypeCPU       = 1 << 1
	clDeviceName          = 0x102B
	clDeviceVersion       = 0x102F
	clDriverVersion       = 0x102D
	clDeviceType          = 0x1000
	clDeviceGlobalMemSize = 0x101F
	clDeviceExtensions    = 0x1030
	clPlatformName        = 0x0902
	clPlatformVersion     = 0x0901
	clProgramBuildLog     = 0x1183
	clMemReadWrite        = 1 << 0
	clTrue                = 1
	clDeviceNotFound      = -1
	clBuildProgramFailure = -11
	clPlatformNotFoundKHR = -1001
)

// api holds the library's functions, registered once.
type api struct {
	GetPlatformIDs       func(n uint32, ids *uintptr, num *uint32) int32
	GetPlatformInfo      func(p uintptr, param uint32, size uintptr, val unsafe.Pointer, ret *uintptr) int32
	GetDeviceIDs         func(p uintptr, typ uint64, n uint32, ids *uintptr, num *uint32) int32
	GetDeviceInfo        func(d uintptr, param uint32, size uintptr, val unsafe.Pointer, ret *uintptr) int32
	CreateContext        func(props unsafe.Pointer, n uint32, devs *uintptr, cb uintptr, user uintptr, errc *int32) uintptr
	CreateCommandQueue   func(ctx, dev uintptr, props uint64, errc *int32) uintptr
	CreateProgramWithSrc func(ctx uintptr, n uint32, strs **byte, lens *uintptr, errc *int32) uintptr
	BuildProgram         func(prog uintptr, n uint32, devs *uintptr, opts *byte, cb uintptr, user uintptr) int32
	GetProgramBuildInfo  func(prog, dev uintptr, param uint32, size uintptr, val unsafe.Pointer, ret *uintptr) int32
	CreateKernel         func(prog uintptr, name *byte, errc *int32) uintptr
	SetKernelArg         func(k uintptr, idx uint32, size uintptr, val unsafe.Pointer) int32
	EnqueueNDRangeKernel func(q, k uintptr, dim uint32, off, global, local *uintptr, nev uint32, wait, ev uintptr) int32
	CreateBuffer         func(ctx uintptr, flags uint64, size uintptr, host uintptr, errc *int32) uintptr
	EnqueueWriteBuffer   func(q, mem uintptr, block uint32, off, size uintptr, ptr unsafe.Pointer, nev uint32, wait, ev uintptr) int32
	EnqueueReadBuffer    func(q, mem uintptr, block uint32, off, size uintptr, ptr unsafe.Pointer, nev uint32, wait, ev uintptr) int32
	EnqueueCopyBuffer    func(q, src, dst uintptr, soff, doff, size uintptr, nev uint32, wait, ev uintptr) int32
	EnqueueFillBuffer    func(q, mem uintptr, pat unsafe.Pointer, patSize, off, size uintptr, nev uint32, wait, ev uintptr) int32
	Finish               func(q uintptr) int32
	ReleaseMemObject     func(mem uintptr) int32
	ReleaseKernel        func(k uintptr) int32
	ReleaseProgram       func(p uintptr) int32
	ReleaseCommandQueue  func(q uintptr) int32
	ReleaseContext       func(c uintptr) int32
}

var (
	loadOnce sync.Once
	lib      *api
	libErr   error
)

// load opens the ICD loader once, lazily.
func load() (*api, error) {
	loadOnce.Do(func() {
		a := &api{}
		libErr = native.Bind(device.OpenCL, Library, "install an OpenCL ICD loader and driver, e.g. Debian's ocl-icd-libopencl1 with a vendor ICD", []native.Func{
			native.F(&a.GetPlatformIDs, "clGetPlatformIDs"), native.F(&a.GetPlatformInfo, "clGetPlatformInfo"),
			native.F(&a.GetDeviceIDs, "clGetDeviceIDs"), native.F(&a.GetDeviceInfo, "clGetDeviceInfo"),
			native.F(&a.CreateContext, "clCreateContext"), native.F(&a.CreateCommandQueue, "clCreateCommandQueue"),
			native.F(&a.CreateProgramWithSrc, "clCreateProgramWithSource"), native.F(&a.BuildProgram, "clBuildProgram"),
			native.F(&a.GetProgramBuildInfo, "clGetProgramBuildInfo"), native.F(&a.CreateKernel, "clCreateKernel"),
			native.F(&a.SetKernelArg, "clSetKernelArg"), native.F(&a.EnqueueNDRangeKernel, "clEnqueueNDRangeKernel"),
			native.F(&a.CreateBuffer, "clCreateBuffer"), native.F(&a.EnqueueWriteBuffer, "clEnqueueWriteBuffer"),
			native.F(&a.EnqueueReadBuffer, "clEnqueueReadBuffer"), native.F(&a.EnqueueCopyBuffer, "clEnqueueCopyBuffer"),
			native.F(&a.EnqueueFillBuffer, "clEnqueueFillBuffer"), native.F(&a.Finish, "clFinish"),
			native.F(&a.ReleaseMemObject, "clReleaseMemObject"), native.F(&a.ReleaseKernel, "clReleaseKernel"),
			native.F(&a.ReleaseProgram, "clReleaseProgram"), native.F(&a.ReleaseCommandQueue, "clReleaseCommandQueue"),
			native.F(&a.ReleaseContext, "clReleaseContext"),
		})
		if libErr == nil {
			lib = a
		}
	})
	return lib, libErr
}

// Device is an opened OpenCL device with its built kernels.
type Device struct {
	a       *api
	dev     uintptr
	ctx     uintptr
	queue   uintptr
	prog    uintptr
	kernels map[string]uintptr
	info    device.Info
}

var _ device.Device = (*Device)(nil)

func (d *Device) fail(stage device.Stage, call string, code int32, msg string) error {
	return &device.Error{Kind: device.OpenCL, Stage: stage, Call: call, Code: int(code), Msg: msg}
}

// Open loads the library, picks the first device that qualifies (every
// platform in order; with GPUOnly, no CPU devices) and builds the kernels.
func Open(opts Options) (*Device, error) {
	a, err := load()
	if err != nil {
		return nil, err
	}
	var np uint32
	if rc := a.GetPlatformIDs(0, nil, &np); rc != clSuccess || np == 0 {
		return nil, &device.Error{Kind: device.OpenCL, Stage: device.StageDevice, Call: "clGetPlatformIDs", Code: int(rc), Msg: "no OpenCL platform (is an ICD installed under /etc/OpenCL/vendors?)"}
	}
	plats := make([]uintptr, np)
	a.GetPlatformIDs(np, &plats[0], nil)
	var seen []string
	for _, p := range plats {
		var nd uint32
		if rc := a.GetDeviceIDs(p, clDeviceTypeAll, 0, nil, &nd); rc != clSuccess || nd == 0 {
			continue
		}
		devs := make([]uintptr, nd)
		a.GetDeviceIDs(p, clDeviceTypeAll, nd, &devs[0], nil)
		for _, dv := range devs {
			name := devString(a, dv, clDeviceName)
			var typ uint64
			a.GetDeviceInfo(dv, clDeviceType, 8, unsafe.Pointer(&typ), nil)
			isCPU := typ&clDeviceTypeCPU != 0
			ext := devString(a, dv, clDeviceExtensions)
			switch {
			case opts.GPUOnly && isCPU:
				seen = append(seen, name+" (a CPU device)")
				continue
			case !strings.Contains(ext, "cl_khr_fp64"):
				seen = append(seen, name+" (no cl_khr_fp64)")
				continue
			}
			var mem uint64
			a.GetDeviceInfo(dv, clDeviceGlobalMemSize, 8, unsafe.Pointer(&mem), nil)
			d := &Device{a: a, dev: dv, kernels: map[string]uintptr{}}
			d.info = device.Info{Kind: device.OpenCL, Name: name,
				Driver: platString(a, p, clPlatformName) + " " + platString(a, p, clPlatformVersion) + ", driver " + devString(a, dv, clDriverVersion),
				Memory: int64(mem), IsCPU: isCPU}
			src := device.Source()
			if opts.Source != "" {
				src = opts.Source
			}
			d.info.Kernel = sha256hex(src)
			if err := d.init(src); err != nil {
				d.Close()
				return nil, err
			}
			return d, nil
		}
	}
	msg := "no OpenCL device"
	if len(seen) > 0 {
		msg += " that qualifies; found " + strings.Join(seen, ", ")
	}
	return nil, &device.Error{Kind: device.OpenCL, Stage: device.StageDevice, Msg: msg}
}

func (d *Device) init(src string) error {
	a := d.a
	var rc int32
	d.ctx = a.CreateContext(nil, 1, &d.dev, 0, 0, &rc)
	if rc != clSuccess {
		return d.fail(device.StageDevice, "clCreateContext", rc, "")
	}
	d.queue = a.CreateCommandQueue(d.ctx, d.dev, 0, &rc)
	if rc != clSuccess {
		return d.fail(device.StageDevice, "clCreateCommandQueue", rc, "")
	}
	cs := append([]byte(src), 0)
	p := &cs[0]
	n := uintptr(len(src))
	d.prog = a.CreateProgramWithSrc(d.ctx, 1, &p, &n, &rc)
	runtime.KeepAlive(cs)
	if rc != clSuccess {
		return d.fail(device.StageBuild, "clCreateProgramWithSource", rc, "")
	}
	opts := append([]byte(device.BuildOptions), 0)
	if rc = a.BuildProgram(d.prog, 1, &d.dev, &opts[0], 0, 0); rc != clSuccess {
		e := d.fail(device.StageBuild, "clBuildProgram", rc, "the kernels did not compile").(*device.Error)
		e.Log = d.buildLog()
		return e
	}
	for _, name := range kernelNames(src) {
		cn := append([]byte(name), 0)
		k := a.CreateKernel(d.prog, &cn[0], &rc)
		if rc != clSuccess {
			return d.fail(device.StageBuild, "clCreateKernel", rc, "kernel "+name)
		}
		d.kernels[name] = k
	}
	return nil
}

func (d *Device) buildLog() string {
	var n uintptr
	d.a.GetProgramBuildInfo(d.prog, d.dev, clProgramBuildLog, 0, nil, &n)
	if n == 0 {
		return ""
	}
	b := make([]byte, n)
	d.a.GetProgramBuildInfo(d.prog, d.dev, clProgramBuildLog, n, unsafe.Pointer(&b[0]), nil)
	return strings.TrimRight(string(b), "\x00\n ")
}

// Info implements device.Device.
func (d *Device) Info() device.Info { return d.info }

// Alloc implements device.Device.
func (d *Device) Alloc(n int) (device.Buffer, error) {
	if n <= 0 {
		return nil, d.fail(device.StageRun, "", 0, fmt.Sprintf("Alloc(%d): need a positive size", n))
	}
	var rc int32
	mem := d.a.CreateBuffer(d.ctx, clMemReadWrite, uintptr(n), 0, &rc)
	if rc != clSuccess {
		return nil, d.fail(device.StageRun, "clCreateBuffer", rc, fmt.Sprintf("%d bytes", n))
	}
	var zero byte
	if rc = d.a.EnqueueFillBuffer(d.queue, mem, unsafe.Pointer(&zero), 1, 0, uintptr(n), 0, 0, 0); rc != clSuccess {
		d.a.ReleaseMemObject(mem)
		return nil, d.fail(device.StageRun, "clEnqueueFillBuffer", rc, "")
	}
	// The pattern is read when the fill runs: wait for it.
	if rc = d.a.Finish(d.queue); rc != clSuccess {
		d.a.ReleaseMemObject(mem)
		return nil, d.fail(device.StageRun, "clFinish", rc, "")
	}
	return &buf{mem: mem, n: n}, nil
}

// Free implements device.Device.
func (d *Device) Free(b device.Buffer) {
	if bb, ok := b.(*buf); ok && bb.mem != 0 {
		d.a.ReleaseMemObject(bb.mem)
		bb.mem = 0
	}
}

func (d *Device) check(b device.Buffer, off, n int, what string) (*buf, error) {
	bb, ok := b.(*buf)
	if !ok || bb.mem == 0 {
		return nil, d.fail(device.StageRun, "", 0, what+": not a live buffer of this device")
	}
	if off < 0 || n < 0 || off+n > bb.n {
		return nil, d.fail(device.StageRun, "", 0, fmt.Sprintf("%s: bytes [%d, %d) outside a buffer of %d", what, off, off+n, bb.n))
	}
	return bb, nil
}

// Write implements device.Device. It blocks until src has been read.
func (d *Device) Write(b device.Buffer, off int, src []byte) error {
	bb, err := d.check(b, off, len(src), "Write")
	if err != nil || len(src) == 0 {
		return err
	}
	if rc := d.a.EnqueueWriteBuffer(d.queue, bb.mem, clTrue, uintptr(off), uintptr(len(src)), unsafe.Pointer(&src[0]), 0, 0, 0); rc != clSuccess {
		return d.fail(device.StageRun, "clEnqueueWriteBuffer", rc, "")
	}
	return nil
}

// Read implements device.Device.
func (d *Device) Read(b device.Buffer, off int, dst []byte) error {
	bb, err := d.check(b, off, len(dst), "Read")
	if err != nil || len(dst) == 0 {
		return err
	}
	if rc := d.a.EnqueueReadBuffer(d.queue, bb.mem, clTrue, uintptr(off), uintptr(len(dst)), unsafe.Pointer(&dst[0]), 0, 0, 0); rc != clSuccess {
		return d.fail(device.StageRun, "clEnqueueReadBuffer", rc, "")
	}
	return nil
}

// Copy implements device.Device.
func (d *Device) Copy(dst device.Buffer, doff int, src device.Buffer, soff, n int) error {
	db, err := d.check(dst, doff, n, "Copy")
	if err != nil {
		return err
	}
	sb, err := d.check(src, soff, n, "Copy")
	if err != nil || n == 0 {
		return err
	}
	if rc := d.a.EnqueueCopyBuffer(d.queue, sb.mem, db.mem, uintptr(soff), uintptr(doff), uintptr(n), 0, 0, 0); rc != clSuccess {
		return d.fail(device.StageRun, "clEnqueueCopyBuffer", rc, "")
	}
	return nil
}

// Launch implements device.Device.
func (d *Device) Launch(name string, n, local int, args ...any) error {
	k, ok := d.kernels[name]
	if !ok {
		return d.fail(device.StageRun, "", 0, "no kernel "+name)
	}
	if n <= 0 {
		return nil
	}
	for i, arg := range args {
		var rc int32
		switch v := arg.(type) {
		case device.Buffer:
			bb, ok := v.(*buf)
			if !ok || bb.mem == 0 {
				return d.fail(device.StageRun, "", 0, fmt.Sprintf("%s argument %d: not a live buffer of this device", name, i))
			}
			mem := bb.mem
			rc = d.a.SetKernelArg(k, uint32(i), unsafe.Sizeof(mem), unsafe.Pointer(&mem))
		case int32:
			rc = d.a.SetKernelArg(k, uint32(i), 4, unsafe.Pointer(&v))
		case uint32:
			rc = d.a.SetKernelArg(k, uint32(i), 4, unsafe.Pointer(&v))
		case float32:
			rc = d.a.SetKernelArg(k, uint32(i), 4, unsafe.Pointer(&v))
		default:
			return d.fail(device.StageRun, "", 0, fmt.Sprintf("%s argument %d: unsupported type %T", name, i, arg))
		}
		if rc != clSuccess {
			return d.fail(device.StageRun, "clSetKernelArg", rc, fmt.Sprintf("%s argument %d", name, i))
		}
	}
	global := uintptr(n)
	var lp *uintptr
	if local > 0 {
		l := uintptr(local)
		global = (global + l - 1) / l * l
		lp = &l
	}
	if rc := d.a.EnqueueNDRangeKernel(d.queue, k, 1, nil, &global, lp, 0, 0, 0); rc != clSuccess {
		return d.fail(device.StageRun, "clEnqueueNDRangeKernel", rc, name)
	}
	return nil
}

// Finish implements device.Device.
func (d *Device) Finish() error {
	if rc := d.a.Finish(d.queue); rc != clSuccess {
		return d.fail(device.StageRun, "clFinish", rc, "")
	}
	return nil
}

// Close implements device.Device.
func (d *Device) Close() error {
	a := d.a
	if d.queue != 0 {
		a.Finish(d.queue)
	}
	for _, k := range d.kernels {
		a.ReleaseKernel(k)
	}
	d.kernels = nil
	if d.prog != 0 {
		a.ReleaseProgram(d.prog)
		d.prog = 0
	}
	if d.queue != 0 {
		a.ReleaseCommandQueue(d.queue)
		d.queue = 0
	}
	if d.ctx != 0 {
		a.ReleaseContext(d.ctx)
		d.ctx = 0
	}
	return nil
}

func devString(a *api, dv uintptr, param uint32) string {
	var n uintptr
	if a.GetDeviceInfo(dv, param, 0, nil, &n) != clSuccess || n == 0 {
		return ""
	}
	b := make([]byte, n)
	a.GetDeviceInfo(dv, param, n, unsafe.Pointer(&b[0]), nil)
	return strings.TrimSpace(strings.TrimRight(string(b), "\x00"))
}

func platString(a *api, p uintptr, param uint32) string {
	var n uintptr
	if a.GetPlatformInfo(p, param, 0, nil, &n) != clSuccess || n == 0 {
		return ""
	}
	b := make([]byte, n)
	a.GetPlatformInfo(p, param, n, unsafe.Pointer(&b[0]), nil)
	return strings.TrimSpace(strings.TrimRight(string(b), "\x00"))
}

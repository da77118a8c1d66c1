//go:build linux

package cuda

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"crypto/sha256"
	"encoding/hex"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/internal/native"
)

// CUDA driver constants (cuda.h).
const (
	cudaSuccess              = 0
	cuJITInfoLogBuffer       = 3
	cuJITInfoLogBufferBytes  = 4
	cuJITErrorLogBuffer      = 5
	cuJITErrorLogBufferBytes = 6
	cuJITLogVerbose          = 12
	jitLogBytes              = 1 << 16
	defaultBlock             = 256
)

// api holds the driver's functions, registered once.
type api struct {
	Init              func(flags uint32) int32
	DriverGetVersion  func(v *int32) int32
	DeviceGetCount    func(n *int32) int32
	DeviceGet         func(dev *int32, ordinal int32) int32
	DeviceGetName     func(name *byte, n int32, dev int32) int32
	DeviceTotalMem    func(bytes *uint64, dev int32) int32
	PrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	PrimaryCtxRelease func(dev int32) int32
	CtxSetCurrent     func(ctx uintptr) int32
	CtxSynchronize    func() int32
	ModuleLoadDataEx  func(mod *uintptr, image *byte, n uint32, opts *int32, vals *uintptr) int32
	ModuleUnload      func(mod uintptr) int32
	ModuleGetFunction func(fn *uintptr, mod uintptr, name *byte) int32
	MemAlloc          func(ptr *uint64, n uint64) int32
	MemFree           func(ptr uint64) int32
	MemsetD8          func(ptr uint64, v uint8, n uint64) int32
	MemcpyHtoD        func(dst uint64, src unsafe.Pointer, n uint64) int32
	MemcpyDtoH        func(dst unsafe.Pointer, src uint64, n uint64) int32
	MemcpyDtoDAsync   func(dst, src uint64, n uint64, stream uintptr) int32
	LaunchKernel      func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params *unsafe.Pointer, extra uintptr) int32
	GetErrorString    func(code int32, s **byte) int32
}

var (
	loadOnce sync.Once
	lib      *api
	libErr   error
)

func load() (*api, error) {
	loadOnce.Do(func() {
		a := &api{}
		libErr = native.Bind(device.CUDA, Library, "the NVIDIA driver is not installed or not visible", []native.Func{
			native.F(&a.Init, "cuInit"), native.F(&a.DriverGetVersion, "cuDriverGetVersion"), native.F(&a.DeviceGetCount, "cuDeviceGetCount"),
			native.F(&a.DeviceGet, "cuDeviceGet"), native.F(&a.DeviceGetName, "cuDeviceGetName"), native.F(&a.DeviceTotalMem, "cuDeviceTotalMem_v2"),
			native.F(&a.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"), native.F(&a.PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
			native.F(&a.CtxSetCurrent, "cuCtxSetCurrent"), native.F(&a.CtxSynchronize, "cuCtxSynchronize"),
			native.F(&a.ModuleLoadDataEx, "cuModuleLoadDataEx"), native.F(&a.ModuleUnload, "cuModuleUnload"),
			native.F(&a.ModuleGetFunction, "cuModuleGetFunction"), native.F(&a.MemAlloc, "cuMemAlloc_v2"), native.F(&a.MemFree, "cuMemFree_v2"),
			native.F(&a.MemsetD8, "cuMemsetD8_v2"), native.F(&a.MemcpyHtoD, "cuMemcpyHtoD_v2"), native.F(&a.MemcpyDtoH, "cuMemcpyDtoH_v2"),
			native.F(&a.MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"), native.F(&a.LaunchKernel, "cuLaunchKernel"), native.F(&a.GetErrorString, "cuGetErrorString"),
		})
		if libErr == nil {
			lib = a
		}
	})
	return lib, libErr
}

// Device is an opened CUDA GPU with the kernels JIT-loaded. Its driver
// calls all run on one locked OS thread (the worker goroutine).
type Device struct {
	a     *api
	dev   int32
	ctx   uintptr
	mod   uintptr
	fns   map[string]uintptr
	info  device.Info
	work  chan func()
	done  chan struct{}
	close sync.Once

	// errMu guards queued, the first error of work posted without waiting
	// (launches, copies, writes); the next call that waits reports it.
	errMu  sync.Mutex
	queued error
}

var _ device.Device = (*Device)(nil)

// do runs f on the device's thread and waits for it; an error of earlier
// posted work comes first.
func (d *Device) do(f func() error) error {
	errc := make(chan error, 1)
	d.work <- func() { errc <- f() }
	err := <-errc
	d.errMu.Lock()
	defer d.errMu.Unlock()
	if q := d.queued; q != nil {
		d.queued = nil
		return q
	}
	return err
}

// post hands f to the device's thread without waiting: a decode step's
// hundreds of launches then cost the caller a channel send each, not a
// round trip. f's error is kept for the next call that waits.
func (d *Device) post(f func() error) {
	d.work <- func() {
		if err := f(); err != nil {
			d.errMu.Lock()
			if d.queued == nil {
				d.queued = err
			}
			d.errMu.Unlock()
		}
	}
}

func (d *Device) errorf(stage device.Stage, call string, rc int32, msg string) error {
	e := &device.Error{Kind: device.CUDA, Stage: stage, Call: call, Code: int(rc), Msg: msg}
	var s *byte
	if d != nil && d.a != nil && d.a.GetErrorString(rc, &s) == cudaSuccess && s != nil {
		name := goString(s)
		if e.Msg == "" {
			e.Msg = name
		} else {
			e.Msg += " (" + name + ")"
		}
	}
	return e
}

// Open loads the driver, retains the primary context of GPU
// opts.Ordinal and JIT-compiles the kernels' PTX.
func Open(opts Options) (*Device, error) {
	a, err := load()
	if err != nil {
		return nil, err
	}
	d := &Device{a: a, fns: map[string]uintptr{}, work: make(chan func(), 4096), done: make(chan struct{})}
	ready := make(chan error, 1)
	go d.loop(opts, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

// loop is the device's thread: it initialises the context and then runs
// the work handed to it until Close.
func (d *Device) loop(opts Options, ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.init(opts); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case f := <-d.work:
			f()
		case <-d.done:
			d.a.CtxSynchronize()
			if d.mod != 0 {
				d.a.ModuleUnload(d.mod)
			}
			d.a.PrimaryCtxRelease(d.dev)
			return
		}
	}
}

func (d *Device) init(opts Options) error {
	a := d.a
	if rc := a.Init(0); rc != cudaSuccess {
		return d.errorf(device.StageDevice, "cuInit", rc, "")
	}
	var n int32
	if rc := a.DeviceGetCount(&n); rc != cudaSuccess || n == 0 {
		return d.errorf(device.StageDevice, "cuDeviceGetCount", rc, "no CUDA GPU")
	}
	if opts.Ordinal < 0 || int32(opts.Ordinal) >= n {
		return &device.Error{Kind: device.CUDA, Stage: device.StageDevice, Msg: fmt.Sprintf("GPU %d asked for; %d present", opts.Ordinal, n)}
	}
	if rc := a.DeviceGet(&d.dev, int32(opts.Ordinal)); rc != cudaSuccess {
		return d.errorf(device.StageDevice, "cuDeviceGet", rc, "")
	}
	name := make([]byte, 256)
	a.DeviceGetName(&name[0], int32(len(name)), d.dev)
	var mem uint64
	a.DeviceTotalMem(&mem, d.dev)
	var ver int32
	a.DriverGetVersion(&ver)
	if rc := a.PrimaryCtxRetain(&d.ctx, d.dev); rc != cudaSuccess {
		return d.errorf(device.StageDevice, "cuDevicePrimaryCtxRetain", rc, "")
	}
	if rc := a.CtxSetCurrent(d.ctx); rc != cudaSuccess {
		return d.errorf(device.StageDevice, "cuCtxSetCurrent", rc, "")
	}
	ptx := device.PTX()
	if opts.PTX != "" {
		ptx = opts.PTX
	}
	d.info = device.Info{Kind: device.CUDA, Name: goString(&name[0]), Driver: fmt.Sprintf("CUDA driver %d.%d", ver/1000, ver%1000/10),
		Kernel: sha256hex(ptx), Memory: int64(mem)}
	return d.jit(ptx)
}

// jit loads the PTX, keeping the JIT's error log for a failure.
func (d *Device) jit(ptx string) error {
	img := append([]byte(ptx), 0)
	errLog := make([]byte, jitLogBytes)
	infoLog := make([]byte, jitLogBytes)
	var pin runtime.Pinner
	pin.Pin(&errLog[0])
	pin.Pin(&infoLog[0])
	defer pin.Unpin()
	opts := []int32{cuJITErrorLogBuffer, cuJITErrorLogBufferBytes, cuJITInfoLogBuffer, cuJITInfoLogBufferBytes}
	vals := []uintptr{uintptr(unsafe.Pointer(&errLog[0])), jitLogBytes, uintptr(unsafe.Pointer(&infoLog[0])), jitLogBytes}
	if rc := d.a.ModuleLoadDataEx(&d.mod, &img[0], uint32(len(opts)), &opts[0], &vals[0]); rc != cudaSuccess {
		e := d.errorf(device.StageBuild, "cuModuleLoadDataEx", rc, "the PTX did not JIT-compile").(*device.Error)
		e.Log = strings.TrimSpace(goString(&errLog[0]))
		return e
	}
	runtime.KeepAlive(img)
	for _, name := range entryNames(ptx) {
		var fn uintptr
		cn := append([]byte(name), 0)
		if rc := d.a.ModuleGetFunction(&fn, d.mod, &cn[0]); rc != cudaSuccess {
			return d.errorf(device.StageBuild, "cuModuleGetFunction", rc, name)
		}
		d.fns[name] = fn
	}
	return nil
}

// Info implements device.Device.
func (d *Device) Info() device.Info { return d.info }

// Alloc implements device.Device.
func (d *Device) Alloc(n int) (device.Buffer, error) {
	if n <= 0 {
		return nil, &device.Error{Kind: device.CUDA, Stage: device.StageRun, Msg: fmt.Sprintf("Alloc(%d): need a positive size", n)}
	}
	b := &buf{n: n}
	err := d.do(func() error {
		if rc := d.a.MemAlloc(&b.ptr, uint64(n)); rc != cudaSuccess {
			return d.errorf(device.StageRun, "cuMemAlloc", rc, fmt.Sprintf("%d bytes", n))
		}
		if rc := d.a.MemsetD8(b.ptr, 0, uint64(n)); rc != cudaSuccess {
			d.a.MemFree(b.ptr)
			return d.errorf(device.StageRun, "cuMemsetD8", rc, "")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Free implements device.Device.
func (d *Device) Free(b device.Buffer) {
	if bb, ok := b.(*buf); ok && bb.ptr != 0 {
		p := bb.ptr
		bb.ptr = 0
		d.post(func() error { d.a.MemFree(p); return nil })
	}
}

func (d *Device) check(b device.Buffer, off, n int, what string) (*buf, error) {
	bb, ok := b.(*buf)
	if !ok || bb.ptr == 0 {
		return nil, &device.Error{Kind: device.CUDA, Stage: device.StageRun, Msg: what + ": not a live buffer of this device"}
	}
	if off < 0 || n < 0 || off+n > bb.n {
		return nil, &device.Error{Kind: device.CUDA, Stage: device.StageRun, Msg: fmt.Sprintf("%s: bytes [%d, %d) outside a buffer of %d", what, off, off+n, bb.n)}
	}
	return bb, nil
}

// Write implements device.Device (synchronous: src may be reused at once).
func (d *Device) Write(b device.Buffer, off int, src []byte) error {
	bb, err := d.check(b, off, len(src), "Write")
	if err != nil || len(src) == 0 {
		return err
	}
	// Small writes (a step's token ids and positions) are posted with a
	// copy of src; large ones (weights at load) wait, without a copy.
	if len(src) <= 1<<16 {
		cp := append([]byte(nil), src...)
		d.post(func() error {
			if rc := d.a.MemcpyHtoD(bb.ptr+uint64(off), unsafe.Pointer(&cp[0]), uint64(len(cp))); rc != cudaSuccess {
				return d.errorf(device.StageRun, "cuMemcpyHtoD", rc, "")
			}
			return nil
		})
		return nil
	}
	return d.do(func() error {
		if rc := d.a.MemcpyHtoD(bb.ptr+uint64(off), unsafe.Pointer(&src[0]), uint64(len(src))); rc != cudaSuccess {
			return d.errorf(device.StageRun, "cuMemcpyHtoD", rc, "")
		}
		return nil
	})
}

// Read implements device.Device.
func (d *Device) Read(b device.Buffer, off int, dst []byte) error {
	bb, err := d.check(b, off, len(dst), "Read")
	if err != nil || len(dst) == 0 {
		return err
	}
	return d.do(func() error {
		if rc := d.a.MemcpyDtoH(unsafe.Pointer(&dst[0]), bb.ptr+uint64(off), uint64(len(dst))); rc != cudaSuccess {
			return d.errorf(device.StageRun, "cuMemcpyDtoH", rc, "")
		}
		return nil
	})
}

// Copy implements device.Device, on the default stream (in order).
func (d *Device) Copy(dst device.Buffer, doff int, src device.Buffer, soff, n int) error {
	db, err := d.check(dst, doff, n, "Copy")
	if err != nil {
		return err
	}
	sb, err := d.check(src, soff, n, "Copy")
	if err != nil || n == 0 {
		return err
	}
	d.post(func() error {
		if rc := d.a.MemcpyDtoDAsync(db.ptr+uint64(doff), sb.ptr+uint64(soff), uint64(n), 0); rc != cudaSuccess {
			return d.errorf(device.StageRun, "cuMemcpyDtoDAsync", rc, "")
		}
		return nil
	})
	return nil
}

// Launch implements device.Device: n work-items in blocks of local
// (defaultBlock when 0), on the default stream. It returns once the launch
// is queued; a failure is reported by the next call that waits (Read,
// Finish, Alloc).
func (d *Device) Launch(name string, n, local int, args ...any) error {
	fn, ok := d.fns[name]
	if !ok {
		return &device.Error{Kind: device.CUDA, Stage: device.StageRun, Msg: "no kernel " + name}
	}
	if n <= 0 {
		return nil
	}
	if local <= 0 {
		local = defaultBlock
	}
	// Each argument's value lives in vals; params points at them. Both
	// are heap memory the GC does not move; the pinner makes that explicit
	// for the driver's reads during the call.
	vals := make([]uint64, len(args))
	params := make([]unsafe.Pointer, len(args))
	for i, arg := range args {
		switch v := arg.(type) {
		case device.Buffer:
			bb, ok := v.(*buf)
			if !ok || bb.ptr == 0 {
				return &device.Error{Kind: device.CUDA, Stage: device.StageRun, Msg: fmt.Sprintf("%s argument %d: not a live buffer of this device", name, i)}
			}
			vals[i] = bb.ptr
		case int32:
			*(*int32)(unsafe.Pointer(&vals[i])) = v
		case uint32:
			*(*uint32)(unsafe.Pointer(&vals[i])) = v
		case float32:
			*(*float32)(unsafe.Pointer(&vals[i])) = v
		default:
			return &device.Error{Kind: device.CUDA, Stage: device.StageRun, Msg: fmt.Sprintf("%s argument %d: unsupported type %T", name, i, arg)}
		}
		params[i] = unsafe.Pointer(&vals[i])
	}
	grid := (n + local - 1) / local
	d.post(func() error {
		var pin runtime.Pinner
		defer pin.Unpin()
		var pp *unsafe.Pointer
		if len(params) > 0 {
			pin.Pin(&vals[0])
			pp = &params[0]
		}
		if rc := d.a.LaunchKernel(fn, uint32(grid), 1, 1, uint32(local), 1, 1, 0, 0, pp, 0); rc != cudaSuccess {
			return d.errorf(device.StageRun, "cuLaunchKernel", rc, name)
		}
		return nil
	})
	return nil
}

// Finish implements device.Device.
func (d *Device) Finish() error {
	return d.do(func() error {
		if rc := d.a.CtxSynchronize(); rc != cudaSuccess {
			return d.errorf(device.StageRun, "cuCtxSynchronize", rc, "")
		}
		return nil
	})
}

// Close implements device.Device.
func (d *Device) Close() error {
	var err error
	d.close.Do(func() {
		err = d.Finish() // runs what was posted before it, in order
		close(d.done)
	})
	return err
}

// entryNames lists the kernels a PTX module defines (".entry NAME(").
func entryNames(ptx string) []string {
	var names []string
	for _, line := range strings.Split(ptx, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), ".entry "); ok {
			if i := strings.IndexByte(rest, '('); i > 0 {
				names = append(names, strings.TrimSpace(rest[:i]))
			}
		}
	}
	return names
}

func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

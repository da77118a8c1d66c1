package opencl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/opencl"
)

// openPoCL opens the first OpenCL device (PoCL on the developers' machines
// and in CI) or skips when none is installed, unless LFMQ_REQUIRE_OPENCL
// is set (CI sets it: a missing PoCL must fail there, not skip).
func openPoCL(t *testing.T) *opencl.Device {
	t.Helper()
	d, err := opencl.Open(opencl.Options{})
	if err != nil {
		requireOrSkip(t, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOpenBuildsKernels(t *testing.T) {
	d := openPoCL(t)
	info := d.Info()
	if info.Kind != device.OpenCL || info.Name == "" || info.Kernel != device.SourceDigest() {
		t.Fatalf("info %+v", info)
	}
	t.Logf("%s", info)
}

func TestBuildFailureCarriesLog(t *testing.T) {
	openPoCL(t) // skips without a device
	_, err := opencl.Open(opencl.Options{Source: "__kernel void broken(__global float *x) { x[0] = undefined_name; }"})
	var de *device.Error
	if !errors.As(err, &de) || de.Stage != device.StageBuild || !strings.Contains(de.Log, "undefined_name") {
		t.Fatalf("got %v, want a build error whose log names undefined_name", err)
	}
}

func TestBufferRoundTrip(t *testing.T) {
	d := openPoCL(t)
	b, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(b)
	src := []byte("0123456789abcdef")
	if err := d.Write(b, 8, src); err != nil {
		t.Fatal(err)
	}
	c, _ := d.Alloc(64)
	defer d.Free(c)
	if err := d.Copy(c, 0, b, 8, 16); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := d.Read(c, 0, got); err != nil || string(got) != string(src) {
		t.Fatalf("read %q, %v", got, err)
	}
	if err := d.Read(c, 60, got); err == nil {
		t.Fatal("a read past the end succeeded")
	}
}

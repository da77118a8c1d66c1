package opencl_test

import (
	"errors"
	"os"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
)

func requireOrSkip(t *testing.T, err error) {
	t.Helper()
	var de *device.Error
	if errors.As(err, &de) && de.Stage != device.StageLibrary && de.Stage != device.StageDevice {
		t.Fatal(err) // a device was there: the kernels must build
	}
	if os.Getenv("LFMQ_REQUIRE_OPENCL") != "" {
		t.Fatalf("LFMQ_REQUIRE_OPENCL is set but no OpenCL device opened: %v", err)
	}
	t.Skipf("no OpenCL device: %v", err)
}

package cuda_test

import (
	"errors"
	"os"
	"testing"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/cuda"
)

// TestOpenWithoutDriver: where libcuda.so.1 is missing (the developers'
// machines and CI), Open fails at the library stage, naming it; where a
// GPU is present it opens and JIT-loads every kernel.
func TestOpenWithoutDriver(t *testing.T) {
	d, err := cuda.Open(cuda.Options{})
	if err == nil {
		defer d.Close()
		t.Logf("a CUDA GPU is present: %s", d.Info())
		return
	}
	var de *device.Error
	if !errors.As(err, &de) || de.Kind != device.CUDA {
		t.Fatalf("got %v, want a *device.Error", err)
	}
	if de.Stage == device.StageLibrary && de.Library != cuda.Library {
		t.Errorf("library error names %q, want %q", de.Library, cuda.Library)
	}
	if _, statErr := os.Stat("/dev/nvidiactl"); statErr != nil && de.Stage != device.StageLibrary && de.Stage != device.StageDevice {
		t.Errorf("no GPU here, but the failure is at stage %s: %v", de.Stage, err)
	}
	t.Logf("%v", err)
}

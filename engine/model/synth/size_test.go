package synth

import (
	"fmt"
	"strings"
	"testing"
)

// TestRealShapeSize: RealShape's checkpoint is the "about 2.6 GB" that
// RealShape's comment, the README and the Makefile's bench target state,
// counted from the tensors the loader expects (BF16, expert biases F32)
// without writing them.
func TestRealShapeSize(t *testing.T) {
	cfg := parsedConfig(t, RealShape())
	var bytes int64
	for name, shape := range cfg.ExpectedTensors() {
		n := int64(2)
		if strings.HasSuffix(name, "expert_bias") {
			n = 4
		}
		for _, d := range shape {
			n *= d
		}
		bytes += n
	}
	t.Logf("RealShape: %d bytes of tensor data", bytes)
	if got := fmt.Sprintf("%.1f GB", float64(bytes)/1e9); got != "2.6 GB" {
		t.Errorf("RealShape's checkpoint holds %s (%d bytes), the docs say about 2.6 GB", got, bytes)
	}
}

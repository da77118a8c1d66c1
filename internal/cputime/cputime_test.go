package cputime

import (
	"runtime"
	"testing"
	"time"
)

// TestProcessAdvances: spinning for a while adds CPU time on platforms that
// measure it, and the reading never goes backwards.
func TestProcessAdvances(t *testing.T) {
	before := Process()
	x := 0.0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		for i := 0; i < 1000; i++ {
			x += float64(i)
		}
	}
	after := Process()
	runtime.KeepAlive(x)
	if after < before {
		t.Fatalf("CPU time went back: %v then %v", before, after)
	}
	if runtime.GOOS == "linux" && after-before < 10*time.Millisecond {
		t.Errorf("50 ms of spinning added only %v of CPU time", after-before)
	}
}

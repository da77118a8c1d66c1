//go:build !unix

package gptq

import "time"

// cpuTime is not measured here; the benchmarks then omit their CPU-time
// metric.
func cpuTime() time.Duration { return 0 }

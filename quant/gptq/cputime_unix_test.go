//go:build unix

package gptq

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) this process has used. The
// benchmarks report throughput per CPU second beside wall-clock throughput,
// because on a shared machine the wall clock also counts time the benchmark
// spent waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

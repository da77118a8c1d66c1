//go:build amd64 && !purego

package kernels

import (
	"strings"
	"testing"
	"time"

	"github.com/lfmq/lfmq/internal/cputime"
)

func init() { measurePeak = fmaPeakGFLOPS }

// BenchmarkFMAPeak reports the fp32 FMA peak of one core, GFLOP/s of
// independent register-only VFMADD231PS chains: "avx512" with 512-bit
// registers (skipped where the CPU has no AVX-512), "avx2" with 256-bit
// ones. BenchmarkMatMul's peak_frac divides a kernel's rate by the best
// of these measured in the same process. "avx512-f64-muladd" is the peak
// of float64 multiplies and adds kept apart (VMULPD then VADDPD), the form
// quant/gptq's solver kernels use to keep each product's rounding: on a
// core whose adds share the multiplies' two 512-bit ports it is a quarter
// of "avx512" (half the lanes, two instructions a product-sum), where a
// core with separate add pipes runs both at once.
//
//	go test -run '^$' -bench 'FMAPeak|MatMul/bfp4_b/2048x1792' ./engine/kernels
func BenchmarkFMAPeak(b *testing.B) {
	const n = 1 << 16 // iterations per op: ~0.5 ms, far above the call cost
	for _, c := range []struct {
		name  string
		run   func(int)
		flops float64
	}{{"avx512", fmaPeakZ, 512}, {"avx2", fmaPeakY, 192}, {"avx512-f64-muladd", mulAddPeakZ, 128}} {
		b.Run(c.name, func(b *testing.B) {
			if !useSIMD || (strings.HasPrefix(c.name, "avx512") && !useAVX512) {
				b.Skip("not on this CPU")
			}
			cpu := cputime.Process()
			for b.Loop() {
				c.run(n)
			}
			reportFlops(b, c.flops*n, cputime.Process()-cpu)
		})
	}
}

// fmaPeakGFLOPS measures the FMA peak of one core in GFLOP/s per CPU
// second (per second where the CPU time is unknown): the best of several
// runs of about 2 ms of the widest probe the CPU has (the best, because
// other processes and interrupts can only slow a run down), or 0 without
// the SIMD kernels.
func fmaPeakGFLOPS() float64 {
	if !useSIMD {
		return 0
	}
	run, flops := fmaPeakY, 192.0
	if useAVX512 {
		run, flops = fmaPeakZ, 512
	}
	const n = 1 << 18
	best := 0.0
	for range 16 {
		t0, c0 := time.Now(), cputime.Process()
		run(n)
		secs := time.Since(t0).Seconds()
		if c := cputime.Process() - c0; c > 0 {
			secs = c.Seconds()
		}
		best = max(best, flops*n/secs/1e9)
	}
	return best
}

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/lfmq/lfmq/internal/cputime"
)

// measurePeak, where the build has SIMD kernels, measures one core's fp32
// FMA peak in GFLOP/s (bench_amd64_test.go); nil elsewhere.
var measurePeak func() float64

// peakGFLOPS is measurePeak's figure, measured once per process (0 when
// unknown).
var peakGFLOPS = sync.OnceValue(func() float64 {
	if measurePeak == nil {
		return 0
	}
	return measurePeak()
})

// reportFlops reports GFLOP/s of wall-clock time and, where the process CPU
// time is known, "cpuGFLOP/s": flops per second of CPU time used, which is
// the steadier figure on a loaded machine (for one goroutine it is the
// single-core rate; for a Pool it is the rate per busy core).
func reportFlops(b *testing.B, flopsPerOp float64, cpu time.Duration) {
	total := flopsPerOp * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu > 0 {
		b.ReportMetric(total/cpu.Seconds()/1e9, "cpuGFLOP/s")
	}
}

// benchShapes are LFM2-8B-A1B products, [out, in]: an expert's down
// projection w2 (its w1/w3 are the transpose shape), attention-sized
// 2048×2048, and the short-conv in_proj 3H×H; and a 512×1024 matrix whose
// weights (at most 1.1 MB) stay in the core's L2 cache, so that its
// figures are the kernels' own speed rather than the memory's.
var benchShapes = []shape{{2048, 1792}, {2048, 2048}, {6144, 2048}, {512, 1024}}

// BenchmarkMatMul runs every format, shape and batch width on one goroutine,
// the SIMD kernels ("simd") against the Go kernels they are checked against
// ("go") and, where the CPU has AVX-512, against the AVX2 kernels alone
// ("avx2", the baseline of the AVX-512 kernels), and reports GFLOP/s
// (2·Out·In·batch per product), weight bytes per second and, where the
// SIMD kernels are built, peak_frac: the rate (per CPU second where that
// is known) as a fraction of the core's fp32 FMA peak measured in the same
// process with the widest registers the CPU has (BenchmarkFMAPeak reports
// that peak on its own).
//
//	go test -run '^$' -bench 'FMAPeak|MatMul' ./engine/kernels
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, f := range []Format{BF16, BFP8, BFP4} {
		for _, s := range benchShapes {
			m := benchMatrix(b, rng, f, s.out, s.in)
			// 16 and 24: the rows an expert of a 128-token prefill sees.
			for _, batch := range []int{1, 2, 4, 8, 16, 24, 64} {
				x := randVec(rng, batch*s.in)
				y := make([]float32, batch*s.out)
				for _, impl := range []string{"simd", "avx2", "go"} {
					name := fmt.Sprintf("%s/%dx%d/b%d/%s", f, s.out, s.in, batch, impl)
					b.Run(name, func(b *testing.B) {
						if impl != "go" && !useSIMD {
							b.Skip("no SIMD kernels")
						}
						if impl == "avx2" && !useAVX512 {
							b.Skip("simd is avx2 here")
						}
						saved, saved512 := useSIMD, useAVX512
						useSIMD, useAVX512 = impl != "go", impl == "simd" && useAVX512
						defer func() { useSIMD, useAVX512 = saved, saved512 }()
						b.SetBytes(int64(m.WeightBytes()))
						peakGFLOPS() // measured once, before any timing
						cpu := cputime.Process()
						for b.Loop() {
							m.MatMul(y, x, batch)
						}
						cpu = cputime.Process() - cpu
						flops := 2 * float64(s.out) * float64(s.in) * float64(batch)
						reportFlops(b, flops, cpu)
						reportPeakFrac(b, flops, cpu)
					})
				}
			}
		}
	}
}

// reportPeakFrac reports peak_frac, the benchmark's flop rate (per CPU
// second where the CPU time is known, else per second) over peakGFLOPS,
// where the peak is known.
func reportPeakFrac(b *testing.B, flopsPerOp float64, cpu time.Duration) {
	peak := peakGFLOPS()
	if peak <= 0 {
		return
	}
	secs := b.Elapsed().Seconds()
	if cpu > 0 {
		secs = cpu.Seconds()
	}
	b.ReportMetric(flopsPerOp*float64(b.N)/secs/1e9/peak, "peak_frac")
}

// benchMatrix returns a matrix of format f with Gaussian weights of a real
// model's scale (N(0, 1/in)), packed for BFP, so that the BFP kernels see
// the exponents of real checkpoints and take the routes they take there
// (randTiles' extreme exponents would keep them on their general route).
func benchMatrix(b *testing.B, rng *rand.Rand, f Format, out, in int) *Matrix {
	b.Helper()
	if f != BFP8 && f != BFP4 {
		return randMatrix(b, rng, f, out, in)
	}
	w := randVec(rng, out*in)
	scale := float32(1 / math.Sqrt(float64(in)))
	for i := range w {
		w[i] *= scale
	}
	m, err := NewBFP(f, out, in, packBFP(f, out, in, w))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkMatVecPool measures the parallel split on the conv in_proj shape.
func BenchmarkMatVecPool(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, f := range []Format{BF16, BFP8, BFP4} {
		m := benchMatrix(b, rng, f, 6144, 2048)
		x := randVec(rng, 2048)
		y := make([]float32, 6144)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads%d", f, threads), func(b *testing.B) {
				p := NewPool(threads)
				defer p.Close()
				b.SetBytes(int64(m.WeightBytes()))
				cpu := cputime.Process()
				for b.Loop() {
					p.MatVec(m, y, x)
				}
				reportFlops(b, 2*6144*2048, cputime.Process()-cpu)
			})
		}
	}
}

// BenchmarkMatVecCold streams one batch row (b1; and four, b4, the
// serving batch kernels' case) through copies of a matrix cycled over
// ≥ 512 MB, far more than the caches hold, on a Pool of 1 and 2 threads,
// and reads the same bytes with ReadXor split the same way in the same
// run: weightGB/s is the kernels' rate (weight bytes per product, whatever
// the batch), readGB/s the probe's, bw_frac their ratio; "avx2" is the
// AVX2 kernels alone on a CPU with AVX-512. The shapes are the LM head's
// (65536×2048) and an expert's w1 and w2 (1792×2048, 2048×1792), whose
// products are short enough that starting and ending one shows.
func BenchmarkMatVecCold(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, c := range []struct {
		f       Format
		out, in int
	}{{BFP8, 65536, 2048}, {BFP4, 65536, 2048}, {BF16, 65536, 2048}, {BFP4, 1792, 2048}, {BFP4, 2048, 1792}, {BFP8, 2048, 2048}} {
		f, out, in := c.f, c.out, c.in
		base := benchMatrix(b, rng, f, out, in)
		var ms []*Matrix
		for total := 0; total < 512<<20; total += base.WeightBytes() {
			c := *base
			c.BFP = append([]byte(nil), base.BFP...)
			c.BF16 = append([]uint16(nil), base.BF16...)
			ms = append(ms, &c)
		}
		x := randVec(rng, 4*in)
		y := make([]float32, 4*out)
		for _, cfg := range []struct {
			impl           string
			threads, batch int
		}{{"simd", 1, 1}, {"simd", 2, 1}, {"avx2", 1, 1}, {"avx2", 2, 1}, {"simd", 1, 4}} {
			impl, threads, batch := cfg.impl, cfg.threads, cfg.batch
			b.Run(fmt.Sprintf("%s/%dx%d/%s/threads%d/b%d", f, out, in, impl, threads, batch), func(b *testing.B) {
				if !useSIMD {
					b.Skip("no SIMD kernels")
				}
				if impl == "avx2" && !useAVX512 {
					b.Skip("simd is avx2 here")
				}
				saved := useAVX512
				useAVX512 = impl == "simd" && useAVX512
				defer func() { useAVX512 = saved }()
				p := NewPool(threads)
				defer p.Close()
				var kern, probe time.Duration
				var sink uint64
				for i := 0; b.Loop(); i++ {
					m := ms[i%len(ms)]
					t0 := time.Now()
					p.MatMul(m, y, x, batch)
					kern += time.Since(t0)
					b.StopTimer()
					// The probe reads another copy, half a cycle away: the
					// one just multiplied may still be in the caches.
					m = ms[(i+len(ms)/2)%len(ms)]
					var raw []byte
					if m.BFP != nil {
						raw = m.BFP
					} else {
						raw = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(m.BF16))), 2*len(m.BF16))
					}
					t0 = time.Now()
					part := len(raw) / threads &^ 127
					var read atomic.Uint64 // keeps the reads from being optimised away
					p.Run(threads, func(lo, hi int) {
						for t := lo; t < hi; t++ {
							read.Add(ReadXor(raw[t*part : (t+1)*part]))
						}
					})
					probe += time.Since(t0)
					sink ^= read.Load()
					b.StartTimer()
				}
				_ = sink
				wb := float64(base.WeightBytes()) * float64(b.N)
				b.ReportMetric(wb/kern.Seconds()/1e9, "weightGB/s")
				b.ReportMetric(wb/probe.Seconds()/1e9, "readGB/s")
				b.ReportMetric(probe.Seconds()/kern.Seconds(), "bw_frac")
			})
		}
	}
}

// BenchmarkCausalConv is one decode step of a convolution layer of
// LFM3-1.7B's width (one token, 2,048 channels, K = 7) on the calling
// goroutine ("serial", kernels.CausalConv) and split over a Pool of 2
// (Pool.CausalConv, the forward pass's): compare the two in one run.
func BenchmarkCausalConv(b *testing.B) {
	const T, H, K = 1, 2048, 7
	rng := rand.New(rand.NewPCG(37, 38))
	u, w, bias := randVec(rng, T*H), randVec(rng, H*K), randVec(rng, H)
	state, v := randVec(rng, H*(K-1)), make([]float32, T*H)
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			CausalConv(v, u, state, w, bias, T, H, K)
		}
	})
	b.Run("pool2", func(b *testing.B) {
		p := NewPool(2)
		defer p.Close()
		for b.Loop() {
			p.CausalConv(v, u, state, w, bias, T, H, K)
		}
	})
}

// BenchmarkSwiGLU runs the feed-forward activation over an expert's rows
// of a 128-token prefill (16 rows of 1792), on the AVX-512 kernel where
// the CPU has it ("simd") and on the Go loop ("go").
func BenchmarkSwiGLU(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	const n = 16 * 1792
	gate, up, y := randVec(rng, n), randVec(rng, n), make([]float32, n)
	for _, impl := range []string{"simd", "go"} {
		b.Run(impl, func(b *testing.B) {
			if impl == "simd" && !useAVX512 {
				b.Skip("no AVX-512 kernel here")
			}
			saved := useAVX512
			useAVX512 = impl == "simd"
			defer func() { useAVX512 = saved }()
			b.SetBytes(4 * n)
			for b.Loop() {
				SwiGLU(y, gate, up)
			}
		})
	}
}

// BenchmarkPoolDispatch measures how late the workers join a parallel
// region, as a forward pass runs them: a serial step of about 20 µs
// ("gap20us", norms and residual adds) or 150 µs ("gap150us", a
// convolution layer of LFM3-1.7B's width on one goroutine), then a region
// of 4·threads ranges of about 40 µs of arithmetic each, again and again.
// "park" is a Pool whose idle workers park at once on the channel, so the
// scheduler wakes them for every region; "spin100us" one whose workers
// poll for 100 µs first (spinWait until 2026-12-07), which the longer gap
// outlasts; "spin" one that polls for spinWait. ns/op is one serial step
// and one region; the region alone would take threads times less than on
// one thread if every worker started at once. join_us is how long into a
// region all its goroutines first run at once: how late the last worker
// joins. Compare them in the same run.
func BenchmarkPoolDispatch(b *testing.B) {
	counts := []int{2}
	if n := runtime.GOMAXPROCS(0); n > 2 {
		counts = append(counts, n)
	}
	for _, threads := range counts {
		for _, gap := range []struct {
			name string
			work int // busyWork's n: about 2.5n ns
		}{{"gap20us", 8000}, {"gap150us", 60000}} {
			for _, mode := range []struct {
				name string
				spin time.Duration
			}{{"park", 0}, {"spin100us", 100 * time.Microsecond}, {"spin", spinWait}} {
				b.Run(fmt.Sprintf("threads%d/%s/%s", threads, gap.name, mode.name), func(b *testing.B) {
					p := newPoolSpin(threads, mode.spin)
					defer p.Close()
					sums := make([]float32, 4*threads)
					var serial float32
					// join is how long after a region starts all its goroutines
					// first run ranges at once (the region's length if never).
					var join time.Duration
					var active atomic.Int64
					var joined atomic.Bool
					for b.Loop() {
						serial = busyWork(serial, gap.work)
						joined.Store(false)
						start := time.Now()
						var at time.Duration
						p.Run(len(sums), func(lo, hi int) {
							if active.Add(1) == int64(threads) && !joined.Swap(true) {
								at = time.Since(start)
							}
							for i := lo; i < hi; i++ {
								sums[i] = busyWork(sums[i], 16000)
							}
							active.Add(-1)
						})
						if !joined.Load() {
							at = time.Since(start)
						}
						join += at
					}
					b.ReportMetric(float64(join.Microseconds())/float64(b.N), "join_us")
					sink.Store(math.Float32bits(serial + sums[0]))
				})
			}
		}
	}
}

// busyWork is n dependent multiplies and adds on v, about 2.5n ns on the
// development VM: work the compiler cannot remove.
func busyWork(v float32, n int) float32 {
	for range n {
		v = v*0.999 + 1
	}
	return v
}

// sink keeps benchmark results alive.
var sink atomic.Uint32

// BenchmarkMatrixRow is a decode step's embedding lookup: Row of a random
// row of a BFP8 matrix of 65,536 rows of 2,048, 142 MB, so that the row
// comes from memory.
func BenchmarkMatrixRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	m := benchMatrix(b, rng, BFP8, 65536, 2048)
	dst := make([]float32, 2048)
	for b.Loop() {
		m.Row(rng.IntN(65536), dst)
	}
}

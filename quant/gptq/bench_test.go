package gptq

import (
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// solveShape is one expert matrix solve at the LFM2-8B-A1B shapes:
// w1/w3 (K = hidden 2048, out = 1792) and w2 (K = 1792, out = 2048).
var solveShapes = []struct {
	name   string
	k, out int
}{
	{"w13_K2048", 2048, 1792},
	{"w2_K1792", 1792, 2048},
}

// BenchmarkSolveStages times each stage of one expert matrix solve at real
// shapes, the reference (original) kernels next to the current ones in the
// same run, and reports GFLOP/s with the FLOP counts quant's layer report
// uses: factor 2K³/3, row loop K²·out, Losses K²·out per Q. GFLOP/cpu-s
// divides by the CPU time the process used instead of the wall clock, which
// on a shared machine also counts waiting for a core; the stages run on
// one goroutine, so it is the rate per core.
func BenchmarkSolveStages(b *testing.B) {
	for _, s := range solveShapes {
		r := rand.New(rand.NewPCG(12, uint64(s.k)))
		h := lowRankHessian(r, s.k, 512, []int{7})
		w := randomWeight(r, s.out, s.k)
		k := float64(s.k)
		f, err := NewFactor(h, s.k, DefaultOptions(0.01))
		if err != nil {
			b.Fatal(err)
		}
		res, err := f.Quantize(bfp.BFP4, w, s.out)
		if err != nil {
			b.Fatal(err)
		}
		hp := make([]float64, len(h))
		u := make([]float64, len(h))
		stages := []struct {
			name string
			flop float64
			run  func(ref bool)
		}{
			{"factor", 2 * k * k * k / 3, func(ref bool) {
				copy(hp, h)
				for i := range s.k {
					hp[i*s.k+i] += f.lambda
				}
				if ref {
					factorInverseRef(hp, u, s.k)
				} else {
					factorInverse(hp, u, s.k)
				}
			}},
			{"quantize", k * k * float64(s.out), func(ref bool) {
				var err error
				if ref {
					_, err = quantizeRef(f, bfp.BFP4, w, s.out)
				} else {
					_, err = f.Quantize(bfp.BFP4, w, s.out)
				}
				if err != nil {
					b.Fatal(err)
				}
			}},
			{"losses3", 3 * k * k * float64(s.out), func(ref bool) {
				qs := [][]float32{res.Q, res.Q, nil}
				if ref {
					lossesRef(h, w, qs, s.out, s.k)
				} else if _, err := Losses(h, w, qs, s.out, s.k); err != nil {
					b.Fatal(err)
				}
			}},
		}
		for _, st := range stages {
			for _, impl := range []string{"ref", "new"} {
				b.Run(s.name+"/"+st.name+"/"+impl, func(b *testing.B) {
					c0 := cpuTime()
					for b.Loop() {
						st.run(impl == "ref")
					}
					b.ReportMetric(st.flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					if c := cpuTime() - c0; c > 0 {
						b.ReportMetric(st.flop*float64(b.N)/c.Seconds()/1e9, "GFLOP/cpu-s")
					}
				})
			}
		}
	}
}

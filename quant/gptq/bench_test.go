package gptq

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/internal/cputime"
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
					factorInverse(hp, u, s.k, 1)
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
					c0 := cputime.Process()
					for b.Loop() {
						st.run(impl == "ref")
					}
					b.ReportMetric(st.flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					if c := cputime.Process() - c0; c > 0 {
						b.ReportMetric(st.flop*float64(b.N)/c.Seconds()/1e9, "GFLOP/cpu-s")
					}
				})
			}
		}
	}
}

// BenchmarkSolveExpert is one LFM2-8B-A1B expert's whole solve as package
// quant runs it: the w1/w3 factor, both row loops and both matrices' three
// losses, then the same for w2; reference kernels and current ones in the
// same run. GFLOP counts as quant's SolveFLOP, so GFLOP/cpu-s is the
// figure the layer report's solve throughput divides per core. "threads=N"
// is the current kernels with the solve split over N = GOMAXPROCS
// goroutines (Options.Threads), as package quant runs a solve when fewer
// solves than workers fit its memory budget.
func BenchmarkSolveExpert(b *testing.B) {
	type prob struct {
		k, out int
		h      []float64
		ws     [][]float32
	}
	var probs []prob
	var flop float64
	for i, s := range solveShapes {
		r := rand.New(rand.NewPCG(13, uint64(s.k)))
		p := prob{k: s.k, out: s.out, h: lowRankHessian(r, s.k, 512, nil)}
		for range 2 - i { // w1 and w3 share a Hessian, w2 is alone
			p.ws = append(p.ws, randomWeight(r, s.out, s.k))
		}
		k := float64(s.k)
		flop += 2*k*k*k/3 + float64(len(p.ws))*4*k*k*float64(s.out)
		probs = append(probs, p)
	}
	impls := []string{"ref", "new"}
	if n := runtime.GOMAXPROCS(0); n > 1 {
		impls = append(impls, fmt.Sprintf("threads=%d", n))
	}
	for _, impl := range impls {
		threads := 1
		if impl != "ref" && impl != "new" {
			threads = runtime.GOMAXPROCS(0)
		}
		b.Run(impl, func(b *testing.B) {
			c0 := cputime.Process()
			for b.Loop() {
				for _, p := range probs {
					solveOnce(b, p.h, p.ws, p.k, p.out, impl == "ref", threads)
				}
			}
			b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			if c := cputime.Process() - c0; c > 0 {
				b.ReportMetric(flop*float64(b.N)/c.Seconds()/1e9, "GFLOP/cpu-s")
			}
		})
	}
}

// solveOnce is quant's per-Hessian solve: NewFactor, then for each weight
// Quantize and the losses of the GPTQ result, RTN and zero; the current
// kernels on threads goroutines.
func solveOnce(b *testing.B, h []float64, ws [][]float32, k, out int, ref bool, threads int) {
	b.Helper()
	newFactor := NewFactor
	if ref {
		newFactor = newFactorRef
	}
	opts := DefaultOptions(0.01)
	opts.Threads = threads
	f, err := newFactor(h, k, opts)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range ws {
		var res *Result
		if ref {
			res, err = quantizeRef(f, bfp.BFP4, w, out)
		} else {
			res, err = f.Quantize(bfp.BFP4, w, out)
		}
		if err != nil {
			b.Fatal(err)
		}
		rtnQ, err := bfp.UnpackMatrix(bfp.BFP4, mustPackB(b, w, out, k), out, k)
		if err != nil {
			b.Fatal(err)
		}
		qs := [][]float32{res.Q, rtnQ, nil}
		if ref {
			_, err = lossesRef(h, w, qs, out, k)
		} else {
			_, err = LossesThreads(h, w, qs, out, k, threads)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func mustPackB(b *testing.B, w []float32, out, in int) []byte {
	b.Helper()
	p, err := bfp.PackMatrix(bfp.BFP4, w, out, in)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkGram8 times Losses' inner loop: the Gram products of a block of
// lossBlockGroups groups of four rows with one pair of groups (eight rows)
// at the expert shapes' lengths, so that the block streams from the cache
// as it does in Losses. Each kernel runs in the same run: the Go one, the
// AVX2 one, the AVX-512 one a group per call (avx512), two groups per
// call (avx512x2) and two groups against two pairs per call (avx512x4,
// half as many calls for the same products), where this CPU has them. GFLOP/s counts a multiply and
// an add per product.
func BenchmarkGram8(b *testing.B) {
	for _, n := range []int{64, 1792, 2048} {
		r := rand.New(rand.NewPCG(5, uint64(n)))
		g := make([]float64, lossBlockGroups*4*n)
		p := make([]float64, 8*n)
		for i := range g {
			g[i] = r.NormFloat64()
		}
		for i := range p {
			p[i] = r.NormFloat64()
		}
		var x [64]float64
		var x128 [128]float64
		x32 := (*[32]float64)(x[:32])
		p2 := append(append([]float64(nil), p...), p...)
		group := func(i int) []float64 { return g[4*n*i : 4*n*(i+1)] }
		kernels := []struct {
			name string
			ok   bool
			run  func()
		}{
			{"go", true, func() {
				for i := range lossBlockGroups {
					gram8Go(x32, group(i), p, n)
				}
			}},
			{"avx2", useAVX, func() {
				for i := range lossBlockGroups {
					gram8AVX(x32, group(i), p, n)
				}
			}},
			{"avx512", useAVX512, func() {
				for i := range lossBlockGroups {
					gram8AVX512(x32, group(i), p, n)
				}
			}},
			{"avx512x2", useAVX512, func() {
				for i := 0; i < lossBlockGroups; i += 2 {
					gram16AVX512(&x, g[4*n*i:4*n*(i+2)], p, n)
				}
			}},
			// Two pairs per call, half the calls per pair.
			{"avx512x4", useAVX512, func() {
				for i := 0; i < lossBlockGroups; i += 4 {
					gram32AVX512(&x128, g[4*n*i:4*n*(i+2)], p2, n)
				}
			}},
		}
		flop := float64(2 * lossBlockGroups * 4 * 8 * n)
		for _, k := range kernels {
			if !k.ok {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/%s", n, k.name), func(b *testing.B) {
				for b.Loop() {
					k.run()
				}
				b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkUpdate times the deferred update's kernel at the solver's
// shapes (a block of bs = 128 rows of errors, out = 1792 or 2048 columns):
// one call per group of four later rows, over 32 groups, so that the rows
// of W stream in while the block's errors stay in the cache, as in
// deferredUpdate. The Go, AVX2 and AVX-512 kernels run in the same run,
// where this CPU has them. GFLOP/s counts a multiply and a subtraction per
// element and block row.
func BenchmarkUpdate(b *testing.B) {
	const bs, groups = 128, 32
	for _, out := range []int{1792, 2048} {
		r := rand.New(rand.NewPCG(6, uint64(out)))
		c := make([]float64, 4*groups*out)
		up := make([]float64, 4*bs)
		ep := make([]float64, bs*out)
		for _, v := range [][]float64{c, up, ep} {
			for i := range v {
				v[i] = r.NormFloat64()
			}
		}
		flop := float64(2 * groups * 4 * bs * out)
		for _, k := range updateKernels() {
			if !k.ok {
				continue
			}
			b.Run(fmt.Sprintf("out=%d/%s", out, k.name), func(b *testing.B) {
				for b.Loop() {
					for g := range groups {
						k.run(c[4*g*out:], out, up, ep, bs, out)
					}
				}
				b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkDotLanes4 times the factor's kernel at lengths of a row of the
// factor early, midway and late at K = 2048, with the two ways the factor
// calls it: four rows against one (cholesky, the rows below a panel) and
// one row at four shifts against four columns (inverse, L⁻¹). The Go and
// AVX2 kernels run in the same run, where this CPU has the latter.
// GFLOP/s counts a multiply and an add per product.
func BenchmarkDotLanes4(b *testing.B) {
	const k = 2048
	r := rand.New(rand.NewPCG(7, k))
	l := make([]float64, 8*k)
	for i := range l {
		l[i] = r.NormFloat64()
	}
	kernels := []struct {
		name string
		ok   bool
		run  func(acc *[16]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int)
	}{
		{"go", true, dotLanes4Go},
		{"avx2", useAVX, dotLanes4AVX},
	}
	for _, quads := range []int{16, 128, 511} {
		for _, pat := range []string{"cholesky", "inverse"} {
			var ao, bo [4]int
			for c := range 4 {
				if pat == "cholesky" {
					ao[c], bo[c] = c*k, 4*k
				} else {
					ao[c], bo[c] = 4*k+c, c*k+c
				}
			}
			var acc [16]float64
			flop := float64(2 * 16 * quads)
			for _, kn := range kernels {
				if !kn.ok {
					continue
				}
				b.Run(fmt.Sprintf("quads=%d/%s/%s", quads, pat, kn.name), func(b *testing.B) {
					for b.Loop() {
						kn.run(&acc, l, &ao, l, &bo, quads)
					}
					b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkDeferredUpdate times one block's deferred update at the expert
// shapes on one goroutine, the first block of bs = 128 rows against the
// rest, with the AVX2 and the AVX-512 kernel in the same run where this
// CPU has them. GFLOP/s counts a multiply and a subtraction per element
// and block row.
func BenchmarkDeferredUpdate(b *testing.B) {
	const bs = 128
	prev := useAVX512
	defer func() { useAVX512 = prev }()
	for _, s := range solveShapes {
		r := rand.New(rand.NewPCG(8, uint64(s.k)))
		wp := make([]float64, s.k*s.out)
		u := make([]float64, s.k*s.k)
		errs := make([]float64, bs*s.out)
		for _, v := range [][]float64{wp, u, errs} {
			for i := range v {
				v[i] = r.NormFloat64()
			}
		}
		flop := float64(2 * (s.k - bs) * bs * s.out)
		for _, kn := range []struct {
			name string
			ok   bool
		}{{"avx2", useAVX}, {"avx512", prev}} {
			if !kn.ok {
				continue
			}
			b.Run(s.name+"/"+kn.name, func(b *testing.B) {
				useAVX512 = kn.name == "avx512"
				for b.Loop() {
					deferredUpdate(wp, u, errs, s.k, s.out, 0, bs, 1)
				}
				b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

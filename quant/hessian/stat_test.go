package hessian

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/lfmq/lfmq/internal/cputime"
)

// TestStatMatchesDirectSum compares the chunked, blocked accumulation with
// a direct float64 sum, for dimensions that hit every tail of the 4×4
// blocks and row counts that hit every tail of the chunks.
func TestStatMatchesDirectSum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 3, 4, 5, 17, 64} {
		for _, n := range []int{0, 1, ChunkRows - 1, ChunkRows, 3*ChunkRows + 5} {
			st := NewStat(k)
			want := make([]float64, k*k)
			var w1, w2 float64
			for range n {
				x := make([]float32, k)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				w := r.Float64()
				if err := st.Add(x, w); err != nil {
					t.Fatal(err)
				}
				for i := range k {
					for j := range k {
						want[i*k+j] += w * float64(x[i]) * float64(x[j])
					}
				}
				w1 += w
				w2 += w * w
			}
			if err := st.Finish(); err != nil {
				t.Fatal(err)
			}
			s := st.S()
			for i := range k {
				for j := range k {
					if s[i*k+j] != s[j*k+i] {
						t.Fatalf("k=%d n=%d: S not symmetric at (%d, %d)", k, n, i, j)
					}
					if d := math.Abs(s[i*k+j] - want[i*k+j]); d > 1e-12*(1+math.Abs(want[i*k+j])) {
						t.Fatalf("k=%d n=%d: S[%d][%d] = %v, direct sum %v", k, n, i, j, s[i*k+j], want[i*k+j])
					}
				}
			}
			if st.Tokens() != n || math.Abs(st.Weight()-w1) > 1e-12*w1 || math.Abs(st.Weight2()-w2) > 1e-12*w2 {
				t.Fatalf("k=%d n=%d: tokens %d, weights %v %v; want %v %v", k, n, st.Tokens(), st.Weight(), st.Weight2(), w1, w2)
			}
		}
	}
}

// TestStatChunkSums: S is, bit for bit, the chunked sum docs/gptq.md §2
// fixes: per chunk of ChunkRows rows and per entry (i ≤ j), Σ_t
// (ω_t·x_t[i])·x_t[j] in row order with each product rounded, the chunk
// sums added to S in chunk order; with the AVX2 and AVX-512 kernels and
// with the Go one, for row counts that fill a Stat's pending rows more
// than once, on one goroutine and on three (SetThreads), and for a K past
// one tile of S whose last blocks overhang its edges.
func TestStatChunkSums(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, kern := range []struct {
		name        string
		avx, avx512 bool
	}{{"go", false, false}, {"avx2", true, false}, {"avx512", true, true}} {
		if kern.avx && !useAVX || kern.avx512 && !useAVX512 {
			continue
		}
		savedAVX, savedAVX512 := useAVX, useAVX512
		useAVX, useAVX512 = kern.avx, kern.avx512
		for _, k := range []int{1, 5, 8, 13, 16, 36, 47, 263} {
			for _, n := range []int{1, ChunkRows, 2*ChunkRows + 9, 2*maxChunks*ChunkRows + ChunkRows + 7} {
				if k > 64 && n < ChunkRows {
					continue // the small row counts gain nothing at this width
				}
				rows := make([][]float32, n)
				ws := make([]float64, n)
				st := NewStat(k)
				// Odd row counts flush on three goroutines: the same bits.
				st.SetThreads(1 + 2*(n%2))
				for q := range rows {
					rows[q] = make([]float32, k)
					for i := range rows[q] {
						rows[q][i] = float32(r.NormFloat64())
					}
					ws[q] = r.Float64()
					if err := st.Add(rows[q], ws[q]); err != nil {
						t.Fatal(err)
					}
				}
				if err := st.Finish(); err != nil {
					t.Fatal(err)
				}
				want := make([]float64, k*k)
				for c0 := 0; c0 < n; c0 += ChunkRows {
					for i := range k {
						for j := i; j < k; j++ {
							var c float64
							for q := c0; q < min(n, c0+ChunkRows); q++ {
								c += float64(float64(ws[q]*float64(rows[q][i])) * float64(rows[q][j]))
							}
							want[i*k+j] += c
						}
					}
				}
				for i := range k {
					for j := i; j < k; j++ {
						if got := st.S()[i*k+j]; math.Float64bits(got) != math.Float64bits(want[i*k+j]) {
							t.Fatalf("%s, k=%d n=%d: S[%d][%d] = %v, want %v", kern.name, k, n, i, j, got, want[i*k+j])
						}
					}
				}
			}
		}
		useAVX, useAVX512 = savedAVX, savedAVX512
	}
}

// kernelChoices are the kernels a test or benchmark runs: the Go one
// everywhere, the AVX2 and AVX-512 ones where the CPU has them.
var kernelChoices = []struct {
	name        string
	avx, avx512 bool
}{{"go", false, false}, {"avx2", true, false}, {"avx512", true, true}}

// withKernel runs f with the kernel k selected (skipping it where the CPU
// lacks it) and restores the CPU's choice.
func withKernel(t testing.TB, name string, avx, avx512 bool, f func()) {
	if avx && !useAVX || avx512 && !useAVX512 {
		t.Logf("%s: not on this CPU", name)
		return
	}
	savedAVX, savedAVX512 := useAVX, useAVX512
	useAVX, useAVX512 = avx, avx512
	defer func() { useAVX, useAVX512 = savedAVX, savedAVX512 }()
	f()
}

// oddValue draws a float from a mix that reaches the corners of float64
// arithmetic: ±0, subnormals, values whose products underflow to
// subnormals or overflow to ±Inf, and ordinary ones.
func oddValue(r *rand.Rand) float64 {
	v := r.NormFloat64()
	switch r.IntN(8) {
	case 0:
		return math.Copysign(0, v)
	case 1:
		return v * math.SmallestNonzeroFloat64 * float64(1+r.IntN(1000))
	case 2:
		return v * 1e-160
	case 3:
		return v * 1e160
	}
	return v
}

// sameFloat reports whether a and b are the same float64: the same bits,
// or both NaN (a NaN's payload depends on the order of an add's operands,
// which no kernel fixes; Finish rejects any NaN in S).
func sameFloat(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b)
}

// TestBlockSumKernels: each SIMD kernel gives blockSumGo's bits, on values
// with signed zeros, subnormals, underflows and overflows, for one and
// several chunks of full and short lengths, into blocks of S whose rows
// are further apart than the block is wide; and the packing kernels give
// their Go references' bits on float32 values with subnormals.
func TestBlockSumKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, kern := range kernelChoices[1:] {
		cols := 8
		if kern.avx512 {
			cols = 16
		}
		withKernel(t, kern.name, kern.avx, kern.avx512, func() {
			for _, c := range []struct{ chunks, n int }{{1, 1}, {1, 7}, {1, ChunkRows}, {3, ChunkRows}, {2, 5}} {
				a := make([]float64, c.chunks*c.n*microRows)
				y := make([]float64, c.chunks*c.n*cols)
				for i := range a {
					a[i] = oddValue(r)
				}
				for i := range y {
					y[i] = oddValue(r)
				}
				ss := cols + 3
				got := make([]float64, microRows*ss)
				for i := range got {
					got[i] = oddValue(r)
				}
				want := append([]float64(nil), got...)
				blockSum(got, ss, a, y, cols, c.chunks, c.n)
				blockSumGo(want, ss, a, y, cols, c.chunks, c.n)
				for i := range got {
					if !sameFloat(got[i], want[i]) {
						t.Fatalf("%s, %d chunks of %d rows: s[%d] = %v (%#x), Go kernel %v (%#x)", kern.name, c.chunks, c.n, i, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
					}
				}
			}
			for _, n := range []int{1, 3, groupRows} {
				for _, shape := range []struct{ panels, cols int }{{1, 8}, {3, 8}, {1, 16}, {2, 16}} {
					xs := shape.panels*shape.cols + 5
					x := make([]float32, n*xs)
					for i := range x {
						x[i] = float32(oddValue(r))
						if i%5 == 0 {
							x[i] = math.SmallestNonzeroFloat32 * float32(1+r.IntN(100))
						}
					}
					w := make([]float64, n)
					for i := range w {
						w[i] = math.Abs(oddValue(r))
					}
					got := make([]float64, n*shape.panels*shape.cols)
					want := make([]float64, len(got))
					widenPanelsAVX(&got[0], &x[0], xs, n, shape.panels, shape.cols)
					widenPanelsGo(want, x, xs, n, shape.panels, shape.cols)
					for i := range got {
						if !sameFloat(got[i], want[i]) {
							t.Fatalf("%s, %d rows of %d panels of %d: widened b[%d] = %v, Go %v", kern.name, n, shape.panels, shape.cols, i, got[i], want[i])
						}
					}
					got, want = got[:n*microRows], want[:n*microRows]
					weightRowsAVX(&got[0], &x[3], xs, &w[0], n)
					weightRowsGo(want, x[3:], xs, w)
					for i := range got {
						if !sameFloat(got[i], want[i]) {
							t.Fatalf("%s, %d rows: weighted a[%d] = %v, Go %v", kern.name, n, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestStatSameBits: a Stat gives the same S, bit for bit, on 1, 2 and 3
// goroutines and with one, three or maxChunks chunks of pending rows per
// pass over S, with every kernel, for widths that fit one block, one tile
// and several tiles with overhanging edges, on rows with signed zeros,
// subnormals and tiny and zero weights.
func TestStatSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, kern := range kernelChoices {
		withKernel(t, kern.name, kern.avx, kern.avx512, func() {
			for _, k := range []int{3, 37, 300} {
				n := 5*ChunkRows + 13
				rows := make([][]float32, n)
				ws := make([]float64, n)
				for q := range rows {
					rows[q] = make([]float32, k)
					for i := range rows[q] {
						switch r.IntN(10) {
						case 0:
							rows[q][i] = float32(math.Copysign(0, r.NormFloat64()))
						case 1:
							rows[q][i] = float32(r.NormFloat64()) * math.SmallestNonzeroFloat32 * 64
						default:
							rows[q][i] = float32(r.NormFloat64())
						}
					}
					switch q % 7 {
					case 0:
						ws[q] = 0
					case 1:
						ws[q] = 1e-300 * r.Float64()
					default:
						ws[q] = r.Float64()
					}
				}
				var want []float64
				for _, chunks := range []int{1, 3, maxChunks} {
					for _, threads := range []int{1, 2, 3} {
						st := newStat(k, chunks)
						st.SetThreads(threads)
						for q := range rows {
							if err := st.Add(rows[q], ws[q]); err != nil {
								t.Fatal(err)
							}
						}
						if err := st.Finish(); err != nil {
							t.Fatal(err)
						}
						if want == nil {
							want = st.S()
							continue
						}
						for i, v := range st.S() {
							if math.Float64bits(v) != math.Float64bits(want[i]) {
								t.Fatalf("%s, K=%d, %d chunks per pass, %d threads: S[%d][%d] = %v, with one chunk per pass on one thread %v", kern.name, k, chunks, threads, i/k, i%k, v, want[i])
							}
						}
					}
				}
			}
		})
	}
}

func TestShrunk(t *testing.T) {
	mk := func(k int, rows [][]float32, w []float64) *Stat {
		st := NewStat(k)
		for i, x := range rows {
			if err := st.Add(x, w[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Finish(); err != nil {
			t.Fatal(err)
		}
		return st
	}
	a := mk(2, [][]float32{{1, 0}, {1, 1}}, []float64{0.5, 0.5})
	b := mk(2, [][]float32{{0, 2}}, []float64{1})
	empty := mk(2, nil, nil)
	pool, err := Pool([]*Stat{a, b, empty})
	if err != nil {
		t.Fatal(err)
	}
	if pool.Tokens() != 3 || pool.Weight() != 2 {
		t.Fatalf("pool tokens %d weight %v", pool.Tokens(), pool.Weight())
	}
	// H_a = 2·S_a/Ω_a = 2·[[1, .5], [.5, .5]]; n_eff(a) = 1²/0.5 = 2.
	// H_pool = 2·[[1, .5], [.5, 4.5]]/2.
	h, shrink, err := Shrunk(a, pool, 2)
	if err != nil {
		t.Fatal(err)
	}
	ha := []float64{2, 1, 1, 1}
	hp := []float64{1, 0.5, 0.5, 4.5}
	for i := range h {
		want := (2*ha[i] + 2*hp[i]) / 4
		if math.Abs(h[i]-want) > 1e-15 {
			t.Errorf("H[%d] = %v, want %v", i, h[i], want)
		}
	}
	if shrink != 0.5 {
		t.Errorf("shrink %v, want 0.5", shrink)
	}
	h, shrink, _ = Shrunk(empty, pool, 128)
	for i := range h {
		if h[i] != hp[i] || shrink != 0 {
			t.Fatalf("an expert without tokens gets %v (shrink %v), want the pool %v", h, shrink, hp)
		}
	}
	if _, _, err := Shrunk(a, empty, 1); err == nil {
		t.Error("shrinking toward an empty pool did not fail")
	}
}

func TestStatErrors(t *testing.T) {
	st := NewStat(2)
	var ie *InputError
	if err := st.Add([]float32{1}, 1); !errors.As(err, &ie) {
		t.Errorf("short row: %v", err)
	}
	if err := st.Add([]float32{1, 2}, math.NaN()); !errors.As(err, &ie) {
		t.Errorf("NaN weight: %v", err)
	}
	if err := st.Add([]float32{1, float32(math.Inf(1))}, 1); err != nil {
		t.Fatal(err)
	}
	var nf *NonFiniteError
	if err := st.Finish(); !errors.As(err, &nf) {
		t.Errorf("infinite input: Finish gave %v, want a NonFiniteError", err)
	}
	if err := st.Add([]float32{1, 2}, 1); !errors.As(err, &ie) {
		t.Errorf("Add after Finish: %v", err)
	}
}

// BenchmarkStat: rows added to a Stat of K = 128, 512 and 2048 (an 8B
// expert's w1/w3 input), each kernel in the same run (the Go one is the
// baseline of the SIMD ones).
func BenchmarkStat(b *testing.B) {
	for _, k := range []int{128, 512, 2048} {
		for _, kern := range []struct {
			name        string
			avx, avx512 bool
		}{{"go", false, false}, {"avx2", true, false}, {"avx512", true, true}} {
			b.Run(fmt.Sprintf("K=%d/%s", k, kern.name), func(b *testing.B) {
				if kern.avx && !useAVX || kern.avx512 && !useAVX512 {
					b.Skip("not on this CPU")
				}
				savedAVX, savedAVX512 := useAVX, useAVX512
				useAVX, useAVX512 = kern.avx, kern.avx512
				defer func() { useAVX, useAVX512 = savedAVX, savedAVX512 }()
				r := rand.New(rand.NewPCG(1, 1))
				x := make([]float32, k)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				st := NewStat(k)
				for b.Loop() {
					st.Add(x, 0.3)
				}
				// k(k+1)/2 multiply-adds per row (the kernels also compute
				// the lower half of the diagonal blocks; not counted).
				b.ReportMetric(float64(k*(k+1))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// statBenchRowsEnv, if set, is the number of rows BenchmarkStatAccumulate
// adds per operation, rounded up to whole passes over S (the defaults keep
// one operation near a second on two cores).
const statBenchRowsEnv = "LFMQ_BENCH_STAT_ROWS"

// statBenchShapes are the dense statistics of an 8B-A1B layer: K = 2048
// (the attention, conv and FFN inputs) and 7168 (the dense FFN's w2
// input), each with its default rows per operation.
var statBenchShapes = []struct{ k, rows int }{{2048, 4096}, {7168, 1024}}

// benchRows returns a pool of distinct rows of width k and their weights,
// cycled through by the benchmarks: real rows differ from one another, and
// a pool keeps the benchmark's own memory small.
func benchRows(k int) ([][]float32, []float64) {
	r := rand.New(rand.NewPCG(5, 6))
	pool := make([][]float32, 61)
	ws := make([]float64, len(pool))
	for q := range pool {
		pool[q] = make([]float32, k)
		for i := range pool[q] {
			pool[q][i] = float32(r.NormFloat64())
		}
		ws[q] = r.Float64()
	}
	return pool, ws
}

// reportStatFlops reports flops per second of wall time and per second of
// the process's CPU time (the figure that other processes on the machine
// disturb least).
func reportStatFlops(b *testing.B, flops float64, cpu time.Duration) {
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if d := cputime.Process() - cpu; d > 0 {
		b.ReportMetric(flops/d.Seconds()/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkStatAccumulate: the rows of a dense statistic added to its Stat
// (Add, and the flushes it triggers), on 1 and 2 threads (SetThreads), at
// the widths of statBenchShapes. The Stat lives across operations and has
// had a pass of rows before the timer starts, so an operation sees S as a
// long run does, already in memory; BenchmarkStatFinish times the rest of
// a statistic. GFLOP/s counts rows·K·(K+1): the upper triangle's
// multiply-adds, two flops each.
func BenchmarkStatAccumulate(b *testing.B) {
	for _, c := range statBenchShapes {
		rows := c.rows
		if v := os.Getenv(statBenchRowsEnv); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want a row count ≥ 1", statBenchRowsEnv, v)
			}
			rows = n
		}
		pool, ws := benchRows(c.k)
		// Whole passes per operation: each then does the work of its rows.
		pass := passChunks(c.k) * ChunkRows
		rows = (rows + pass - 1) / pass * pass
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("K=%d/rows=%d/threads=%d", c.k, rows, threads), func(b *testing.B) {
				st := NewStat(c.k)
				st.SetThreads(threads)
				add := func(n int) {
					for t := range n {
						if err := st.Add(pool[t%len(pool)], ws[t%len(pool)]); err != nil {
							b.Fatal(err)
						}
					}
				}
				add(st.rows)
				b.ResetTimer()
				cpu := cputime.Process()
				for b.Loop() {
					add(rows)
				}
				reportStatFlops(b, float64(rows)*float64(c.k)*float64(c.k+1)*float64(b.N), cpu)
			})
		}
	}
}

// BenchmarkStatFinish: the rest of a dense statistic, per operation: a new
// Stat (S's first touch), one chunk of rows, Finish (the mirror and the
// check). A whole statistic of n rows takes n/rows operations of
// BenchmarkStatAccumulate and one of these.
func BenchmarkStatFinish(b *testing.B) {
	for _, c := range statBenchShapes {
		pool, ws := benchRows(c.k)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("K=%d/threads=%d", c.k, threads), func(b *testing.B) {
				for b.Loop() {
					st := NewStat(c.k)
					st.SetThreads(threads)
					for t := range ChunkRows {
						if err := st.Add(pool[t%len(pool)], ws[t%len(pool)]); err != nil {
							b.Fatal(err)
						}
					}
					if err := st.Finish(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkBlockSum: the kernels alone on one block whose rows stay in the
// L1 cache (a group of chunks, the packed values and the block of S), so
// that the figures are the kernels' own speed; the Go kernel in the same
// run as the baseline. GFLOP/cpu-s counts a multiply and an add per term.
func BenchmarkBlockSum(b *testing.B) {
	const chunks = 2
	for _, kern := range []struct {
		name        string
		cols        int
		avx, avx512 bool
	}{{"go/8", 8, false, false}, {"go/16", 16, false, false}, {"avx2/8", 8, true, false}, {"avx512/16", 16, true, true}} {
		b.Run(kern.name, func(b *testing.B) {
			if kern.avx && !useAVX || kern.avx512 && !useAVX512 {
				b.Skip("not on this CPU")
			}
			savedAVX, savedAVX512 := useAVX, useAVX512
			useAVX, useAVX512 = kern.avx, kern.avx512
			defer func() { useAVX, useAVX512 = savedAVX, savedAVX512 }()
			r := rand.New(rand.NewPCG(7, 8))
			a := make([]float64, chunks*ChunkRows*microRows)
			y := make([]float64, chunks*ChunkRows*kern.cols)
			for i := range a {
				a[i] = r.NormFloat64()
			}
			for i := range y {
				y[i] = r.NormFloat64()
			}
			s := make([]float64, microRows*kern.cols)
			cpu := cputime.Process()
			for b.Loop() {
				blockSum(s, kern.cols, a, y, kern.cols, chunks, ChunkRows)
			}
			flops := 2 * float64(chunks*ChunkRows*microRows*kern.cols) * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			if d := cputime.Process() - cpu; d > 0 {
				b.ReportMetric(flops/d.Seconds()/1e9, "GFLOP/cpu-s")
			}
		})
	}
}

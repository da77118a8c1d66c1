package hessian

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
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

// TestStatChunkSums: S is, bit for bit, the chunked sum gptq.md §2 fixes:
// per chunk of ChunkRows rows and per entry (i ≤ j), Σ_t (ω_t·x_t[i])·x_t[j]
// in row order with each product rounded, the chunk sums added to S in
// chunk order; with the AVX2 and AVX-512 kernels and with the Go one, for
// row counts that fill a Stat's pending rows more than once, on one
// goroutine and on three (SetThreads).
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
		for _, k := range []int{1, 5, 8, 13, 16, 36, 47} {
			for _, n := range []int{1, ChunkRows, 2*ChunkRows + 9, 2*maxChunks*ChunkRows + ChunkRows + 7} {
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
// adds per operation (the real dense statistics see 32,768; the defaults
// keep one operation near a second on two cores).
const statBenchRowsEnv = "LFMQ_BENCH_STAT_ROWS"

// BenchmarkStatAccumulate: one operation is a whole dense statistic, as
// CollectLinear forms it: NewStat, rows of random values added one by one
// with random weights, Finish; at K = 2048 (an 8B-A1B layer's attention,
// conv and FFN input) and 7168 (its dense w2 input), on 1 and 2 threads
// (SetThreads). GFLOP/s counts rows·K·(K+1) (the upper triangle's
// multiply-adds, two flops each) over the whole operation.
func BenchmarkStatAccumulate(b *testing.B) {
	for _, c := range []struct{ k, rows int }{{2048, 4096}, {7168, 1024}} {
		rows := c.rows
		if v := os.Getenv(statBenchRowsEnv); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				b.Fatalf("%s=%q: want a row count ≥ 1", statBenchRowsEnv, v)
			}
			rows = n
		}
		// A pool of distinct rows cycled through: real rows differ from
		// one another, and this keeps the benchmark's own memory small.
		r := rand.New(rand.NewPCG(5, 6))
		pool := make([][]float32, 61)
		ws := make([]float64, len(pool))
		for q := range pool {
			pool[q] = make([]float32, c.k)
			for i := range pool[q] {
				pool[q][i] = float32(r.NormFloat64())
			}
			ws[q] = r.Float64()
		}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("K=%d/rows=%d/threads=%d", c.k, rows, threads), func(b *testing.B) {
				for b.Loop() {
					st := NewStat(c.k)
					st.SetThreads(threads)
					for t := range rows {
						if err := st.Add(pool[t%len(pool)], ws[t%len(pool)]); err != nil {
							b.Fatal(err)
						}
					}
					if err := st.Finish(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(rows)*float64(c.k)*float64(c.k+1)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

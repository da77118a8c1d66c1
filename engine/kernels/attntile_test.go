package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// tileImpls runs fn once per path of the tile kernels: with AVX-512 where
// the CPU has it, with AVX2 alone, and on the Go references.
func tileImpls(t *testing.T, fn func(t *testing.T, impl string)) {
	t.Helper()
	for _, impl := range []string{"avx512", "avx2", "go"} {
		saved, saved512 := useSIMD, useAVX512
		switch impl {
		case "avx2":
			useAVX512 = false
		case "go":
			useSIMD, useAVX512 = false, false
		}
		fn(t, impl)
		useSIMD, useAVX512 = saved, saved512
	}
}

// same reports whether got has want's bits, any NaN matching any NaN.
func same(got, want float32) bool {
	return math.Float32bits(got) == math.Float32bits(want) || (got != got && want != want)
}

// TestAttnScores16: each of the 16 queries' scores against each key is
// Dot's bits times the scale, one rounding each (the one-query kernels'
// values, so AttnScores4's), laid out one row per key, on every path, with
// infinities, a NaN and signed zeros among the inputs; nothing is written
// outside the cnt rows of 16.
func TestAttnScores16(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	tileImpls(t, func(t *testing.T, impl string) {
		for _, d := range []int{16, 32, 64, 128} {
			for _, cnt := range []int{1, 7, 64} {
				keyStride := d*8 + 16
				keys := randVec(rng, (cnt-1)*keyStride+d)
				q := make([][]float32, 16)
				packed := make([]float32, 16*d)
				for l := range q {
					q[l] = randVec(rng, d)
					if cnt == 7 && l == 5 {
						q[l][3] = float32(math.NaN())
					}
				}
				if cnt == 7 {
					keys[0], keys[1], keys[keyStride] = float32(math.Inf(1)), float32(math.Copysign(0, -1)), 0
					for i := range d {
						keys[2*keyStride+i] = 0
						q[9][i] = float32(math.Copysign(0, -1))
					}
				}
				for l := range q {
					PackQuery16(packed, l, q[l])
				}
				scale := float32(1 / math.Sqrt(float64(d)))
				scStride := 24
				sc := make([]float32, cnt*scStride+8)
				AttnScores16(sc, scStride, keys, keyStride, cnt, packed, d, scale)
				for j := range cnt {
					k := keys[j*keyStride:][:d]
					for l := range 16 {
						want := Dot(k, q[l]) * scale
						if got := sc[j*scStride+l]; !same(got, want) {
							t.Fatalf("%s d=%d cnt=%d: score of key %d, query %d = %g (%#x), want Dot's %g (%#x)", impl, d, cnt, j, l, got, math.Float32bits(got), want, math.Float32bits(want))
						}
					}
					for l := 16; l < scStride && j*scStride+l < len(sc); l++ {
						if sc[j*scStride+l] != 0 {
							t.Fatalf("%s: wrote column %d of row %d", impl, l, j)
						}
					}
				}
				for i := cnt * scStride; i < len(sc); i++ {
					if sc[i] != 0 {
						t.Fatalf("%s: wrote past row %d", impl, cnt)
					}
				}
			}
		}
	})
}

// TestColMaxSubSum: ColMax is Max down each column (NaN for a column with
// one, a zero of either sign), SubCols one rounded subtraction per value,
// and ColSum the chain of additions in row order from +0, for column
// counts on and off the SIMD groups and strides wider than the columns.
func TestColMaxSubSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1))}
	tileImpls(t, func(t *testing.T, impl string) {
		for _, cols := range []int{1, 16, 17, 48, 64, 80} {
			for _, rows := range []int{1, 2, 5, 64} {
				for trial := range 6 {
					stride := cols + 16*(trial%2)
					x := make([]float32, rows*stride)
					for i := range x {
						switch {
						case trial >= 4 && rng.IntN(6) == 0:
							x[i] = special[rng.IntN(len(special))]
						case trial == 2:
							x[i] = -float32(rng.IntN(3)) // ties and zeros
						default:
							x[i] = (rng.Float32()*2 - 1) * 50
						}
					}
					col := func(c int) []float32 {
						v := make([]float32, rows)
						for r := range rows {
							v[r] = x[r*stride+c]
						}
						return v
					}
					m := make([]float32, cols)
					ColMax(m, x, stride, rows)
					for c := range cols {
						want := Max(col(c))
						if got := m[c]; !same(got, want) && !(got == 0 && want == 0) {
							t.Fatalf("%s cols=%d rows=%d: max of column %d = %g, want %g", impl, cols, rows, c, got, want)
						}
					}
					sum := make([]float32, cols)
					ColSum(sum, x, stride, rows)
					for c := range cols {
						var want float32
						for _, v := range col(c) {
							want += v
						}
						if got := sum[c]; !same(got, want) {
							t.Fatalf("%s cols=%d rows=%d: sum of column %d = %g, want %g", impl, cols, rows, c, got, want)
						}
					}
					shift := randVec(rng, cols)
					y := append([]float32(nil), x...)
					SubCols(y, stride, rows, shift)
					for i := range y {
						want := x[i]
						if c := i % stride; c < cols {
							want = x[i] - shift[c]
						}
						if !same(y[i], want) {
							t.Fatalf("%s cols=%d rows=%d: value %d after SubCols = %g, want %g", impl, cols, rows, i, y[i], want)
						}
					}
				}
			}
		}
	})
}

// TestAccumRowsN: n accumulators sharing value rows get the bits of a
// rescale by their factor (1, 0, or any) and then AccumRows run for each
// with its own column of weights, on every path
// (the 4×64 AVX-512 kernel, AccumRows' AVX2 kernel per query, Go).
func TestAccumRowsN(t *testing.T) {
	rng := rand.New(rand.NewPCG(95, 96))
	tileImpls(t, func(t *testing.T, impl string) {
		for _, tc := range []struct{ n, d int }{{4, 64}, {2, 32}, {4, 32}, {1, 64}, {3, 40}, {4, 128}} {
			for _, cnt := range []int{0, 1, 5, 64, 130} {
				vStride := tc.d*2 + 8
				pStride := 16
				v := randVec(rng, max(cnt, 1)*vStride)
				p := randVec(rng, max(cnt, 1)*pStride)
				if cnt == 5 {
					v[3], p[pStride+1] = float32(math.Inf(1)), float32(math.NaN())
				}
				init := randVec(rng, tc.n*tc.d)
				alpha := make([]float32, tc.n)
				for q := range alpha {
					alpha[q] = []float32{1, 0.25, rng.Float32(), 0}[(q+cnt)%4]
				}
				want := append([]float32(nil), init...)
				for q := range tc.n {
					for i := range tc.d {
						want[q*tc.d+i] *= alpha[q]
					}
					pq := make([]float32, cnt)
					for j := range pq {
						pq[j] = p[j*pStride+q]
					}
					withGo(func() { AccumRows(want[q*tc.d:][:tc.d], pq, v, vStride) })
				}
				acc := append([]float32(nil), init...)
				AccumRowsN(acc, tc.n, alpha, p, pStride, v, vStride, cnt)
				for i := range acc {
					if !same(acc[i], want[i]) {
						t.Fatalf("%s n=%d d=%d cnt=%d: acc[%d] = %g, want %g", impl, tc.n, tc.d, cnt, i, acc[i], want[i])
					}
				}
			}
		}
	})
}

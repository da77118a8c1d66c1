package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpShift: every path gives Exp(x − m) element by element (the
// AVX-512 kernel 64 at a time, the Go loop for the rest), across Exp's
// range and its edges, and within float32 rounding of the float64
// exponential for ordinary scores.
func TestExpShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-45, 89, -104, 88.9, -103.9, 200, -200,
		math.Nextafter32(89, 100), math.Nextafter32(-104, -200), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, n := range []int{0, 1, 17, 63, 64, 65, 128, 130, 256} {
		for _, m := range []float32{0, 3.5, -7.25} {
			x := make([]float32, n)
			for i := range x {
				if rng.IntN(5) == 0 {
					x[i] = special[rng.IntN(len(special))] + m
				} else {
					x[i] = (rng.Float32()*2 - 1) * 30
				}
			}
			for _, impl := range []string{"simd", "go"} {
				y := make([]float32, n)
				run := func() { ExpShift(y, x, m) }
				if impl == "go" {
					withGo(run)
				} else {
					run()
				}
				for i, v := range x {
					want := Exp(v - m)
					if math.Float32bits(y[i]) != math.Float32bits(want) && !(want != want && y[i] != y[i]) {
						t.Fatalf("%s n=%d m=%g: Exp(%g − m) = %g, want %g", impl, n, m, v, y[i], want)
					}
					if d := float64(v - m); d > -80 && d < 80 {
						if e := math.Exp(d); math.Abs(float64(y[i])-e) > 1.2e-7*e {
							t.Fatalf("%s: Exp(%g) = %g, float64 says %g", impl, d, y[i], e)
						}
					}
				}
			}
		}
	}
}

// TestAccumRows: the weighted row sum is one fused chain per element over
// the rows in order, on every path and for widths the SIMD kernel takes
// (multiples of 32: 64 at a time, then 32) and those it leaves to Go.
func TestAccumRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	for _, d := range []int{16, 32, 64, 96, 128, 160, 40} {
		for _, rows := range []int{0, 1, 5, 64} {
			stride := d*3 + 8
			v := randVec(rng, max(rows, 1)*stride)
			p := randVec(rng, rows)
			init := randVec(rng, d)
			want := append([]float32(nil), init...)
			for i := range want {
				for j := range rows {
					want[i] = fma32(p[j], v[j*stride+i], want[i])
				}
			}
			for _, impl := range []string{"simd", "go"} {
				acc := append([]float32(nil), init...)
				run := func() { AccumRows(acc, p, v, stride) }
				if impl == "go" {
					withGo(run)
				} else {
					run()
				}
				for i := range acc {
					if math.Float32bits(acc[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s d=%d rows=%d: acc[%d] = %g, want %g", impl, d, rows, i, acc[i], want[i])
					}
				}
			}
		}
	}
}

// TestDot4: each of the four products has Dot's bits.
func TestDot4(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	for _, n := range []int{1, 16, 33, 64} {
		w := randVec(rng, n)
		x := randVec(rng, 3*(n+5)+n)
		var got [4]float32
		Dot4(&got, w, x, n+5)
		for b := range 4 {
			if want := Dot(w, x[b*(n+5):][:n]); math.Float32bits(got[b]) != math.Float32bits(want) {
				t.Fatalf("n=%d: Dot4[%d] = %g, want Dot's %g", n, b, got[b], want)
			}
		}
	}
}

// TestAttnScores4: a block of scores is Dot's bits times the scale, one
// rounding each, on every path, for head widths the SIMD kernel takes
// (multiples of 16) and others, at any key stride and scores stride; it
// is also within float32 rounding of the float64 dot product.
func TestAttnScores4(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	for _, d := range []int{16, 64, 128, 40} {
		for _, cnt := range []int{1, 7, 64} {
			keyStride := d*8 + 16
			keys := randVec(rng, (cnt-1)*keyStride+d)
			q := randVec(rng, 4*d)
			if cnt == 7 {
				// Edge values: infinities, a NaN, zeros of both signs.
				keys[0], keys[1], q[2*d], keys[keyStride] = float32(math.Inf(1)), float32(math.Copysign(0, -1)), float32(math.NaN()), 0
			}
			scale := float32(1 / math.Sqrt(float64(d)))
			scStride := 64
			for _, impl := range []string{"simd", "go"} {
				sc := make([]float32, 4*scStride)
				run := func() { AttnScores4(sc, scStride, keys, keyStride, cnt, q, scale, nil, nil) }
				if impl == "go" {
					withGo(run)
				} else {
					run()
				}
				for g := range 4 {
					for j := range cnt {
						k := keys[j*keyStride:][:d]
						want := Dot(k, q[g*d:][:d]) * scale
						got := sc[g*scStride+j]
						if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
							t.Fatalf("%s d=%d cnt=%d: score[%d][%d] = %g, want %g", impl, d, cnt, g, j, got, want)
						}
						var f64 float64
						for i := range d {
							f64 += float64(k[i]) * float64(q[g*d+i])
						}
						if f64 = f64 * float64(scale); cnt != 7 && math.Abs(float64(got)-f64) > 1e-5*(1+math.Abs(f64)) {
							t.Fatalf("%s: score %g, float64 says %g", impl, got, f64)
						}
					}
					for j := cnt; j < scStride; j++ {
						if sc[g*scStride+j] != 0 {
							t.Fatalf("%s: wrote score [%d][%d] past cnt", impl, g, j)
						}
					}
				}
			}
		}
	}
}

// TestMax: the builtin max over the slice on every path and length (the
// SIMD kernel's multiples of 8 and the tail), with NaNs anywhere (the
// result is a NaN), infinities, and zeros of both signs (a zero result may
// have either sign).
func TestMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), -1e-45}
	for _, n := range []int{1, 3, 8, 9, 16, 63, 64, 65, 200} {
		for trial := range 200 {
			x := make([]float32, n)
			for i := range x {
				switch {
				case trial%4 == 1:
					x[i] = -float32(rng.IntN(3)) // ties and zeros
				case rng.IntN(8) == 0:
					x[i] = special[rng.IntN(len(special))]
					if trial%2 == 0 && x[i] != x[i] {
						x[i] = -7 // half the trials without NaNs
					}
				default:
					x[i] = (rng.Float32()*2 - 1) * 50
				}
			}
			want := x[0]
			for _, v := range x[1:] {
				want = max(want, v)
			}
			for _, impl := range []string{"simd", "go"} {
				var got float32
				run := func() { got = Max(x) }
				if impl == "go" {
					withGo(run)
				} else {
					run()
				}
				ok := math.Float32bits(got) == math.Float32bits(want) || (got != got && want != want) || (got == 0 && want == 0)
				if !ok {
					t.Fatalf("%s n=%d: Max(%v) = %g, want %g", impl, n, x, got, want)
				}
			}
		}
	}
}

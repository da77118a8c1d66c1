package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bf16Specials are bfloat16 patterns the widening must carry exactly:
// zeros of both signs, the smallest and largest subnormals, the smallest
// normal, the largest finite value, infinities, and quiet and signalling
// NaNs with payloads, of both signs.
var bf16Specials = []uint16{0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0xff81}

// randKVBF16 returns n bfloat16 patterns of values around ±4 and, where
// specials is set, about one in six drawn from bf16Specials.
func randKVBF16(rng *rand.Rand, n int, specials bool) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		if specials && rng.IntN(6) == 0 {
			v[i] = bf16Specials[rng.IntN(len(bf16Specials))]
			continue
		}
		v[i] = uint16(math.Float32bits((rng.Float32()*2-1)*4) >> 16)
	}
	return v
}

// widenAll widens bfloat16 patterns by the definition (the pattern is the
// float32's high half), sharing no code with the kernels.
func widenAll(h []uint16) []float32 {
	f := make([]float32, len(h))
	for i, b := range h {
		f[i] = math.Float32frombits(uint32(b) << 16)
	}
	return f
}

// TestAttnScores4BF16: scores against bfloat16 keys have the bits of
// AttnScores4's reference on the widened keys, and so do AttnScores4's on
// the widened keys, on every path (four keys at a time with AVX-512 and the
// keys left over one by one, AVX2, Go), for
// head widths of multiples of 16 and others, key counts that leave 0–3
// keys over, and every special pattern (NaN, Inf, ±0, subnormals) among
// the keys; they are within float32 rounding of the float64 dot product,
// and nothing is written past cnt.
func TestAttnScores4BF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	tileImpls(t, func(t *testing.T, impl string) {
		for _, d := range []int{16, 64, 128, 40} {
			for _, cnt := range []int{1, 3, 4, 7, 64, 66} {
				for _, specials := range []bool{false, true} {
					keyStride := d*8 + 16
					keys := randKVBF16(rng, (cnt-1)*keyStride+d, specials)
					wide := widenAll(keys)
					q := randVec(rng, 4*d)
					if specials {
						q[2*d] = float32(math.Copysign(0, -1))
					}
					scale := float32(1 / math.Sqrt(float64(d)))
					scStride := 70
					sc := make([]float32, 4*scStride)
					var next, vals []uint16 // rows to prefetch, which change nothing
					if specials {
						next, vals = randKVBF16(rng, len(keys), false), make([]uint16, len(keys))
					}
					AttnScores4BF16(sc, scStride, keys, keyStride, cnt, q, scale, next, vals)
					want := make([]float32, 4*scStride)
					withGo(func() { AttnScores4(want, scStride, wide, keyStride, cnt, q, scale, nil, nil) })
					// AttnScores4 on this path, over the widened keys,
					// must give the reference's bits too.
					f32 := make([]float32, 4*scStride)
					var nextF, valsF []float32 // rows to prefetch, which change nothing
					if specials {
						nextF, valsF = randVec(rng, len(wide)), make([]float32, len(wide))
					}
					AttnScores4(f32, scStride, wide, keyStride, cnt, q, scale, nextF, valsF)
					for i := range f32 {
						if !same(f32[i], want[i]) {
							t.Fatalf("%s d=%d cnt=%d: AttnScores4 value %d is %g, its reference %g", impl, d, cnt, i, f32[i], want[i])
						}
					}
					for g := range 4 {
						for j := range scStride {
							got, w := sc[g*scStride+j], want[g*scStride+j]
							if j >= cnt {
								if got != 0 {
									t.Fatalf("%s: wrote score [%d][%d] past cnt %d", impl, g, j, cnt)
								}
								continue
							}
							if !same(got, w) {
								t.Fatalf("%s d=%d cnt=%d specials=%v: score[%d][%d] = %g, want %g", impl, d, cnt, specials, g, j, got, w)
							}
							if specials {
								continue
							}
							var f64 float64
							for i := range d {
								f64 += float64(wide[j*keyStride+i]) * float64(q[g*d+i])
							}
							if f64 *= float64(scale); math.Abs(float64(got)-f64) > 1e-5*(1+math.Abs(f64)) {
								t.Fatalf("%s: score %g, float64 says %g", impl, got, f64)
							}
						}
					}
				}
			}
		}
	})
}

// TestAccumRows4BF16: each accumulator is rescaled by its alpha and then
// one fused chain per element over the bfloat16 value rows, widened, in
// order (AccumRows4BF16; AccumRows4 on the widened rows), on every path, for widths the AVX-512 kernel takes (multiples of
// 64) and others, with special patterns among the values and the weights;
// nothing outside the four accumulators changes.
func TestAccumRows4BF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 104))
	tileImpls(t, func(t *testing.T, impl string) {
		for _, d := range []int{64, 128, 32, 40} {
			for _, cnt := range []int{0, 1, 5, 64} {
				for _, specials := range []bool{false, true} {
					vStride := d*2 + 8
					pStride := 67
					v := randKVBF16(rng, max(cnt, 1)*vStride, specials)
					wide := widenAll(v)
					p := randVec(rng, 4*pStride)
					if specials && cnt > 1 {
						p[1], p[pStride] = float32(math.Inf(-1)), float32(math.NaN())
					}
					alpha := [4]float32{1, 0.25, rng.Float32(), 0}
					if cnt%2 == 1 {
						alpha = [4]float32{0.5, 1, 1, rng.Float32()}
					}
					init := randVec(rng, 4*d+2)
					want := append([]float32(nil), init...)
					for g := range 4 {
						for i := range d {
							x := want[1+g*d+i]
							if alpha[g] != 1 {
								x *= alpha[g]
							}
							for j := range cnt {
								x = fma32(p[g*pStride+j], wide[j*vStride+i], x)
							}
							want[1+g*d+i] = x
						}
					}
					for _, kernel := range []string{"AccumRows4BF16", "AccumRows4"} {
						acc := append([]float32(nil), init...)
						if kernel == "AccumRows4" {
							AccumRows4(acc[1:1+4*d], &alpha, p, pStride, wide, vStride, cnt)
						} else {
							AccumRows4BF16(acc[1:1+4*d], &alpha, p, pStride, v, vStride, cnt)
						}
						for i := range acc {
							if !same(acc[i], want[i]) {
								t.Fatalf("%s %s d=%d cnt=%d specials=%v: acc[%d] = %g, want %g", impl, kernel, d, cnt, specials, i-1, acc[i], want[i])
							}
						}
					}
				}
			}
		}
	})
}

// TestAttnScores4BF16Rows: the scores laid out a row per key
// (AttnScores4BF16Rows, and AttnScores4Rows on the widened keys) have the
// bits of AttnScores4's reference on the widened keys, on every path, for
// head widths the SIMD kernel takes and others, key counts that leave 0–3
// keys over, and special patterns among the keys; nothing between the
// rows' four scores, or past the last row, is written.
func TestAttnScores4BF16Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(105, 106))
	tileImpls(t, func(t *testing.T, impl string) {
		for _, d := range []int{16, 64, 128, 40} {
			for _, cnt := range []int{1, 3, 4, 7, 64, 66} {
				for _, specials := range []bool{false, true} {
					keyStride := d*8 + 16
					keys := randKVBF16(rng, (cnt-1)*keyStride+d, specials)
					q := randVec(rng, 4*d)
					scale := float32(1 / math.Sqrt(float64(d)))
					const scStride, refStride = 36, 70 // a decode row's 32 query heads, padded
					sc := make([]float32, (cnt+1)*scStride)
					var next, vals []uint16
					if specials {
						next, vals = randKVBF16(rng, len(keys), false), make([]uint16, len(keys))
					}
					AttnScores4BF16Rows(sc[2:], scStride, keys, keyStride, cnt, q, scale, next, vals)
					wide := widenAll(keys)
					want := make([]float32, 4*refStride)
					withGo(func() { AttnScores4(want, refStride, wide, keyStride, cnt, q, scale, nil, nil) })
					f32 := make([]float32, len(sc))
					var nextF, valsF []float32
					if specials {
						nextF, valsF = widenAll(next), make([]float32, len(keys))
					}
					AttnScores4Rows(f32[2:], scStride, wide, keyStride, cnt, q, scale, nextF, valsF)
					for i, got := range sc {
						if !same(f32[i], got) {
							t.Fatalf("%s d=%d cnt=%d specials=%v: AttnScores4Rows sc[%d] = %g, AttnScores4BF16Rows %g", impl, d, cnt, specials, i, f32[i], got)
						}
						j, c := (i-2)/scStride, (i-2)%scStride
						if i < 2 || j >= cnt || c >= 4 {
							if got != 0 {
								t.Fatalf("%s d=%d cnt=%d: wrote sc[%d] outside the rows' scores", impl, d, cnt, i)
							}
							continue
						}
						if w := want[c*refStride+j]; !same(got, w) {
							t.Fatalf("%s d=%d cnt=%d specials=%v: score of key %d, head %d = %g, want %g", impl, d, cnt, specials, j, c, got, w)
						}
					}
				}
			}
		}
	})
}

// TestAccumRows4BF16Rows: with the weights a row per value row
// (AccumRows4BF16Rows, and AccumRows4Rows on the widened rows), each
// accumulator is rescaled by its alpha and then one fused chain per element
// over the widened value rows, in order, on every path, with special
// patterns among the values and the weights.
func TestAccumRows4BF16Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(107, 108))
	tileImpls(t, func(t *testing.T, impl string) {
		for _, d := range []int{64, 128, 32, 40} {
			for _, cnt := range []int{0, 1, 5, 64} {
				for _, specials := range []bool{false, true} {
					vStride := d*2 + 8
					const pRow = 36
					v := randKVBF16(rng, max(cnt, 1)*vStride, specials)
					wide := widenAll(v)
					p := randVec(rng, max(cnt, 1)*pRow)
					if specials && cnt > 1 {
						p[1], p[pRow+2] = float32(math.Inf(-1)), float32(math.NaN())
					}
					alpha := [4]float32{1, 0.25, rng.Float32(), 0}
					if cnt%2 == 1 {
						alpha = [4]float32{0.5, 1, 1, rng.Float32()}
					}
					init := randVec(rng, 4*d+2)
					want := append([]float32(nil), init...)
					for g := range 4 {
						for i := range d {
							x := want[1+g*d+i]
							if alpha[g] != 1 {
								x *= alpha[g]
							}
							for j := range cnt {
								x = fma32(p[j*pRow+g], wide[j*vStride+i], x)
							}
							want[1+g*d+i] = x
						}
					}
					var next []uint16 // rows to prefetch, which change nothing
					if specials {
						next = randKVBF16(rng, len(v), false)
					}
					for _, kernel := range []string{"AccumRows4BF16Rows", "AccumRows4Rows"} {
						acc := append([]float32(nil), init...)
						if kernel == "AccumRows4Rows" {
							var nextF []float32
							if next != nil {
								nextF = widenAll(next)
							}
							AccumRows4Rows(acc[1:1+4*d], &alpha, p, pRow, wide, vStride, cnt, nextF)
						} else {
							AccumRows4BF16Rows(acc[1:1+4*d], &alpha, p, pRow, v, vStride, cnt, next)
						}
						for i := range acc {
							if !same(acc[i], want[i]) {
								t.Fatalf("%s %s d=%d cnt=%d specials=%v: acc[%d] = %g, want %g", impl, kernel, d, cnt, specials, i-1, acc[i], want[i])
							}
						}
					}
				}
			}
		}
	})
}

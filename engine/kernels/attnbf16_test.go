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

// TestAttnScores4Rows: scores against bfloat16 keys (AttnScores4BF16Rows)
// and float32 keys (AttnScores4Rows, on the widened keys), laid out a row
// per key, have the bits of AttnScores4's reference on the widened keys,
// and so does AttnScores4 itself, on every path (four keys at a time with
// AVX-512 and the keys left over one by one, AVX2, Go), for head widths of
// multiples of 16 and others, key counts that leave 0–3 keys over, and
// every special pattern (NaN, Inf, ±0, subnormals) among the keys; they
// are within float32 rounding of the float64 dot product, and nothing
// between the rows' four scores or past the last row is written.
func TestAttnScores4Rows(t *testing.T) {
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
					const refStride = 70
					want := make([]float32, 4*refStride)
					withGo(func() { AttnScores4(want, refStride, wide, keyStride, cnt, q, scale, nil, nil) })
					// AttnScores4 on this path, over the widened keys,
					// must give the reference's bits too.
					var next, vals []uint16 // rows to prefetch, which change nothing
					var nextF, valsF []float32
					if specials {
						next, vals = randKVBF16(rng, len(keys), false), make([]uint16, len(keys))
						nextF, valsF = widenAll(next), make([]float32, len(wide))
					}
					f32 := make([]float32, 4*refStride)
					AttnScores4(f32, refStride, wide, keyStride, cnt, q, scale, nextF, valsF)
					for i := range f32 {
						if !same(f32[i], want[i]) {
							t.Fatalf("%s d=%d cnt=%d: AttnScores4 value %d is %g, its reference %g", impl, d, cnt, i, f32[i], want[i])
						}
					}
					const scStride = 36 // a decode row's 32 query heads, padded
					for _, kernel := range []string{"AttnScores4BF16Rows", "AttnScores4Rows"} {
						sc := make([]float32, (cnt+1)*scStride)
						if kernel == "AttnScores4Rows" {
							AttnScores4Rows(sc[2:], scStride, wide, keyStride, cnt, q, scale, nextF, valsF)
						} else {
							AttnScores4BF16Rows(sc[2:], scStride, keys, keyStride, cnt, q, scale, next, vals)
						}
						for i, got := range sc {
							j, g := (i-2)/scStride, (i-2)%scStride
							if i < 2 || j >= cnt || g >= 4 {
								if got != 0 {
									t.Fatalf("%s %s d=%d cnt=%d: wrote sc[%d] outside the rows' scores", impl, kernel, d, cnt, i)
								}
								continue
							}
							if w := want[g*refStride+j]; !same(got, w) {
								t.Fatalf("%s %s d=%d cnt=%d specials=%v: score of key %d, head %d = %g, want %g", impl, kernel, d, cnt, specials, j, g, got, w)
							}
							if specials {
								continue
							}
							var f64 float64
							for i := range d {
								f64 += float64(wide[j*keyStride+i]) * float64(q[g*d+i])
							}
							if f64 *= float64(scale); math.Abs(float64(got)-f64) > 1e-5*(1+math.Abs(f64)) {
								t.Fatalf("%s %s: score %g, float64 says %g", impl, kernel, got, f64)
							}
						}
					}
				}
			}
		}
	})
}

// TestAccumRows4Rows: each accumulator is rescaled by its alpha and then
// one fused chain per element over the value rows, widened, in order, with
// the weights a row per value row (AccumRows4BF16Rows, AccumRows4Rows on
// the widened rows) or a row per head (AccumRows4 on the widened rows), on
// every path, for widths the AVX-512 kernels take (multiples of 64) and
// others, with special patterns among the values and the weights; nothing
// outside the four accumulators changes.
func TestAccumRows4Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 104))
	tileImpls(t, func(t *testing.T, impl string) {
		for _, d := range []int{64, 128, 32, 40} {
			for _, cnt := range []int{0, 1, 5, 64} {
				for _, specials := range []bool{false, true} {
					vStride := d*2 + 8
					const pRow = 36 // a decode row's 32 query heads, padded
					v := randKVBF16(rng, max(cnt, 1)*vStride, specials)
					wide := widenAll(v)
					p := randVec(rng, max(cnt, 1)*pRow)
					if specials && cnt > 1 {
						p[1], p[pRow+2] = float32(math.Inf(-1)), float32(math.NaN())
					}
					// The same weights a row per head, for AccumRows4.
					pHeads := make([]float32, 4*max(cnt, 1))
					for j := range cnt {
						for g := range 4 {
							pHeads[g*max(cnt, 1)+j] = p[j*pRow+g]
						}
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
					var nextF []float32
					if specials {
						next = randKVBF16(rng, len(v), false)
						nextF = widenAll(next)
					}
					for _, kernel := range []string{"AccumRows4BF16Rows", "AccumRows4Rows", "AccumRows4"} {
						acc := append([]float32(nil), init...)
						switch kernel {
						case "AccumRows4BF16Rows":
							AccumRows4BF16Rows(acc[1:1+4*d], &alpha, p, pRow, v, vStride, cnt, next)
						case "AccumRows4Rows":
							AccumRows4Rows(acc[1:1+4*d], &alpha, p, pRow, wide, vStride, cnt, nextF)
						default:
							AccumRows4(acc[1:1+4*d], &alpha, pHeads, max(cnt, 1), wide, vStride, cnt)
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

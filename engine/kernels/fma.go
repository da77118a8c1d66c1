package kernels

import "math"

// fma32 returns x*y + z rounded once to float32, exactly what one lane of the
// AVX2 VFMADD231PS/SS instructions computes. It is the primitive every
// reference kernel is written in, so that SIMD and reference agree bit for bit.
//
// Why not float32(math.FMA(...)): that rounds twice (to float64, then to
// float32), and double rounding differs from a single rounding when the
// float64 result lands exactly on a float32 rounding midpoint while the exact
// result does not. Here the product of two float32 values is exact in float64
// (48 significant bits), so the only rounding in s = p + z is the addition; s
// is correctly rounded to float32 by the plain conversion unless s sits on a
// float32 midpoint (the low 29 mantissa bits are 1 followed by 28 zeros) or
// in the float32 subnormal range, where the midpoint pattern is different. In
// those rare cases fma32Slow recovers the exact error of the addition and
// rounds to odd first, which makes the second rounding correct (53 ≥ 24+2).
//
// NaN payloads are not specified; finite inputs and infinities follow IEEE 754.
func fma32(x, y, z float32) float32 {
	// The product is exact (24+24 significant bits), so this is one rounding
	// whether or not the compiler fuses it.
	s := float64(x)*float64(y) + float64(z)
	// Fast path unless s is a float32 midpoint or a nonzero value below the
	// float32 normal range (exponent field 1..896 ⇔ 0 < |s| < 2^-126).
	if b := math.Float64bits(s); b&(1<<29-1) != 1<<28 && b&(0x7ff<<52)-1<<52 >= 896<<52 {
		return float32(s)
	}
	return fma32Slow(x, y, z)
}

// fma32Slow finishes fma32 when s = fl64(p + z) may be double-rounded: it
// replaces s by p + z rounded to odd in float64, which float32() then rounds
// correctly.
//
//go:noinline
func fma32Slow(x, y, z32 float32) float32 {
	p := float64(float64(x) * float64(y))
	z := float64(z32)
	s := float64(p + z)
	// TwoSum (Knuth): e is the exact error p + z − s; no overflow is possible
	// for products and sums of float32 values.
	bb := s - p
	e := (p - (s - bb)) + (z - bb)
	if e != 0 {
		b := math.Float64bits(s)
		if b&1 == 0 {
			// s is even: the odd neighbour in the direction of the exact
			// value is the round-to-odd result.
			if (e > 0) == (s > 0) {
				b++
			} else {
				b--
			}
			s = math.Float64frombits(b)
		}
	}
	return float32(s)
}

// The loops below are fma32 written out by hand: fma32 itself is over the
// compiler's inlining budget, and a call per element would cost more than the
// arithmetic. Their results are those of fma32, element by element.

// fmaAxpy sets acc[i] = fma32(a, w[i], acc[i]) for i < len(acc).
func fmaAxpy(acc []float32, a float32, w []float32) {
	w = w[:len(acc)]
	for i, wi := range w {
		s := float64(a)*float64(wi) + float64(acc[i])
		if b := math.Float64bits(s); b&(1<<29-1) != 1<<28 && b&(0x7ff<<52)-1<<52 >= 896<<52 {
			acc[i] = float32(s)
		} else {
			acc[i] = fma32Slow(a, wi, acc[i])
		}
	}
}

// fmaMul sets acc[i] = fma32(w[i], x[i], acc[i]) for i < len(acc).
func fmaMul(acc, w, x []float32) {
	w = w[:len(acc)]
	x = x[:len(acc)]
	for i, wi := range w {
		s := float64(wi)*float64(x[i]) + float64(acc[i])
		if b := math.Float64bits(s); b&(1<<29-1) != 1<<28 && b&(0x7ff<<52)-1<<52 >= 896<<52 {
			acc[i] = float32(s)
		} else {
			acc[i] = fma32Slow(wi, x[i], acc[i])
		}
	}
}

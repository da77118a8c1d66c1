package refcache

import "math"

// FromFloat64 rounds x to the nearest IEEE 754 binary16 value (ties to
// even) and returns its bits. Rounding is done once, from float64: going
// through float32 first could round twice and differ in the last bit.
// Values beyond the binary16 range become ±Inf, NaN stays NaN.
func FromFloat64(x float64) uint16 {
	b := math.Float64bits(x)
	sign := uint16(b>>48) & 0x8000
	exp := int(b>>52) & 0x7ff
	mant := b & (1<<52 - 1)
	if exp == 0x7ff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	if exp == 0 { // float64 zero or subnormal: far below binary16's range
		return sign
	}
	e := exp - 1023
	if e > 15 {
		return sign | 0x7c00
	}
	m := mant | 1<<52 // 53-bit significand
	var shift uint
	var base uint64
	if e >= -14 {
		// Normal binary16: 10 fraction bits; the biased exponent sits above
		// them, so a carry out of the fraction bumps the exponent (and
		// reaches Inf at the top) by itself.
		shift = 42
		base = uint64(e+15) << 10
		m = mant
	} else {
		// Subnormal binary16: units of 2^−24.
		if e < -25 {
			return sign
		}
		shift = uint(42 + (-14 - e))
	}
	q := m >> shift
	rem := m & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	h := base + q
	if rem > half || (rem == half && q&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// ToFloat64 returns the value of the binary16 bits h, exactly.
func ToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * frac * 0x1p-24
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}

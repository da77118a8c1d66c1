package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fmaExact is the oracle: x*y + z computed exactly with big.Float and rounded
// once to float32 (nearest, ties to even; big.Float handles subnormals).
func fmaExact(x, y, z float32) float32 {
	bx := new(big.Float).SetPrec(0).SetFloat64(float64(x))
	by := new(big.Float).SetFloat64(float64(y))
	bz := new(big.Float).SetFloat64(float64(z))
	p := new(big.Float).SetPrec(400).Mul(bx, by)
	s := new(big.Float).SetPrec(400).Add(p, bz)
	f, _ := s.Float32()
	if s.Sign() == 0 {
		// big.Float has no signed zero arithmetic of IEEE: an exact zero
		// sum is +0 unless both addends are −0.
		if math.Signbit(float64(x*y)) && math.Signbit(float64(z)) {
			return float32(math.Copysign(0, -1))
		}
		return 0
	}
	return f
}

func TestFMA32(t *testing.T) {
	tests := []struct {
		name    string
		x, y, z float32
	}{
		// p = 1 + 2^-11 + 2^-24 exactly is a float32 midpoint; a tiny z
		// decides the rounding, which float32(math.FMA(...)) gets wrong.
		{"midpoint up", 1 + 0x1p-12, 1 + 0x1p-12, 0x1p-80},
		{"midpoint down", 1 + 0x1p-12, 1 + 0x1p-12, -0x1p-80},
		{"midpoint exact", 1 + 0x1p-12, 1 + 0x1p-12, 0},
		{"negative midpoint", -(1 + 0x1p-12), 1 + 0x1p-12, 0x1p-80},
		{"subnormal result", 0x1p-75, 0x1p-70 * 1.5, 0x1p-149},
		{"subnormal tie", 0x1p-75, 0x1p-75, 0x1p-150 * 3},
		{"cancel to +0", 2, 3, -6},
		{"both -0", float32(math.Copysign(0, -1)), 1, float32(math.Copysign(0, -1))},
		{"overflow", 0x1p127, 4, 0},
		{"near overflow", 0x1p64 * 1.9999999, 0x1p63 * 1.9999999, 0x1p103},
	}
	for _, tc := range tests {
		got, want := fma32(tc.x, tc.y, tc.z), fmaExact(tc.x, tc.y, tc.z)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("%s: fma32(%g, %g, %g) = %g, want %g", tc.name, tc.x, tc.y, tc.z, got, want)
		}
	}
	// The case that motivates fma32: double rounding through float64 differs.
	x, y, z := float32(1+0x1p-12), float32(1+0x1p-12), float32(0x1p-80)
	if float32(math.FMA(float64(x), float64(y), float64(z))) == fmaExact(x, y, z) {
		t.Errorf("expected float32(math.FMA) to double-round on the midpoint case")
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		x, y, z := fmaOperands(rng, i)
		got, want := fma32(x, y, z), fmaExact(x, y, z)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", x, y, z, got, want)
		}
	}
}

// fmaOperands returns finite operands biased towards the hard cases: short
// significands (products on float32 midpoints) and addends far below them.
func fmaOperands(rng *rand.Rand, i int) (x, y, z float32) {
	randF := func() float32 {
		switch rng.IntN(4) {
		case 0: // arbitrary finite bit patterns
			for {
				f := math.Float32frombits(rng.Uint32())
				if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
					return f
				}
			}
		case 1: // few significant bits
			return float32(rng.IntN(1<<13)-1<<12) * float32(math.Ldexp(1, rng.IntN(40)-20))
		default:
			return float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(60)-30))
		}
	}
	x, y, z = randF(), randF(), randF()
	if i%3 == 0 {
		z = float32(math.Ldexp(float64(rng.IntN(3)-1), rng.IntN(60)-80))
	}
	return x, y, z
}

// TestFMA32Hardware checks fma32 against the VFMADD instruction through the
// one-element dot kernel, on CPUs that have it.
func TestFMA32Hardware(t *testing.T) {
	if !useSIMD {
		t.Skip("no SIMD kernels on this build or CPU")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	w := make([]float32, 17)
	v := make([]float32, 17)
	v[0] = 1
	for i := range 200000 {
		x, y, z := fmaOperands(rng, i)
		if z == 0 {
			continue // lane sums turn −0 into +0
		}
		// Lane 0 holds z, the other lanes +0; the tail element then fuses
		// x*y into the reduced sum: the dot is exactly VFMADD(x, y, z).
		w[0], w[16], v[16] = z, x, y
		got := dotF32AVX(w, v)
		if want := fma32(x, y, z); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("x=%g y=%g z=%g: VFMADD231SS gives %g, fma32 %g", x, y, z, got, want)
		}
	}
}

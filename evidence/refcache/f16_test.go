package refcache

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// TestToFloat64 checks every binary16 value against x448/float16.
func TestToFloat64(t *testing.T) {
	for h := range 1 << 16 {
		got := ToFloat64(uint16(h))
		want := float64(float16.Frombits(uint16(h)).Float32())
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("%#04x: %v, want %v", h, got, want)
		}
		if math.Signbit(got) != math.Signbit(want) && !math.IsNaN(got) {
			t.Fatalf("%#04x: sign of %v", h, got)
		}
	}
}

// TestFromFloat64 checks rounding against x448/float16 (which rounds
// float32 to nearest even) on values that are exact in float32, where both
// round once: every binary16 value, every midpoint between neighbours, and
// random float32s over the whole range.
func TestFromFloat64(t *testing.T) {
	check := func(x float32) {
		t.Helper()
		got := FromFloat64(float64(x))
		want := float16.Fromfloat32(x).Bits()
		if math.IsNaN(float64(x)) {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN → %#04x", got)
			}
			return
		}
		if got != want {
			t.Fatalf("%v (%#08x): %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
	for h := range 1<<16 - 1 {
		a := float16.Frombits(uint16(h)).Float32()
		check(a)
		b := float16.Frombits(uint16(h + 1)).Float32()
		if !math.IsNaN(float64(a)) && !math.IsNaN(float64(b)) && !math.IsInf(float64(a), 0) && !math.IsInf(float64(b), 0) && math.Signbit(float64(a)) == math.Signbit(float64(b)) {
			mid := float32((float64(a) + float64(b)) / 2)
			check(mid)
			check(math.Nextafter32(mid, float32(math.Inf(1))))
			check(math.Nextafter32(mid, float32(math.Inf(-1))))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1_000_000 {
		check(math.Float32frombits(rng.Uint32()))
	}
	for _, x := range []float32{0, float32(math.Copysign(0, -1)), 65504, 65519.99, 65520, 1e-8, 2.98e-8, 2.99e-8, 6e-8, -1e9} {
		check(x)
	}
}

// TestFromFloat64RoundsOnce: a float64 just above a binary16 midpoint
// rounds up, where going through float32 would round to the midpoint
// first and then to even.
func TestFromFloat64RoundsOnce(t *testing.T) {
	x := 1 + 0x1p-11 + 0x1p-40 // 1 + half an ulp of binary16 + a little
	if got := FromFloat64(x); got != 0x3c01 {
		t.Errorf("FromFloat64(%v) = %#04x, want 0x3c01", x, got)
	}
	if via32 := float16.Fromfloat32(float32(x)).Bits(); via32 != 0x3c00 {
		t.Errorf("the double-rounding example no longer double-rounds: %#04x", via32)
	}
	if got := FromFloat64(-(0x1p-24 + 0x1p-60)); got != 0x8001 {
		t.Errorf("tiny subnormal: %#04x", got)
	}
	if got := FromFloat64(0x1p-25); got != 0 {
		t.Errorf("2^-25 (a tie) rounds to even 0, got %#04x", got)
	}
	if got := FromFloat64(0x1p-25 + 0x1p-70); got != 1 {
		t.Errorf("just above 2^-25: %#04x", got)
	}
	if got := FromFloat64(1e300); got != 0x7c00 {
		t.Errorf("1e300: %#04x", got)
	}
	if got := FromFloat64(5e-324); got != 0 {
		t.Errorf("float64 subnormal: %#04x", got)
	}
}

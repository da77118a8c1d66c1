package bfp_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// rneRef is an independent reference for finite inputs: exact round half to
// even of |x| / Δ, Δ = 2^(E−127−(m−1)), computed with math/big on the value
// of x (not its bit fields), then the encoding rule's saturation and sign
// rules (docs/bfp.md, "Encoding"). It knows nothing of the truncating
// shift, so it agrees with the codec exactly where docs/bfp.md, "Encoding"
// says it must: on BF16 inputs.
func rneRef(f bfp.Format, x uint32, E uint8) uint8 {
	if x>>23&0xFF == 0 {
		return 0 // docs/bfp.md, "Encoding", step 1: zeros and subnormals flush
	}
	v := float64(math.Float32frombits(x))
	m := f.MagBits()
	r := new(big.Float).SetPrec(0).SetFloat64(math.Abs(v)) // exact
	r.SetMantExp(r, -(int(E) - 127 - (m - 1)))             // |x| / Δ, exact
	q := roundHalfEven(r)
	q = min(q, int64(1)<<m-1)
	if q == 0 {
		return 0
	}
	code := uint8(q)
	if v < 0 {
		code |= 1 << m
	}
	return code
}

// roundHalfEven rounds a non-negative exact big.Float to the nearest
// integer, ties to even, capping at 2^20 (far beyond any qmax).
func roundHalfEven(r *big.Float) int64 {
	if r.Cmp(big.NewFloat(1<<20)) > 0 {
		return 1 << 20
	}
	fl, _ := r.Int64() // truncates toward zero = floor for r ≥ 0
	frac := new(big.Float).Sub(r, new(big.Float).SetInt64(fl))
	switch frac.Cmp(big.NewFloat(0.5)) {
	case 1:
		return fl + 1
	case 0:
		return fl + fl&1
	}
	return fl
}

// truncRef is a second reference for arbitrary finite fp32 inputs, written
// in the value domain: A = floor(|x| · 2^(150−E)) (the significand shifted
// by d with the dropped bits discarded, docs/bfp.md, "Encoding", step 3),
// then math.RoundToEven(A / 2^s), saturation and sign. float64 holds every
// step exactly: A < 2^24 and the scalings are powers of two.
func truncRef(f bfp.Format, x uint32, E uint8) uint8 {
	if x>>23&0xFF == 0 {
		return 0
	}
	v := float64(math.Float32frombits(x))
	m := f.MagBits()
	a := math.Floor(math.Ldexp(math.Abs(v), 150-int(E)))
	q := int64(math.RoundToEven(math.Ldexp(a, -(24 - m))))
	q = min(q, int64(1)<<m-1)
	if q == 0 {
		return 0
	}
	code := uint8(q)
	if v < 0 {
		code |= 1 << m
	}
	return code
}

// TestBF16Exhaustive checks every BF16 bit pattern at every shift d = E
// − e(x) = 0..59 in both formats against the exact RNE reference
// (docs/bfp.md, "When the truncating shift matters" and
// "Canonical data and re-encoding"). For speed the reference runs in
// float64 (exact here: |x|/Δ is a 8-bit significand scaled by a power
// of two) and is spot-checked against the math/big one.
func TestBF16Exhaustive(t *testing.T) {
	for _, f := range []bfp.Format{bfp.BFP8, bfp.BFP4} {
		m := f.MagBits()
		qmax := float64(int(1)<<m - 1)
		n := 0
		for b := range 1 << 16 {
			x := uint32(b) << 16
			e := int(x >> 23 & 0xFF)
			if e == 0 || e == 255 {
				continue // flushed / special: covered by TestRuleCases and below
			}
			v := float64(math.Float32frombits(x))
			for d := 0; d < 60 && e+d <= 255; d++ {
				E := uint8(e + d)
				q := math.RoundToEven(math.Abs(v) / math.Ldexp(1, int(E)-127-(m-1)))
				q = min(q, qmax)
				var want uint8
				if q != 0 {
					want = uint8(q)
					if v < 0 {
						want |= 1 << m
					}
				}
				got := bfp.EncodeValue(f, x, E)
				if got != want {
					t.Fatalf("%s: bf16 %#04x, E=%d (d=%d): code %#x, want %#x", f, b, E, d, got, want)
				}
				if b%251 == 0 && d%7 == 0 {
					if big := rneRef(f, x, E); big != want {
						t.Fatalf("%s: float64 and big references disagree at %#04x E=%d: %#x vs %#x", f, b, E, want, big)
					}
				}
				n++
			}
		}
		t.Logf("%s: %d (pattern, shift) pairs", f, n)
	}
	// Zero/subnormal BF16 patterns give 0 at every E; Inf/NaN only occur
	// with E = 255 and follow docs/bfp.md, "Special inputs".
	for _, f := range []bfp.Format{bfp.BFP8, bfp.BFP4} {
		for b := range 1 << 16 {
			x := uint32(b) << 16
			switch x >> 23 & 0xFF {
			case 0:
				for E := range 256 {
					if c := bfp.EncodeValue(f, x, uint8(E)); c != 0 {
						t.Fatalf("%s: subnormal/zero bf16 %#04x E=%d gives %#x", f, b, E, c)
					}
				}
			case 255:
				// Significand 1.mmmmmmm with E = e: q = round(1.m·2^(m−1)),
				// the value-domain rule applied to the field contents.
				mant := float64(x>>16&0x7F)/128 + 1
				q := uint8(math.RoundToEven(mant * float64(int(1)<<(f.MagBits()-1))))
				q = min(q, f.MaxMag())
				want := q | uint8(x>>31)<<f.MagBits()
				if c := bfp.EncodeValue(f, x, 255); c != want {
					t.Fatalf("%s: bf16 %#04x (Inf/NaN): %#x, want %#x", f, b, c, want)
				}
			}
		}
	}
}

// TestFP32Reference compares the codec with the value-domain
// truncation reference on random fp32 patterns and shifts, and checks
// that the truncating rule and exact RNE agree whenever the bits
// dropped by the shift are zero (docs/bfp.md, "Encoding").
func TestFP32Reference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var differ int
	for range 400_000 {
		x := rng.Uint32()
		e := int(x >> 23 & 0xFF)
		if e == 255 {
			continue
		}
		d := rng.IntN(40)
		if rng.IntN(4) == 0 {
			d = rng.IntN(4)
		}
		if e+d > 254 {
			d = 254 - e
		}
		E := uint8(e + d)
		for _, f := range []bfp.Format{bfp.BFP8, bfp.BFP4} {
			got := bfp.EncodeValue(f, x, E)
			if want := truncRef(f, x, E); got != want {
				t.Fatalf("%s: %#08x E=%d: %#x, truncation reference %#x", f, x, E, got, want)
			}
			sig := x&0x7FFFFF | 0x800000
			if d >= 32 || sig&(1<<d-1) == 0 {
				if want := rneRef(f, x, E); got != want && e != 0 {
					t.Fatalf("%s: %#08x E=%d, nothing truncated: %#x, RNE %#x", f, x, E, got, want)
				}
			} else if rneRef(f, x, E) != got {
				differ++
			}
		}
	}
	t.Logf("%d random cases where truncation changed the result", differ)
}

// TestTruncatedTies targets the inputs where the truncating shift
// matters: the shifted significand A sits exactly on a rounding tie while
// the dropped bits are non-zero, so exact RNE would round up and the
// encoding rule rounds to even (the 0x3F200001 vector of
// docs/bfp.md, "Matching tt-metal bit for bit" is one of them).
func TestTruncatedTies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, f := range []bfp.Format{bfp.BFP8, bfp.BFP4} {
		s := uint(24 - f.MagBits())
		var differ int
		for range 20_000 {
			// d ≤ m keeps the tie bit 2^(s−1) inside A = M >> d, whose
			// hidden bit is at 23−d; at d = m the two coincide (A is a
			// lone half: exact RNE gives 1, the encoding rule gives 0).
			d := uint(1 + rng.IntN(f.MagBits()))
			e := uint32(1 + rng.IntN(200))
			a := uint32(1) << (s - 1)
			if hb := 23 - d; hb > s-1 {
				a |= 1<<hb | rng.Uint32()&(1<<hb-1)>>s<<s
			}
			// Non-zero dropped bits in [1, 2^d − 1].
			sig := a<<d | (1 + rng.Uint32()%(1<<d-1))
			x := rng.Uint32()&(1<<31) | e<<23 | sig&0x7FFFFF
			E := uint8(e + uint32(d))
			got := bfp.EncodeValue(f, x, E)
			if want := truncRef(f, x, E); got != want {
				t.Fatalf("%s: %#08x E=%d: %#x, truncation reference %#x", f, x, E, got, want)
			}
			// Tie to even: q = A>>s rounded up only when odd.
			q := a >> s
			q += q & 1
			q = min(q, uint32(f.MaxMag()))
			if uint32(got)&uint32(f.MaxMag()) != q {
				t.Fatalf("%s: %#08x E=%d: q = %d, want %d", f, x, E, got&f.MaxMag(), q)
			}
			if rneRef(f, x, E) != got {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("%s: no case where truncation and exact RNE differ", f)
		}
		t.Logf("%s: %d of 20000 ties differ from exact RNE", f, differ)
	}
}

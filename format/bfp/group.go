package bfp

import "math"

// SharedExponent returns the shared exponent of a group: the largest raw
// biased exponent field ((x >> 23) & 0xFF) among the 16 fp32 bit patterns
// (docs/bfp.md, "Encoding"). Sign and mantissa play no part, zeros and
// subnormals count as 0 and Inf/NaN as 255, and rounding never raises the
// result afterwards.
func SharedExponent(bits *[GroupSize]uint32) uint8 {
	// Two running maxima shorten the dependency chain; max over fields is
	// order-independent, so the split cannot change the result.
	var a, b uint32
	for j := 0; j < GroupSize; j += 2 {
		a = max(a, bits[j]>>23&0xFF)
		b = max(b, bits[j+1]>>23&0xFF)
	}
	return uint8(max(a, b))
}

// EncodeValue returns the element code of the fp32 bit pattern x in a group
// whose shared exponent is e, by the exact rule of docs/bfp.md, "Encoding":
// flush e(x) = 0, shift the 24-bit significand right by e − e(x) dropping the
// shifted-out bits (no sticky bit), round half to even to m bits, saturate at
// 2^m − 1, and never emit a negative zero. The code is sign<<m | q, in the
// low m+1 bits.
//
// The plain packer always passes e = SharedExponent of the group, so e(x) ≤
// e. When e(x) > e (a caller trying a smaller exponent, as the optional
// exponent search does) the value lies beyond the group's range and the
// magnitude saturates at 2^m − 1, which is what a left shift followed by the
// encoding rule's clamp would give. An invalid format gives code 0.
func EncodeValue(f Format, x uint32, e uint8) uint8 {
	m := uint32(f.MagBits())
	if m == 0 {
		return 0
	}
	if ex := x >> 23 & 0xFF; ex > uint32(e) {
		return uint8(x>>31<<m | (1<<m - 1))
	}
	if m == 7 {
		return code8(x, uint32(e))
	}
	return code4(x, uint32(e))
}

// code8 and code4 are the encoding rule (docs/bfp.md, "Encoding") for
// e(x) ≤ E with m = 7 and m = 3. They are written out with constants
// (rather than one function of m) so that they stay within the inliner's
// budget and the per-element work in the tile loops is a handful of
// integer instructions. They are branch-free: real weights mix flushed
// zeros and signs unpredictably.
//
// Step by step, for m magnitude bits, s = 24 − m, qmax = 2^m − 1:
//   - nz = (e(x)+255)>>8 is 0 for a zero or subnormal input (docs/bfp.md, "Encoding", step 1:
//     flushed; it must not pick up a hidden bit) and 1 otherwise;
//   - the significand with its hidden bit is masked by −nz and shifted right
//     by d = E − e(x); Go defines x >> n as 0 for n ≥ 32 on unsigned x,
//     which is the encoding rule's step 3, "A = 0 if d ≥ 32", and the dropped bits are lost;
//   - q = (A + 2^(s−1) − 1 + ((A >> s) & 1)) >> s rounds half to even and
//     min(q, qmax) saturates (steps 4, 5);
//   - (q+qmax)>>m is 1 exactly when q ≥ 1, so a code with q = 0 never
//     carries the sign (step 6: 0x80 / 0x8 would read as −2^128).
func code8(x, E uint32) uint8 {
	const m, s, qmax = 7, 17, 127
	ex := x >> 23 & 0xFF
	a := (x&0x7FFFFF | 0x800000) & -((ex + 0xFF) >> 8) >> (E - ex)
	q := min((a+(1<<(s-1)-1)+(a>>s)&1)>>s, qmax)
	return uint8((x>>31)&((q+qmax)>>m)<<m | q)
}

// code4 is code8 for BFP4 (m = 3).
func code4(x, E uint32) uint8 {
	const m, s, qmax = 3, 21, 7
	ex := x >> 23 & 0xFF
	a := (x&0x7FFFFF | 0x800000) & -((ex + 0xFF) >> 8) >> (E - ex)
	q := min((a+(1<<(s-1)-1)+(a>>s)&1)>>s, qmax)
	return uint8((x>>31)&((q+qmax)>>m)<<m | q)
}

// DecodeValue returns the value of element code in a group with shared
// exponent e: (−1)^sign · q · 2^(e − 127 − (m − 1))
// (docs/bfp.md, "Decoding"), where q is the low m bits of code and
// sign the bit above them; higher bits are ignored. The result is
// exact for every finite value, subnormal ones included. Code 0x80 /
// 0x8, which the encoder never emits, decodes to −0. An invalid format gives 0.
//
// With e = 255 a magnitude q ≥ 2^(m−1) has no finite value. Like
// tt-metal's host unpacker, which renormalises q into the fp32 fields,
// DecodeValue gives ±Inf for q = 2^(m−1) and a NaN otherwise, so that the
// encodings of Inf (0x40 / 0x4) and of the quiet NaN 0x7FC00000 (0x60 /
// 0x6) decode back to those bit patterns (docs/bfp.md, "Special inputs").
// A finite input that the encoding rule rounds up to the level 2^128 in a
// group beside an Inf or NaN (math.MaxFloat32 encodes as 0x40 there)
// therefore decodes to Inf: 2^128 is not a float32.
func DecodeValue(f Format, code, e uint8) float32 {
	m := uint32(f.MagBits())
	if m == 0 {
		return 0
	}
	return math.Float32frombits(decodeBits(uint32(code), uint32(e), m))
}

// decodeBits is DecodeValue on bit patterns. Away from e = 255 it multiplies
// by the exact step, which is exact because q has at most 7 bits and the step
// is a power of two no smaller than 2^−133.
func decodeBits(code, e, m uint32) uint32 {
	q := code & (1<<m - 1)
	sign := code >> m & 1 << 31
	half := uint32(1) << (m - 1)
	if e == 255 && q >= half {
		return sign | 0xFF<<23 | (q-half)<<(24-m)
	}
	v := float32(q) * math.Float32frombits(stepBits(e, m))
	return math.Float32bits(v) | sign
}

// QuantizeGroup encodes one group of 16 values by the plain packer rule: the
// shared exponent of their fp32 bit patterns (docs/bfp.md, "Encoding"), then
// each code by the same page's rule. It uses the bit patterns only, never
// float arithmetic.
func QuantizeGroup(f Format, vals *[GroupSize]float32) (e uint8, codes [GroupSize]uint8) {
	var bits [GroupSize]uint32
	for j, v := range vals {
		bits[j] = math.Float32bits(v)
	}
	return QuantizeGroupBits(f, &bits)
}

// QuantizeGroupBits is QuantizeGroup on fp32 bit patterns. An invalid format
// gives the exponent and all-zero codes.
func QuantizeGroupBits(f Format, bits *[GroupSize]uint32) (e uint8, codes [GroupSize]uint8) {
	e = SharedExponent(bits)
	E := uint32(e)
	switch f {
	case BFP8:
		for j, x := range bits {
			codes[j] = code8(x, E)
		}
	case BFP4:
		for j, x := range bits {
			codes[j] = code4(x, E)
		}
	}
	return e, codes
}

// DequantizeGroup decodes the 16 codes of a group with shared exponent e
// into dst, each by DecodeValue.
func DequantizeGroup(f Format, e uint8, codes *[GroupSize]uint8, dst *[GroupSize]float32) {
	switch f {
	case BFP8:
		decodeGroup8(codes, uint32(e), dst)
	case BFP4:
		for j, c := range codes {
			dst[j] = math.Float32frombits(decodeBits(uint32(c), uint32(e), 3))
		}
	default:
		*dst = [GroupSize]float32{}
	}
}

// mag8 and mag4 map a code (sign bit and magnitude; for BFP4 the low nibble)
// to ±q as float32, so that decoding a finite group is one table load and
// one exact multiplication by Step per element.
var (
	mag8 = func() (t [256]float32) {
		for c := range t {
			t[c] = float32(c & 0x7F)
			if c&0x80 != 0 {
				t[c] = -t[c]
			}
		}
		return t
	}()
	mag4 = func() (t [16]float32) {
		for c := range t {
			t[c] = float32(c & 0x7)
			if c&0x8 != 0 {
				t[c] = -t[c]
			}
		}
		return t
	}()
)

// decodeGroup8 decodes 16 BFP8 codes. -0.0 from the table (code 0x80) times
// a positive step stays −0, as decodeBits gives.
func decodeGroup8(codes *[GroupSize]uint8, e uint32, dst *[GroupSize]float32) {
	if e == 255 {
		for j, c := range codes {
			dst[j] = math.Float32frombits(decodeBits(uint32(c), 255, 7))
		}
		return
	}
	step := math.Float32frombits(stepBits(e, 7))
	for j, c := range codes {
		dst[j] = mag8[c] * step
	}
}

// decodeGroup4 decodes the 8 bytes of a packed BFP4 group: lane 2k in the
// low nibble of byte k, lane 2k+1 in the high nibble
// (docs/lfmq-1.md, "The bytes of one tile").
func decodeGroup4(packed *[GroupSize / 2]uint8, e uint32, dst *[GroupSize]float32) {
	if e == 255 {
		for k, b := range packed {
			dst[2*k] = math.Float32frombits(decodeBits(uint32(b&0xF), 255, 3))
			dst[2*k+1] = math.Float32frombits(decodeBits(uint32(b>>4), 255, 3))
		}
		return
	}
	step := math.Float32frombits(stepBits(e, 3))
	for k, b := range packed {
		dst[2*k] = mag4[b&0xF] * step
		dst[2*k+1] = mag4[b>>4] * step
	}
}

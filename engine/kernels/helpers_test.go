package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// This file holds the test-only BFP packer, written from
// docs/lfmq-1.md, "The bytes of one tile"; docs/bfp.md, "Encoding" and
// docs/lfmq-1.md, "How a BFP tensor is stored" independently of the
// kernels and of package format/bfp, and the random data the tests share.

// packBFP encodes the Hugging Face weight w [out, in] (row-major float32) in
// the lfmq-1 layout: Wᵀ [K=in, N=out] zero-padded to multiples of 32, tiles
// in row-major tile order, each tile encoded by docs/bfp.md, "Encoding".
func packBFP(f Format, out, in int, w []float32) []byte {
	kp, np := (in+31)/32, (out+31)/32
	tb := f.TileBytes()
	buf := make([]byte, kp*np*tb)
	m := uint32(7) // magnitude bits
	if f == BFP4 {
		m = 3
	}
	for kt := range kp {
		for nt := range np {
			tile := buf[(kt*np+nt)*tb:][:tb]
			for g := range 64 {
				face, fr := g/16, g%16
				r := face/2*16 + fr // tile row
				c0 := face % 2 * 16 // first tile column of the group
				var bits [16]uint32
				for j := range 16 {
					k, n := kt*32+r, nt*32+c0+j
					if k < in && n < out {
						bits[j] = math.Float32bits(w[n*in+k])
					}
				}
				var e uint32
				for _, b := range bits {
					e = max(e, b>>23&0xff)
				}
				tile[g] = byte(e)
				for j, b := range bits {
					code := encodeSpec(b, e, m)
					if f == BFP8 {
						tile[64+16*g+j] = code
					} else {
						tile[64+8*g+j/2] |= code << (4 * (j % 2))
					}
				}
			}
		}
	}
	return buf
}

// encodeSpec is docs/bfp.md, "Encoding" for one fp32 bit pattern x in a
// group of shared exponent E with m magnitude bits.
func encodeSpec(x, E, m uint32) byte {
	e := x >> 23 & 0xff
	if e == 0 {
		return 0
	}
	M := x&0x7fffff | 0x800000
	d := E - e
	var A uint32
	if d < 32 {
		A = M >> d
	}
	s := 24 - m
	q := (A + 1<<(s-1) - 1 + (A>>s)&1) >> s
	q = min(q, 1<<m-1)
	if q == 0 {
		return 0
	}
	return byte(x>>31)<<m | byte(q)
}

// decodeSpec64 returns weight W[o][i] of a packed matrix as a float64,
// computed from docs/bfp.md, "Decoding" with math.Ldexp, sharing no
// code with the kernels.
func decodeSpec64(f Format, buf []byte, out, o, i int) float64 {
	np := (out + 31) / 32
	tb := f.TileBytes()
	tile := buf[((i/32)*np+o/32)*tb:]
	r, c := i%32, o%32
	g := (r/16*2+c/16)*16 + r%16
	j := c % 16
	E := int(tile[g])
	var code, m int
	if f == BFP8 {
		code, m = int(tile[64+16*g+j]), 7
	} else {
		code, m = int(tile[64+8*g+j/2]>>(4*(j%2)))&0xf, 3
	}
	q := code & (1<<m - 1)
	v := math.Ldexp(float64(q), E-127-(m-1))
	if code>>m != 0 {
		v = -v
	}
	return v
}

// randTiles returns random but well-formed BFP tile bytes for a matrix:
// exponents near 127 (a few in the subnormal-scale range 0..6, so that
// every decode path is exercised), random codes, and zero codes in padding.
func randTiles(rng *rand.Rand, f Format, out, in int) []byte {
	kp, np := (in+31)/32, (out+31)/32
	tb := f.TileBytes()
	buf := make([]byte, kp*np*tb)
	for kt := range kp {
		for nt := range np {
			tile := buf[(kt*np+nt)*tb:][:tb]
			for g := range 64 {
				switch rng.IntN(50) {
				case 0:
					tile[g] = byte(rng.IntN(7))
				default:
					tile[g] = byte(110 + rng.IntN(25))
				}
			}
			for i := 64; i < tb; i++ {
				tile[i] = byte(rng.Uint32())
			}
			// Zero the codes of padded rows and columns, as a packer does.
			for g := range 64 {
				face, fr := g/16, g%16
				r, c0 := face/2*16+fr, face%2*16
				for j := range 16 {
					if kt*32+r < in && nt*32+c0+j < out {
						continue
					}
					if f == BFP8 {
						tile[64+16*g+j] = 0
					} else {
						tile[64+8*g+j/2] &^= 0xf << (4 * (j % 2))
					}
				}
			}
		}
	}
	return buf
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func randBF16(rng *rand.Rand, n int) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		v[i] = uint16(math.Float32bits(float32(rng.NormFloat64()*0.05)) >> 16)
	}
	return v
}

// randMatrix returns a random valid matrix of format f and shape [out, in].
func randMatrix(t testing.TB, rng *rand.Rand, f Format, out, in int) *Matrix {
	t.Helper()
	var m *Matrix
	var err error
	switch f {
	case F32:
		w := randVec(rng, out*in)
		for i := range w {
			w[i] *= 0.05
		}
		m, err = NewF32(out, in, w)
	case BF16:
		m, err = NewBF16(out, in, randBF16(rng, out*in))
	default:
		m, err = NewBFP(f, out, in, randTiles(rng, f, out, in))
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// withGo runs fn with the Go kernels selected, restoring the SIMD choice.
func withGo(fn func()) {
	saved := useSIMD
	useSIMD = false
	defer func() { useSIMD = saved }()
	fn()
}

// sameBitsNaN is sameBits with any NaN matching any other: NaN payloads
// are unspecified (fma.go).
func sameBitsNaN(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

// sameBits reports the first index where a and b differ bitwise, or -1.
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func checkSame(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if i := sameBits(got, want); i >= 0 {
		if len(got) != len(want) {
			t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
		}
		t.Fatalf("%s: element %d is %v (%#08x), want %v (%#08x)", what, i,
			got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
	}
}

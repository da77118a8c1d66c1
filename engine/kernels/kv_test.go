package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
)

// kvPaths runs fn on the SIMD path (where built) and on the Go reference.
func kvPaths(t *testing.T, fn func(t *testing.T)) {
	t.Run("simd", fn)
	t.Run("go", func(t *testing.T) { withGo(func() { fn(t) }) })
}

// TestWidenBF16Rows: every bfloat16 bit pattern (NaN payloads, ±Inf,
// subnormals, ±0 included) widens to format/dtype's float32, row by row
// at any stride, on every path; widths that are not multiples of 16 take
// the Go path; the guard beyond the rows is left alone.
func TestWidenBF16Rows(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	rng := rand.New(rand.NewPCG(91, 92))
	kvPaths(t, func(t *testing.T) {
		cases := []struct{ d, stride, rows int }{
			{64, 64, 1024}, // the whole bit space, contiguous
			{64, 512, 64},  // one head of eight
			{16, 48, 7},
			{128, 130, 3},
			{40, 40, 5}, // Go path
			{1, 3, 2},
		}
		for _, c := range cases {
			src := all
			if need := (c.rows-1)*c.stride + c.d; need > len(src) {
				t.Fatalf("case %+v: too long", c)
			}
			if c.d != 64 || c.stride != 64 {
				src = make([]uint16, (c.rows-1)*c.stride+c.d)
				for i := range src {
					src[i] = uint16(rng.Uint32())
				}
			}
			dst := make([]float32, c.rows*c.d+1)
			dst[len(dst)-1] = 42
			WidenBF16Rows(dst[:c.rows*c.d], src, c.d, c.stride, c.rows)
			for r := range c.rows {
				for i := range c.d {
					want := math.Float32bits(dtype.BF16ToFloat32(src[r*c.stride+i]))
					if got := math.Float32bits(dst[r*c.d+i]); got != want {
						t.Fatalf("case %+v: row %d [%d] = %#08x, want %#08x", c, r, i, got, want)
					}
				}
			}
			if dst[len(dst)-1] != 42 {
				t.Fatalf("case %+v: wrote past the rows", c)
			}
		}
	})
}

// TestDecodeBFP8Rows: rows of BFP8 groups decode to format/bfp's values
// bit for bit, for every shared exponent (subnormal steps, 255 with its
// Inf and NaN codes) and every code (0x80's −0 included), at any row
// stride and head offset, on every path.
func TestDecodeBFP8Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	kvPaths(t, func(t *testing.T) {
		for _, c := range []struct{ groups, stride, rows int }{
			{4, 4 * 17, 64},
			{4, 32 * 17, 64}, // one head of eight
			{1, 17, 1},
			{8, 8*17 + 3, 5},
		} {
			for _, e255 := range []bool{false, true} {
				src := make([]byte, (c.rows-1)*c.stride+c.groups*17)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				// Cover every exponent and every code across the rows.
				for r := range c.rows {
					for g := range c.groups {
						grp := src[r*c.stride+g*17:][:17]
						grp[0] = byte((r*c.groups + g) % 255)
						if e255 && (r+g)%3 == 0 {
							grp[0] = 255
						}
						for j := 1; j < 17; j++ {
							grp[j] = byte((r*c.groups+g)*16 + j)
						}
					}
				}
				dst := make([]float32, c.rows*c.groups*16+1)
				dst[len(dst)-1] = 42
				DecodeBFP8Rows(dst[:len(dst)-1], src, c.groups, c.stride, c.rows)
				for r := range c.rows {
					for g := range c.groups {
						grp := src[r*c.stride+g*17:][:17]
						var want [16]float32
						bfp.DequantizeGroup(bfp.BFP8, grp[0], (*[16]uint8)(grp[1:]), &want)
						for j, w := range want {
							if got := dst[(r*c.groups+g)*16+j]; math.Float32bits(got) != math.Float32bits(w) {
								t.Fatalf("case %+v: row %d group %d (e=%d) code %#02x = %#08x, want %#08x", c, r, g, grp[0], grp[1+j], math.Float32bits(got), math.Float32bits(w))
							}
						}
					}
				}
				if dst[len(dst)-1] != 42 {
					t.Fatalf("case %+v: wrote past the rows", c)
				}
			}
		}
	})
}

// TestKVReadBounds: a length that does not cover the rows panics with the
// kernel's name instead of reading past the slice.
func TestKVReadBounds(t *testing.T) {
	for name, fn := range map[string]func(){
		"WidenBF16Rows":  func() { WidenBF16Rows(make([]float32, 64), make([]uint16, 63), 64, 64, 1) },
		"DecodeBFP8Rows": func() { DecodeBFP8Rows(make([]float32, 64), make([]byte, 67), 4, 68, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic on a short source", name)
				}
			}()
			fn()
		}()
	}
}

package bfp_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// The vectors in this file are the published ones of
// docs/bfp.md, "Matching tt-metal bit for bit" (from tt-metal's
// test_blockfloat_common.cpp and the hand-worked examples), not outputs of
// this package.

func f32(v float32) uint32 { return math.Float32bits(v) }

func expOf(x uint32) uint8 { return uint8(x >> 23) }

// sameBits compares float32 values bit for bit, so that −0 ≠ +0 and a NaN
// equals the same NaN.
func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

func TestConvertU32ToBfp(t *testing.T) {
	// tt-metal ConvertU32ToBfpTests: BFP8 with E = the input's own exponent.
	tests := []struct {
		in   float32
		code uint8
		want float32
	}{
		{64.75, 0x41, 65}, {-64.75, 0xC1, -65},
		{65.25, 0x41, 65}, {-65.25, 0xC1, -65},
		{64.5, 0x40, 64}, {-64.5, 0xC0, -64}, // tie to even
		{65.5, 0x42, 66}, {-65.5, 0xC2, -66}, // tie to even
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.in), func(t *testing.T) {
			x := f32(tt.in)
			e := expOf(x)
			if got := bfp.EncodeValue(bfp.BFP8, x, e); got != tt.code {
				t.Errorf("EncodeValue = %#x, want %#x", got, tt.code)
			}
			if got := bfp.DecodeValue(bfp.BFP8, tt.code, e); got != tt.want {
				t.Errorf("DecodeValue(%#x) = %v, want %v", tt.code, got, tt.want)
			}
		})
	}
}

func TestRuleCases(t *testing.T) {
	inf, nan := uint32(0x7F800000), uint32(0x7FC00000)
	tests := []struct {
		name string
		f    bfp.Format
		e    uint8
		in   uint32
		code uint8
		want uint32 // decoded bit pattern
	}{
		{"truncating shift", bfp.BFP4, 127, 0x3F200001, 0x2, f32(0.5)},
		{"saturation 1.99", bfp.BFP8, 127, f32(1.99), 0x7F, f32(1.984375)},
		{"saturation 1.9921875", bfp.BFP8, 127, f32(1.9921875), 0x7F, f32(1.984375)},
		{"saturation 1.996", bfp.BFP8, 127, f32(1.996), 0x7F, f32(1.984375)},
		{"saturation -1.996", bfp.BFP8, 127, f32(-1.996), 0xFF, f32(-1.984375)},
		{"saturation 1.87", bfp.BFP4, 127, f32(1.87), 0x7, f32(1.75)},
		{"saturation 1.875", bfp.BFP4, 127, f32(1.875), 0x7, f32(1.75)},
		{"saturation 1.9", bfp.BFP4, 127, f32(1.9), 0x7, f32(1.75)},
		{"saturation 1.999", bfp.BFP4, 127, f32(1.999), 0x7, f32(1.75)},
		{"negative small bfp4", bfp.BFP4, 127, f32(-0.01), 0x0, f32(0)},
		{"negative small bfp8", bfp.BFP8, 127, f32(-0.001), 0x0, f32(0)},
		{"negative far below", bfp.BFP8, 200, f32(-1), 0x0, f32(0)},
		{"+Inf bfp8", bfp.BFP8, 255, inf, 0x40, inf},
		{"+Inf bfp4", bfp.BFP4, 255, inf, 0x4, inf},
		{"-Inf bfp8", bfp.BFP8, 255, inf | 1<<31, 0xC0, inf | 1<<31},
		{"-Inf bfp4", bfp.BFP4, 255, inf | 1<<31, 0xC, inf | 1<<31},
		{"NaN bfp8", bfp.BFP8, 255, nan, 0x60, nan},
		{"NaN bfp4", bfp.BFP4, 255, nan, 0x6, nan},
		{"finite beside Inf", bfp.BFP8, 255, f32(1), 0x0, f32(0)},
		{"2^127 beside Inf", bfp.BFP8, 255, f32(0x1p127), 0x20, f32(0x1p127)},
		// A finite value close enough to 2^128 rounds to the level 2^128,
		// which is the Inf code (docs/bfp.md, "Encoding" applied
		// literally; no special case).
		{"MaxFloat32 beside Inf bfp8", bfp.BFP8, 255, f32(math.MaxFloat32), 0x40, inf},
		{"-1.76·2^127 beside Inf bfp4", bfp.BFP4, 255, 0xff613030, 0xC, inf | 1<<31},
		{"subnormal", bfp.BFP8, 7, 0x007FFFFF, 0x0, f32(0)},
		{"min subnormal bfp4", bfp.BFP4, 1, 0x00000001, 0x0, f32(0)},
		{"+0", bfp.BFP8, 127, 0, 0x0, 0},
		{"-0", bfp.BFP8, 127, 1 << 31, 0x0, 0},
		{"-0 bfp4", bfp.BFP4, 0, 1 << 31, 0x0, 0},
		{"shift 32 drops all", bfp.BFP8, 160, f32(1), 0x0, 0},
		// The search example's E = E_max − 1
		// (docs/bfp.md, "Matching tt-metal bit for bit"): the group maximum
		// lies above the range and saturates.
		{"search bfp4 1.0", bfp.BFP4, 126, f32(1), 0x7, f32(0.875)},
		{"search bfp4 0.13", bfp.BFP4, 126, f32(0.13), 0x1, f32(0.125)},
		{"search bfp8 1.0", bfp.BFP8, 126, f32(1), 0x7F, f32(0.9921875)},
		{"search bfp8 0.008", bfp.BFP8, 126, f32(0.008), 0x01, f32(0.0078125)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bfp.EncodeValue(tt.f, tt.in, tt.e)
			if got != tt.code {
				t.Fatalf("EncodeValue(%s, %#08x, %d) = %#x, want %#x", tt.f, tt.in, tt.e, got, tt.code)
			}
			if v := math.Float32bits(bfp.DecodeValue(tt.f, got, tt.e)); v != tt.want {
				t.Errorf("DecodeValue(%#x, %d) = %#08x, want %#08x", got, tt.e, v, tt.want)
			}
		})
	}
}

func TestSharedExponentSpecials(t *testing.T) {
	tests := []struct {
		name string
		in   []uint32
		want uint8
	}{
		{"zeros", []uint32{0, 1 << 31}, 0},
		{"subnormals do not raise E", []uint32{0x007FFFFF, 0x807FFFFF, 1}, 0},
		{"subnormal beside normal", []uint32{0x007FFFFF, f32(0x1p-120)}, 7},
		{"sign ignored", []uint32{f32(-4), f32(1)}, 129},
		{"Inf", []uint32{f32(1), 0x7F800000}, 255},
		{"NaN", []uint32{0x7FC00000}, 255},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g [bfp.GroupSize]uint32
			copy(g[:], tt.in)
			if got := bfp.SharedExponent(&g); got != tt.want {
				t.Errorf("SharedExponent = %d, want %d", got, tt.want)
			}
			// Every code of an all-zero/subnormal group is 0.
			if tt.want == 0 {
				for _, f := range []bfp.Format{bfp.BFP8, bfp.BFP4} {
					if _, codes := bfp.QuantizeGroupBits(f, &g); codes != [16]uint8{} {
						t.Errorf("%s codes = %x, want all zero", f, codes)
					}
				}
			}
		})
	}
}

// nibble and byteCode read lane j of group g straight from the bytes, with
// the offsets of docs/lfmq-1.md, "The bytes of one tile": 64 + 8g + j/2
// (even lanes low) and 64 + 16g + j.
func nibble(tile []byte, g, j int) uint8 { return tile[64+8*g+j/2] >> (4 * (j % 2)) & 0xF }

func byteCode(tile []byte, g, j int) uint8 { return tile[64+16*g+j] }

// fullGroup is the worked BFP4 group of
// docs/bfp.md, "Worked example: one group of 16 values".
var fullGroup = [16]float32{0.3, -0.2, 0.05, 0.11, -0.3, 0, 0.26, -0.0625, 0.1875, -0.15, 0.4, 0.01, -0.45, 0.33, 0.07, -0.12}

func TestFullGroup(t *testing.T) {
	tests := []struct {
		f       bfp.Format
		codes   [16]uint8
		data    []byte // bytes 64.. of the tile
		decoded [16]float32
	}{
		{
			f:       bfp.BFP4,
			codes:   [16]uint8{0x5, 0xB, 0x1, 0x2, 0xD, 0x0, 0x4, 0x9, 0x3, 0xA, 0x6, 0x0, 0xF, 0x5, 0x1, 0xA},
			data:    []byte{0xB5, 0x21, 0x0D, 0x94, 0xA3, 0x06, 0x5F, 0xA1},
			decoded: [16]float32{0.3125, -0.1875, 0.0625, 0.125, -0.3125, 0, 0.25, -0.0625, 0.1875, -0.125, 0.375, 0, -0.4375, 0.3125, 0.0625, -0.125},
		},
		{
			f:     bfp.BFP8,
			codes: [16]uint8{0x4D, 0xB3, 0x0D, 0x1C, 0xCD, 0x00, 0x43, 0x90, 0x30, 0xA6, 0x66, 0x03, 0xF3, 0x54, 0x12, 0x9F},
			data:  []byte{0x4D, 0xB3, 0x0D, 0x1C, 0xCD, 0x00, 0x43, 0x90, 0x30, 0xA6, 0x66, 0x03, 0xF3, 0x54, 0x12, 0x9F},
		},
	}
	for _, tt := range tests {
		t.Run(tt.f.String(), func(t *testing.T) {
			vals := fullGroup
			e, codes := bfp.QuantizeGroup(tt.f, &vals)
			if e != 125 {
				t.Errorf("E = %d, want 125", e)
			}
			if codes != tt.codes {
				t.Errorf("codes = % X, want % X", codes, tt.codes)
			}
			var dec [16]float32
			bfp.DequantizeGroup(tt.f, e, &codes, &dec)
			if tt.f == bfp.BFP4 && dec != tt.decoded {
				t.Errorf("decoded = %v, want %v", dec, tt.decoded)
			}
			if tt.f == bfp.BFP8 {
				// Decoded values follow from the codes: q/256.
				for j, c := range tt.codes {
					want := float32(c&0x7F) / 256
					if c&0x80 != 0 {
						want = -want
					}
					if dec[j] != want {
						t.Errorf("decoded[%d] = %v, want %v", j, dec[j], want)
					}
				}
			}

			// The same group as group 0 of a tile (row 0, columns 0..15).
			var src [1024]float32
			copy(src[:16], fullGroup[:])
			tile := make([]byte, tt.f.TileBytes())
			if err := bfp.EncodeTile(tt.f, &src, tile); err != nil {
				t.Fatal(err)
			}
			if tile[0] != 0x7D {
				t.Errorf("byte 0 = %#x, want 0x7d", tile[0])
			}
			if got := tile[64 : 64+len(tt.data)]; string(got) != string(tt.data) {
				t.Errorf("data bytes = % X, want % X", got, tt.data)
			}
		})
	}
}

func TestLayout(t *testing.T) {
	// HostBfpPack.FaceOrderPaddingAndNestedCallers: the bit pattern
	// (sign<<31)|(exp<<23)|(lane<<17) has BFP8 magnitude 64 + lane.
	// Each group gets its own exponent and sign pattern so that a
	// misplaced group or lane shows. Positions come from
	// docs/lfmq-1.md, "The bytes of one tile" directly.
	var src [1024]uint32
	var wantExp [64]uint8
	var wantCode [64][16]uint8
	for r := range 32 {
		for c := range 32 {
			face := r/16*2 + c/16
			g, lane := face*16+r%16, c%16
			exp := uint32(60 + g)
			sign := uint32((g + lane) % 2)
			src[r*32+c] = sign<<31 | exp<<23 | uint32(lane)<<17
			wantExp[g] = uint8(exp)
			wantCode[g][lane] = uint8(sign<<7) | uint8(64+lane)
		}
	}
	tile := make([]byte, bfp.BFP8.TileBytes())
	if err := bfp.EncodeTileBits(bfp.BFP8, &src, tile); err != nil {
		t.Fatal(err)
	}
	word := func(k int) uint32 { return binary.LittleEndian.Uint32(tile[4*k:]) }
	for g := range 64 {
		if got := uint8(word(g/4) >> (8 * (g % 4))); got != wantExp[g] {
			t.Errorf("exponent of group %d = %d, want %d", g, got, wantExp[g])
		}
		for l := range 16 {
			if got := uint8(word(16+4*g+l/4) >> (8 * (l % 4))); got != wantCode[g][l] {
				t.Errorf("group %d lane %d = %#x, want %#x", g, l, got, wantCode[g][l])
			}
		}
	}

	// BFP4 nibble placement: magnitude 4 + lane%4 and sign (lane/4)%2
	// make every lane's code distinct within its byte pair.
	var src4 [1024]float32
	for r := range 32 {
		for c := range 32 {
			face := r/16*2 + c/16
			g, lane := face*16+r%16, c%16
			v := float32(4+lane%4) / 4 * float32(math.Ldexp(1, g-40)) // exponent 127+g-40 for q=4..7
			if lane/4%2 == 1 {
				v = -v
			}
			src4[r*32+c] = v
		}
	}
	tile4 := make([]byte, bfp.BFP4.TileBytes())
	if err := bfp.EncodeTile(bfp.BFP4, &src4, tile4); err != nil {
		t.Fatal(err)
	}
	for g := range 64 {
		if tile4[g] != uint8(127+g-40) {
			t.Errorf("bfp4 exponent of group %d = %d, want %d", g, tile4[g], 127+g-40)
		}
		for l := range 16 {
			want := uint8(4+l%4) | uint8(l/4%2)<<3
			if got := nibble(tile4, g, l); got != want {
				t.Errorf("bfp4 group %d lane %d = %#x, want %#x", g, l, got, want)
			}
		}
	}
}

func TestGroupLaneOrigin(t *testing.T) {
	seen := map[[2]int]bool{}
	for r := range 32 {
		for c := range 32 {
			g, j := bfp.GroupLane(r, c)
			if want := (r/16*2+c/16)*16 + r%16; g != want || j != c%16 {
				t.Fatalf("GroupLane(%d,%d) = %d,%d, want %d,%d", r, c, g, j, want, c%16)
			}
			if seen[[2]int{g, j}] {
				t.Fatalf("GroupLane(%d,%d) = %d,%d repeats", r, c, g, j)
			}
			seen[[2]int{g, j}] = true
			r0, c0 := bfp.GroupOrigin(g)
			if r0 != r || c0+j != c {
				t.Fatalf("GroupOrigin(%d) = %d,%d; element (%d,%d) has lane %d", g, r0, c0, r, c, j)
			}
		}
	}
}

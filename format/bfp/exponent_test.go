package bfp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// searchTile is the tile of tt-metal's HostOnlyTest.Bfp4ExponentSearch and
// Bfp8ExponentSearch (docs/bfp.md, "Matching tt-metal bit for bit"): every
// group is [1.0, x, x, …, x].
func searchTile(x float32) *[1024]uint32 {
	var src [1024]uint32
	for k := range src {
		src[k] = f32(x)
		if k%16 == 0 {
			src[k] = f32(1)
		}
	}
	return &src
}

// TestExponentSearchVectors checks the published exponent-search vectors:
// with the search every exponent byte is 126 (first word 0x7e7e7e7e) and
// the group decodes to 0.875 / 0.125 (BFP4) or 0.9921875 / 0.0078125
// (BFP8); without it (RuleMax, and the plain EncodeTile), 0x7f7f7f7f and
// the plain values 1 / 0.25 (BFP4) or 1 / 0.015625 (BFP8). Row-major packing of
// the same 32×32 matrix gives the same bytes as the tile path.
func TestExponentSearchVectors(t *testing.T) {
	tests := []struct {
		f                    bfp.Format
		x                    float32
		rule                 bfp.ExponentRule
		word                 uint32
		decodedOne, decodedX float32
		codeOne, codeX       uint8
		codeBytes            func(tile []byte, g, j int) uint8
	}{
		{bfp.BFP4, 0.13, bfp.RuleSearch, 0x7e7e7e7e, 0.875, 0.125, 0x7, 0x1, nibble},
		{bfp.BFP8, 0.008, bfp.RuleSearch, 0x7e7e7e7e, 0.9921875, 0.0078125, 0x7F, 0x01, byteCode},
		{bfp.BFP4, 0.13, bfp.RuleMax, 0x7f7f7f7f, 1, 0.25, 0x4, 0x1, nibble},
		{bfp.BFP8, 0.008, bfp.RuleMax, 0x7f7f7f7f, 1, 0.015625, 0x40, 0x01, byteCode},
	}
	for _, tt := range tests {
		t.Run(tt.f.String()+"/"+tt.rule.String(), func(t *testing.T) {
			src := searchTile(tt.x)
			tile := make([]byte, tt.f.TileBytes())
			if err := bfp.EncodeTileRule(tt.f, tt.rule, src, tile); err != nil {
				t.Fatal(err)
			}
			if tt.rule == bfp.RuleMax {
				// The plain packer's own entry point (tt-metal's test
				// without the search) writes the same tile.
				var plain [1024]float32
				for k, b := range src {
					plain[k] = math.Float32frombits(b)
				}
				want := make([]byte, len(tile))
				if err := bfp.EncodeTile(tt.f, &plain, want); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(tile, want) {
					t.Error("EncodeTileRule with RuleMax differs from EncodeTile")
				}
			}
			if w := binary.LittleEndian.Uint32(tile); w != tt.word {
				t.Errorf("first exponent word = %#x, want %#x", w, tt.word)
			}
			for g := range 64 {
				if tile[g] != byte(tt.word) {
					t.Fatalf("exponent %d = %#x, want %#x", g, tile[g], byte(tt.word))
				}
				if c := tt.codeBytes(tile, g, 0); c != tt.codeOne {
					t.Fatalf("group %d lane 0: code %#x, want %#x", g, c, tt.codeOne)
				}
				for j := 1; j < 16; j++ {
					if c := tt.codeBytes(tile, g, j); c != tt.codeX {
						t.Fatalf("group %d lane %d: code %#x, want %#x", g, j, c, tt.codeX)
					}
				}
			}
			var dst [1024]float32
			if err := bfp.DecodeTile(tt.f, tile, &dst); err != nil {
				t.Fatal(err)
			}
			for k, v := range dst {
				want := tt.decodedX
				if k%16 == 0 {
					want = tt.decodedOne
				}
				if v != want {
					t.Fatalf("decoded[%d] = %v, want %v", k, v, want)
				}
			}
			// The same values as a row-major Hugging Face weight W [32, 32]
			// whose W_tt = Wᵀ is the tile
			// (docs/lfmq-1.md, "How a BFP tensor is stored").
			w := make([]float32, 1024)
			for r := range 32 {
				for c := range 32 {
					w[c*32+r] = math.Float32frombits(src[r*32+c])
				}
			}
			packed, err := bfp.PackMatrixRule(tt.f, tt.rule, w, 32, 32)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(packed, tile) {
				t.Error("PackMatrixRule differs from EncodeTileRule on the same tile")
			}
			if err := bfp.Canonical(tt.f, packed, 32, 32); err != nil {
				t.Errorf("searched tile not canonical: %v", err)
			}
		})
	}
}

// TestExponentSearchKeepsSpecials: tiles filled with one value whose bytes
// the search must not change (tt-metal's list: ±0, ±1, the smallest
// subnormal and normal, ±Inf, NaN), in both formats.
func TestExponentSearchKeepsSpecials(t *testing.T) {
	for _, x := range []uint32{0, 0x80000000, f32(1), f32(-1), 1, 0x00800000, 0x7F800000, 0xFF800000, 0x7FC00000} {
		for _, f := range []bfp.Format{bfp.BFP4, bfp.BFP8} {
			var src [1024]uint32
			for k := range src {
				src[k] = x
			}
			plain := make([]byte, f.TileBytes())
			searched := make([]byte, f.TileBytes())
			if err := bfp.EncodeTileBits(f, &src, plain); err != nil {
				t.Fatal(err)
			}
			if err := bfp.EncodeTileRule(f, bfp.RuleSearch, &src, searched); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(plain, searched) {
				t.Errorf("%s, all %#08x: the search changed the bytes", f, x)
			}
		}
	}
}

// searchRef is an independent reference for the search on finite inputs:
// codes from truncRef (the value-domain encoding rule, which saturates
// elements above the exponent by itself), values q·2^(E−127−(m−1)) by
// math.Ldexp, errors summed in float64 in lane order, E_max − 1 only when
// strictly better and allowed (E_max − 1 ≥ m, E_max ≠ 255).
func searchRef(f bfp.Format, bits *[16]uint32) (uint8, [16]uint8) {
	var emax uint8
	for _, x := range bits {
		emax = max(emax, uint8(x>>23))
	}
	m := f.MagBits()
	enc := func(E uint8) (codes [16]uint8, sq float64) {
		for j, x := range bits {
			codes[j] = truncRef(f, x, E)
			q := math.Ldexp(float64(codes[j]&(1<<m-1)), int(E)-127-(m-1))
			if codes[j]>>m != 0 {
				q = -q
			}
			d := float64(math.Float32frombits(x)) - q
			sq += d * d
		}
		return codes, sq
	}
	c0, s0 := enc(emax)
	if emax == 255 || int(emax)-1 < m {
		return emax, c0
	}
	if c1, s1 := enc(emax - 1); s1 < s0 {
		return emax - 1, c1
	}
	return emax, c0
}

// TestSearchMatchesReference compares SearchGroupExponent with searchRef on
// random groups spread over 31 binades (as tt-metal's random test), fp32
// and BF16 inputs, and checks that the search never raises a group's error.
func TestSearchMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 16))
	for _, f := range []bfp.Format{bfp.BFP4, bfp.BFP8} {
		lowered := 0
		for n := range 20000 {
			var bits [16]uint32
			for j := range bits {
				v := float32(math.Ldexp(rng.NormFloat64(), n%31-15))
				bits[j] = f32(v)
				if n%2 == 1 {
					bits[j] &^= 0xFFFF // BF16
				}
			}
			e, codes := bfp.SearchGroupExponent(f, &bits)
			we, wcodes := searchRef(f, &bits)
			if e != we || codes != wcodes {
				t.Fatalf("%s group %x: search gives E=%d %x, reference E=%d %x", f, bits, e, codes, we, wcodes)
			}
			pe, pcodes := bfp.QuantizeGroupBits(f, &bits)
			if bfp.GroupSqError(f, &bits, e, &codes) > bfp.GroupSqError(f, &bits, pe, &pcodes) {
				t.Fatalf("%s group %x: the search raised the error", f, bits)
			}
			if e != pe {
				lowered++
			}
		}
		// Both outcomes must occur, or the comparison above tested little.
		if lowered == 0 || lowered == 20000 {
			t.Errorf("%s: the search lowered %d of 20000 groups", f, lowered)
		}
		t.Logf("%s: the search lowered %d of 20000 random groups", f, lowered)
	}
}

// TestRuleMaxIsPlain: RuleMax reproduces the plain packer on every path,
// RuleSearch output stays canonical, and an unknown rule is refused.
func TestRuleMaxIsPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const out, in = 48, 40 // padding in both directions
	w := make([]float32, out*in)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	for _, f := range []bfp.Format{bfp.BFP4, bfp.BFP8} {
		plain, err := bfp.PackMatrix(f, w, out, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := bfp.PackMatrixRule(f, bfp.RuleMax, w, out, in)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("%s: PackMatrixRule(max) differs from PackMatrix", f)
		}
		searched, err := bfp.PackMatrixRule(f, bfp.RuleSearch, w, out, in)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(searched, plain) {
			t.Errorf("%s: the search changed no group of %d Gaussian weights", f, out*in)
		}
		if err := bfp.Canonical(f, searched, out, in); err != nil {
			t.Errorf("%s: searched matrix not canonical: %v", f, err)
		}
		// Rows: EncodeRowRule(max) = EncodeRowBits, and the searched rows
		// assembled by a Builder give PackMatrixRule(search).
		b, _ := bfp.NewBuilder(f, out, in)
		row := make([]uint32, out)
		exps, codes := make([]uint8, bfp.RowGroups(out)), make([]uint8, bfp.PaddedDim(out))
		exps2, codes2 := make([]uint8, bfp.RowGroups(out)), make([]uint8, bfp.PaddedDim(out))
		for k := range in {
			for o := range out {
				row[o] = f32(w[o*in+k])
			}
			if err := bfp.EncodeRowRule(f, bfp.RuleMax, row, exps, codes); err != nil {
				t.Fatal(err)
			}
			if err := bfp.EncodeRowBits(f, row, exps2, codes2); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(exps, exps2) || !bytes.Equal(codes, codes2) {
				t.Fatalf("%s row %d: EncodeRowRule(max) differs from EncodeRowBits", f, k)
			}
			if err := bfp.EncodeRowRule(f, bfp.RuleSearch, row, exps, codes); err != nil {
				t.Fatal(err)
			}
			if err := b.SetRow(k, exps, codes); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(b.Bytes(), searched) {
			t.Errorf("%s: searched rows differ from PackMatrixRule(search)", f)
		}
	}
	_, err := bfp.PackMatrixRule(bfp.BFP4, bfp.ExponentRule(9), w, out, in)
	if !errors.Is(err, bfp.ErrRule) {
		t.Errorf("unknown rule: err = %v", err)
	}
}

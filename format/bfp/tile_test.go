package bfp_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

var formats = []bfp.Format{bfp.BFP8, bfp.BFP4}

// minExp is the smallest shared exponent whose every non-zero level is a
// normal float32, so that encode(decode(t)) == t
// (docs/bfp.md, "Canonical data and re-encoding").
func minExp(f bfp.Format) int { return f.MagBits() }

// randomCanonicalTile builds a tile byte by byte, independently of the
// encoder: each group is either all zero with exponent 0, or has an
// exponent in [minExp, 254] and random codes with at least one magnitude
// ≥ 2^(m−1) (so the exponent is the group maximum's) and no negative zero.
func randomCanonicalTile(rng *rand.Rand, f bfp.Format) []byte {
	tile := make([]byte, f.TileBytes())
	m := f.MagBits()
	for g := range 64 {
		if rng.IntN(10) == 0 {
			continue // all-zero group
		}
		tile[g] = uint8(minExp(f) + rng.IntN(255-minExp(f)))
		var codes [16]uint8
		for j := range codes {
			q := uint8(rng.IntN(1 << m))
			if rng.IntN(4) == 0 {
				q = 0
			}
			if q != 0 && rng.IntN(2) == 0 {
				q |= 1 << m
			}
			codes[j] = q
		}
		top := rng.IntN(16)
		codes[top] = codes[top]&(1<<m) | uint8(1<<(m-1)+rng.IntN(1<<(m-1)))
		putCodes(f, tile, g, &codes)
	}
	return tile
}

// codeAt reads lane j of group g from a tile at the offsets of
// docs/lfmq-1.md, "The bytes of one tile".
func codeAt(f bfp.Format, tile []byte, g, j int) uint8 {
	if f == bfp.BFP8 {
		return byteCode(tile, g, j)
	}
	return nibble(tile, g, j)
}

func putCodes(f bfp.Format, tile []byte, g int, codes *[16]uint8) {
	for j, c := range codes {
		if f == bfp.BFP8 {
			tile[64+16*g+j] = c
		} else {
			tile[64+8*g+j/2] |= c << (4 * (j % 2))
		}
	}
}

func TestTileRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			got := make([]byte, f.TileBytes())
			var dec, dec2 [1024]float32
			for range 300 {
				tile := randomCanonicalTile(rng, f)
				if err := bfp.DecodeTile(f, tile, &dec); err != nil {
					t.Fatal(err)
				}
				if err := bfp.EncodeTile(f, &dec, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, tile) {
					t.Fatalf("encode(decode(t)) != t:\n got % x\nwant % x", got, tile)
				}
				if err := bfp.DecodeTile(f, got, &dec2); err != nil {
					t.Fatal(err)
				}
				if dec2 != dec {
					t.Fatal("decode(encode(decode(t))) != decode(t)")
				}
			}
		})
	}
}

// TestEncodeIdempotent: whatever the input, its encoding is a fixed point of
// encode∘decode. The group maximum always encodes with q ≥ 2^(m−1), so its
// decoded value keeps exponent E; every other non-zero input has e ≥ 1 and
// rounds (never below 2^−126) onto the grid of step Δ, so its decoded value
// is a normal float32 on that grid and re-encodes to the same code. Specials
// too: Inf and NaN codes decode to Inf/NaN patterns that encode back.
func TestEncodeIdempotent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, f := range formats {
		t1 := make([]byte, f.TileBytes())
		t2 := make([]byte, f.TileBytes())
		var src [1024]uint32
		var dec [1024]float32
		for it := range 2000 {
			lo, width := rng.IntN(256), 1+rng.IntN(40)
			for k := range src {
				// Random sign and mantissa; exponents in a band so that
				// groups mix large, flushed, subnormal, tiny and (when the
				// band reaches 255) Inf/NaN inputs.
				src[k] = rng.Uint32()&0x807FFFFF | uint32(min(255, lo+rng.IntN(width)))<<23
				if rng.IntN(20) == 0 {
					src[k] &= 1 << 31 // ±0
				}
			}
			if it%10 == 0 {
				for k := range src {
					src[k] = rng.Uint32() // anything
				}
			}
			if err := bfp.EncodeTileBits(f, &src, t1); err != nil {
				t.Fatal(err)
			}
			if err := bfp.DecodeTile(f, t1, &dec); err != nil {
				t.Fatal(err)
			}
			if err := bfp.EncodeTile(f, &dec, t2); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(t1, t2) {
				t.Fatalf("%s: encode(decode(encode(x))) != encode(x)\n% x\n% x", f, t1, t2)
			}
		}
	}
}

// TestEncodeTileMatchesGroups: the tile encoder and the group API agree,
// group by group, at the positions of
// docs/lfmq-1.md, "The bytes of one tile".
func TestEncodeTileMatchesGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, f := range formats {
		var src [1024]float32
		for k := range src {
			src[k] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(10)-5))
		}
		tile := make([]byte, f.TileBytes())
		if err := bfp.EncodeTile(f, &src, tile); err != nil {
			t.Fatal(err)
		}
		for g := range 64 {
			var vals [16]float32
			for j := range 16 {
				r, c := (g/16)/2*16+g%16, (g/16)%2*16+j
				vals[j] = src[r*32+c]
			}
			e, codes := bfp.QuantizeGroup(f, &vals)
			if tile[g] != e {
				t.Fatalf("%s group %d: exponent %d, group API %d", f, g, tile[g], e)
			}
			for j, c := range codes {
				if got := codeAt(f, tile, g, j); got != c {
					t.Fatalf("%s group %d lane %d: %#x, group API %#x", f, g, j, got, c)
				}
			}
		}
	}
}

// TestDecodeAllCodes decodes every code at every exponent through the tile,
// group and value paths and checks each against q·2^(E−127−(m−1)) computed
// with math.Ldexp in float64 (finite results) or the Inf/NaN patterns of
// DecodeValue's contract (E = 255, q ≥ 2^(m−1)).
func TestDecodeAllCodes(t *testing.T) {
	for _, f := range formats {
		m := f.MagBits()
		ncodes := 1 << (m + 1)
		for E := range 256 {
			for c := range ncodes {
				q := c & (1<<m - 1)
				neg := c>>m&1 == 1
				var want uint32
				if E == 255 && q >= 1<<(m-1) {
					want = 0x7F800000 | uint32(q-1<<(m-1))<<(24-m)
				} else {
					want = math.Float32bits(float32(math.Ldexp(float64(q), E-127-(m-1))))
				}
				if neg {
					want |= 1 << 31
				}
				if got := math.Float32bits(bfp.DecodeValue(f, uint8(c), uint8(E))); got != want {
					t.Fatalf("%s DecodeValue(%#x, %d) = %#08x, want %#08x", f, c, E, got, want)
				}
			}
			// The same codes through DequantizeGroup and DecodeTile.
			for base := 0; base < ncodes; base += 16 {
				var codes [16]uint8
				for j := range codes {
					codes[j] = uint8((base + j) % ncodes)
				}
				var dec [16]float32
				bfp.DequantizeGroup(f, uint8(E), &codes, &dec)
				tile := make([]byte, f.TileBytes())
				tile[37] = uint8(E)
				putCodes(f, tile, 37, &codes)
				var td [1024]float32
				if err := bfp.DecodeTile(f, tile, &td); err != nil {
					t.Fatal(err)
				}
				r, c0 := bfp.GroupOrigin(37)
				for j, c := range codes {
					want := bfp.DecodeValue(f, c, uint8(E))
					if !sameBits(dec[j], want) || !sameBits(td[r*32+c0+j], want) {
						t.Fatalf("%s E=%d code %#x: group %v, tile %v, value %v", f, E, c, dec[j], td[r*32+c0+j], want)
					}
				}
			}
		}
		if got, want := bfp.Step(f, 127), float32(math.Ldexp(1, -(m-1))); got != want {
			t.Errorf("%s Step(127) = %v, want %v", f, got, want)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		f         bfp.Format
		name      string
		tileBytes int
		magBits   int
	}{
		{bfp.BFP8, "bfp8_b", 1088, 7},
		{bfp.BFP4, "bfp4_b", 576, 3},
	}
	for _, tt := range tests {
		if tt.f.String() != tt.name || tt.f.TileBytes() != tt.tileBytes || tt.f.MagBits() != tt.magBits || !tt.f.Valid() {
			t.Errorf("%d: got %q %d %d", tt.f, tt.f.String(), tt.f.TileBytes(), tt.f.MagBits())
		}
		f, err := bfp.ParseFormat(tt.name)
		if err != nil || f != tt.f {
			t.Errorf("ParseFormat(%q) = %v, %v", tt.name, f, err)
		}
	}
	if bfp.BFP8 != 6 || bfp.BFP4 != 7 {
		t.Error("Format values must be tt-metal's DataFormat codes 6 and 7")
	}
	for _, s := range []string{"", "bfp8", "BFP8_B", "bfp8_a", "bfp2_b", "bf16"} {
		_, err := bfp.ParseFormat(s)
		var fe *bfp.FormatError
		if !errors.Is(err, bfp.ErrFormat) || !errors.As(err, &fe) || fe.Name != s {
			t.Errorf("ParseFormat(%q) error = %v", s, err)
		}
	}
	var bad bfp.Format
	if bad.Valid() || bad.TileBytes() != 0 || bad.MagBits() != 0 || bad.String() != "bfp.Format(0)" {
		t.Errorf("zero Format: %v %d %d %q", bad.Valid(), bad.TileBytes(), bad.MagBits(), bad.String())
	}
	// Invalid formats never panic: values give 0, tiles give ErrFormat.
	if bfp.EncodeValue(bad, f32(1), 127) != 0 || bfp.DecodeValue(bad, 0x41, 127) != 0 || bfp.Step(bad, 1) != 0 {
		t.Error("invalid format should give zero codes and values")
	}
	var src [1024]float32
	if err := bfp.EncodeTile(bad, &src, make([]byte, 1088)); !errors.Is(err, bfp.ErrFormat) {
		t.Errorf("EncodeTile(bad) = %v", err)
	}
}

func TestTileLengthErrors(t *testing.T) {
	var src [1024]float32
	var bits [1024]uint32
	for _, f := range formats {
		for _, n := range []int{0, 1, f.TileBytes() - 1, f.TileBytes() + 1, 1088 + 576 - f.TileBytes()} {
			buf := make([]byte, n)
			var le *bfp.LengthError
			if err := bfp.EncodeTile(f, &src, buf); !errors.As(err, &le) || le.Got != n || le.Want != f.TileBytes() {
				t.Errorf("%s EncodeTile len %d: %v", f, n, err)
			}
			if err := bfp.EncodeTileBits(f, &bits, buf); !errors.Is(err, bfp.ErrLength) {
				t.Errorf("%s EncodeTileBits len %d: %v", f, n, err)
			}
			if err := bfp.DecodeTile(f, buf, &src); !errors.Is(err, bfp.ErrLength) {
				t.Errorf("%s DecodeTile len %d: %v", f, n, err)
			}
		}
	}
}

package bfp

import (
	"fmt"
	"math"
)

// Tile geometry (docs/lfmq-1.md, "The bytes of one tile"). Only 32×32 tiles
// exist in lfmq; the smaller tiles tt-metal also supports need exponent
// padding and are deliberately absent.
const (
	// TileDim is the height and width of a tile.
	TileDim = 32
	// TileElems is the number of elements in a tile, TileDim².
	TileElems = TileDim * TileDim
	// GroupSize is the number of elements that share one exponent: one row
	// of a 16×16 face.
	GroupSize = 16
	// GroupsPerTile is the number of exponent groups, and so exponent bytes,
	// at the start of every tile.
	GroupsPerTile = TileElems / GroupSize
)

// Format is a Tenstorrent block-floating-point element format. Its values
// are tt-metal's DataFormat codes (docs/bfp.md, "The two formats"), so
// the zero value is not a valid format and a forgotten initialisation
// cannot silently pick one.
type Format uint8

const (
	// BFP8 is BFP8_b: per element a sign and a 7-bit magnitude, 8.5 bits
	// per weight including the shared 8-bit exponent.
	BFP8 Format = 6
	// BFP4 is BFP4_b: per element a sign and a 3-bit magnitude, 4.5 bits
	// per weight including the shared 8-bit exponent.
	BFP4 Format = 7
)

// Valid reports whether f is BFP8 or BFP4.
func (f Format) Valid() bool { return f == BFP8 || f == BFP4 }

// TileBytes returns the size of one encoded 32×32 tile: 64 exponent bytes
// plus 1024 (BFP8) or 512 (BFP4) code bytes. It returns 0 for an invalid
// format.
func (f Format) TileBytes() int {
	switch f {
	case BFP8:
		return GroupsPerTile + TileElems
	case BFP4:
		return GroupsPerTile + TileElems/2
	}
	return 0
}

// MagBits returns m, the number of magnitude bits of an element code: 7 for
// BFP8, 3 for BFP4, 0 for an invalid format.
func (f Format) MagBits() int {
	switch f {
	case BFP8:
		return 7
	case BFP4:
		return 3
	}
	return 0
}

// MaxMag returns the largest magnitude q an element can hold, 2^m − 1:
// 127 for BFP8, 7 for BFP4, 0 for an invalid format.
func (f Format) MaxMag() uint8 { return uint8(1)<<f.MagBits() - 1 }

// String returns the name the lfmq-1 metadata uses for f: "bfp8_b" or
// "bfp4_b" (docs/bfp.md, "The two formats").
func (f Format) String() string {
	switch f {
	case BFP8:
		return "bfp8_b"
	case BFP4:
		return "bfp4_b"
	}
	return fmt.Sprintf("bfp.Format(%d)", uint8(f))
}

// ParseFormat returns the Format named s, which must be exactly "bfp8_b" or
// "bfp4_b" as lfmq-1 metadata spells them. Any other name, including the
// unsupported "_a" variants, gives a *FormatError.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "bfp8_b":
		return BFP8, nil
	case "bfp4_b":
		return BFP4, nil
	}
	return 0, &FormatError{Name: s}
}

// Step returns Δ = 2^(e − 127 − (m − 1)), the value of magnitude 1 in a
// group with shared exponent e: 2^(e−133) for BFP8, 2^(e−129) for BFP4
// (docs/bfp.md, "Decoding", "Error bounds"). Every Δ is exactly
// representable in float32 (as a subnormal when e is below 7 for BFP8 or 3
// for BFP4), and q·Δ is exact for every magnitude q unless it overflows, so
// a decoder may multiply by Step once per group instead of calling
// math.Ldexp per element. Step returns 0 for an invalid format.
func Step(f Format, e uint8) float32 {
	m := uint32(f.MagBits())
	if m == 0 {
		return 0
	}
	return math.Float32frombits(stepBits(uint32(e), m))
}

// stepBits builds the float32 bit pattern of 2^(e−126−m) directly. The biased
// exponent of that power of two is e+1−m; when it is below 1 the power is a
// subnormal whose single set bit sits at position (e−126−m)+149 = e+23−m.
func stepBits(e, m uint32) uint32 {
	if e+1 > m {
		return (e + 1 - m) << 23
	}
	return 1 << (e + 23 - m)
}

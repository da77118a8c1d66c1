package bfp

import (
	"bytes"
	"fmt"
	"math"
)

// This file holds the lfmq-1 matrix convention of
// docs/lfmq-1.md, "How a BFP tensor is stored": a Hugging Face weight W
// [out, in] is stored as ttnn's matmul operand W_tt = Wᵀ [K=in, N=out],
// zero-padded to Kp×Np (multiples of 32) and cut into 32×32 tiles in
// row-major tile order. Element W[o][i] is W_tt[i][o]: tile (i/32)·(Np/32)
// + o/32, tile row i%32, tile column o%32.

// PaddedDim returns n rounded up to a multiple of TileDim (Kp for n = in,
// Np for n = out). It returns 0 for n ≤ 0.
func PaddedDim(n int) int {
	if n <= 0 {
		return 0
	}
	return ((n-1)/TileDim + 1) * TileDim
}

// grid validates the logical shape [out, in] and returns the tile grid:
// kt = Kp/32 tile rows and nt = Np/32 tile columns. A shape is valid when
// both dimensions are positive and the packed size, even in the larger BFP8
// format, fits in an int; then out·in fits as well.
func grid(out, in int) (kt, nt int, err error) {
	if out <= 0 || in <= 0 {
		return 0, 0, &ShapeError{Out: out, In: in}
	}
	kt, nt = (in-1)/TileDim+1, (out-1)/TileDim+1
	if kt > math.MaxInt/BFP8.TileBytes()/nt {
		return 0, 0, &ShapeError{Out: out, In: in}
	}
	return kt, nt, nil
}

// CheckShape returns a *ShapeError unless [out, in] is a shape the codec can
// pack: both positive and the packed size representable as an int.
func CheckShape(out, in int) error {
	_, _, err := grid(out, in)
	return err
}

// NumTiles returns the number of tiles of a weight [out, in]:
// (Kp/32)·(Np/32). It returns 0 for a shape CheckShape rejects.
func NumTiles(out, in int) int {
	kt, nt, err := grid(out, in)
	if err != nil {
		return 0
	}
	return kt * nt
}

// PackedSize returns the number of bytes of a weight [out, in] packed in
// format f: NumTiles(out, in)·f.TileBytes(). It returns 0 for an invalid
// format or a shape CheckShape rejects.
func PackedSize(f Format, out, in int) int {
	return NumTiles(out, in) * f.TileBytes()
}

// TileOf returns where W[o][i] of a weight with out rows lives in the
// packed tile stream: tile index (i/32)·(Np/32) + o/32, tile row i%32 and
// tile column o%32 (docs/lfmq-1.md, "How a BFP tensor is stored").
// Arguments are not checked: o ∈ [0, out), i ≥ 0. Within the tile,
// GroupLane(row, col) gives the exponent group and lane.
func TileOf(o, i, out int) (tile, row, col int) {
	nt := (out + TileDim - 1) / TileDim
	return i/TileDim*nt + o/TileDim, i % TileDim, o % TileDim
}

// Element inverts TileOf: it returns the weight indices (o, i) of tile row
// row and tile column col of the given tile. Padding positions give o ≥ out
// or i ≥ in; the caller checks. out ≤ 0 gives (−1, −1).
func Element(tile, row, col, out int) (o, i int) {
	if out <= 0 {
		return -1, -1
	}
	nt := (out + TileDim - 1) / TileDim
	return tile%nt*TileDim + col, tile/nt*TileDim + row
}

// PackMatrix packs the row-major Hugging Face weight w [out, in] in
// format f by the lfmq-1 convention
// (docs/lfmq-1.md, "How a BFP tensor is stored"): transposed to [in,
// out], zero-padded, tiled in row-major tile order, each tile encoded
// by EncodeTileBits. The result has length PackedSize(f, out, in).
func PackMatrix(f Format, w []float32, out, in int) ([]byte, error) {
	return packTiles(f, len(w), out, in, func(buf *[TileElems]uint32, kt, nt int) {
		gatherF32(buf, w, out, in, kt, nt)
	})
}

// PackMatrixBF16 is PackMatrix for BF16 weights given as bit patterns. Each
// is widened exactly to fp32 (bits << 16, docs/bfp.md, "Encoding"), so the
// result equals PackMatrix of the widened values.
func PackMatrixBF16(f Format, w []uint16, out, in int) ([]byte, error) {
	return packTiles(f, len(w), out, in, func(buf *[TileElems]uint32, kt, nt int) {
		gatherBF16(buf, w, out, in, kt, nt)
	})
}

// packTiles checks the shape against n weights, then encodes every tile into
// its place in tile-index order; gather fills one tile's fp32 bit patterns
// (padding zero).
func packTiles(f Format, n, out, in int, gather func(buf *[TileElems]uint32, kt, nt int)) ([]byte, error) {
	return packTilesRule(f, RuleMax, n, out, in, gather)
}

// packTilesRule is packTiles with the exponents chosen by r, which is valid.
func packTilesRule(f Format, r ExponentRule, n, out, in int, gather func(buf *[TileElems]uint32, kt, nt int)) ([]byte, error) {
	kt, nt, err := checkMatrix(f, n, out, in, "weights")
	if err != nil {
		return nil, err
	}
	tb := f.TileBytes()
	data := make([]byte, kt*nt*tb)
	var buf [TileElems]uint32
	// Tile by tile down a column of tiles (32 rows of w, read whole),
	// rather than in tile-index order, which would read a 128-byte piece
	// of every row of w, each on its own page, before the next piece.
	for n := range nt {
		for k := range kt {
			t := k*nt + n
			gather(&buf, k, n)
			encodeTileRule(f, r, &buf, data[t*tb:(t+1)*tb])
		}
	}
	return data, nil
}

// UnpackMatrix decodes data, a weight [out, in] packed by the lfmq-1
// convention in format f, back to row-major [out, in] float32 values. data
// must have length PackedSize(f, out, in). Padding positions are not read
// back; Canonical checks that they are zero.
func UnpackMatrix(f Format, data []byte, out, in int) ([]float32, error) {
	kt, nt, err := checkMatrix(f, -1, out, in, "")
	if err != nil {
		return nil, err
	}
	tb := f.TileBytes()
	if len(data) != kt*nt*tb {
		return nil, &LengthError{What: "packed data", Got: len(data), Want: kt * nt * tb}
	}
	w := make([]float32, out*in)
	var buf [TileElems]float32
	// Down a column of tiles at a time, so that 32 rows of w are written
	// whole (see packTilesRule).
	for n := range nt {
		for k := range kt {
			t := k*nt + n
			decodeTile(f, data[t*tb:(t+1)*tb], &buf)
			scatter(w, &buf, out, in, k, n)
		}
	}
	return w, nil
}

// Canonical reports whether data is exactly what the plain packer produces
// for the values it decodes to: PackMatrix(UnpackMatrix(data)) == data.
// That is the property GPTQ output must have (docs/gptq.md §1). It fails,
// with a *NonCanonicalError naming the first differing tile and byte, on
// non-zero padding, a code 0x80/0x8, an exponent that is not its group's
// maximum, or a group too small for its values to survive decoding (E < 7
// for BFP8, E < 3 for BFP4,
// docs/bfp.md, "Canonical data and re-encoding"). Shape and length errors
// are as UnpackMatrix's.
//
// It runs tile by tile: a tile's bytes depend only on the tile's own
// values, so decoding one tile, clearing its padding (which UnpackMatrix
// does not read back and PackMatrix zeroes) and encoding it again gives
// the same bytes as the round trip through a whole matrix, without one.
func Canonical(f Format, data []byte, out, in int) error {
	kt, nt, err := checkMatrix(f, -1, out, in, "")
	if err != nil {
		return err
	}
	tb := f.TileBytes()
	if len(data) != kt*nt*tb {
		return &LengthError{What: "packed data", Got: len(data), Want: kt * nt * tb}
	}
	var dec [TileElems]float32
	var bits [TileElems]uint32
	re := make([]byte, tb)
	for t := range kt * nt {
		tile := data[t*tb : (t+1)*tb]
		decodeTile(f, tile, &dec)
		rows, cols := span(out, in, t/nt, t%nt)
		for r := range TileDim {
			for c := range TileDim {
				v := uint32(0)
				if r < rows && c < cols {
					v = math.Float32bits(dec[r*TileDim+c])
				}
				bits[r*TileDim+c] = v
			}
		}
		encodeTile(f, &bits, re)
		if bytes.Equal(re, tile) {
			continue
		}
		for k := range re {
			if re[k] != tile[k] {
				return &NonCanonicalError{Format: f, Tile: t, Offset: k, Got: tile[k], Want: re[k]}
			}
		}
	}
	return nil
}

// NonCanonicalError reports the first byte of a packed matrix that differs
// from what the plain packer makes of the decoded values.
type NonCanonicalError struct {
	Format Format
	Tile   int   // tile index
	Offset int   // byte offset within the tile: < 64 is an exponent
	Got    uint8 // the stored byte
	Want   uint8 // the canonical byte
}

// Error returns the message, naming the tile and byte.
func (e *NonCanonicalError) Error() string {
	what := "code byte"
	if e.Offset < GroupsPerTile {
		what = "exponent"
	}
	return fmt.Sprintf("bfp: %s data not canonical: tile %d, %s at offset %d is %#x, want %#x",
		e.Format, e.Tile, what, e.Offset, e.Got, e.Want)
}

// Is reports whether target is ErrNotCanonical.
func (e *NonCanonicalError) Is(target error) bool { return target == ErrNotCanonical }

// checkMatrix validates format and shape, and n (the length of the input
// slice named what) unless n < 0.
func checkMatrix(f Format, n, out, in int, what string) (kt, nt int, err error) {
	if err := checkFormat(f); err != nil {
		return 0, 0, err
	}
	kt, nt, err = grid(out, in)
	if err != nil {
		return 0, 0, err
	}
	if n >= 0 && n != out*in {
		return 0, 0, &LengthError{What: what, Got: n, Want: out * in}
	}
	return kt, nt, nil
}

// span returns how many rows (k = in direction) and columns (n = out
// direction) of tile (kt, nt) are real weights rather than padding.
func span(out, in, kt, nt int) (rows, cols int) {
	return min(TileDim, in-kt*TileDim), min(TileDim, out-nt*TileDim)
}

// gatherF32 fills buf with tile (kt, nt) of W_tt as fp32 bit patterns,
// zeros in the padding. It reads each weight row o once, contiguously,
// and writes it as tile column o%32: the transpose of
// docs/lfmq-1.md, "How a BFP tensor is stored", step 2. The indices are
// masked with &31, which changes nothing (r, c < 32) but lets the
// compiler drop the bounds checks.
func gatherF32(buf *[TileElems]uint32, w []float32, out, in, kt, nt int) {
	rows, cols := span(out, in, kt, nt)
	if rows < TileDim || cols < TileDim {
		*buf = [TileElems]uint32{}
	}
	for c := range cols {
		o := nt*TileDim + c
		seg := w[o*in+kt*TileDim : o*in+kt*TileDim+rows]
		for r, v := range seg {
			buf[(r&31)*TileDim+(c&31)] = math.Float32bits(v)
		}
	}
}

// gatherBF16 is gatherF32 for BF16 bit patterns, widened by << 16.
func gatherBF16(buf *[TileElems]uint32, w []uint16, out, in, kt, nt int) {
	rows, cols := span(out, in, kt, nt)
	if rows < TileDim || cols < TileDim {
		*buf = [TileElems]uint32{}
	}
	for c := range cols {
		o := nt*TileDim + c
		seg := w[o*in+kt*TileDim : o*in+kt*TileDim+rows]
		for r, v := range seg {
			buf[(r&31)*TileDim+(c&31)] = uint32(v) << 16
		}
	}
}

// scatter writes the real (non-padding) elements of decoded tile (kt, nt)
// into the row-major weight w [out, in].
func scatter(w []float32, buf *[TileElems]float32, out, in, kt, nt int) {
	rows, cols := span(out, in, kt, nt)
	for c := range cols {
		o := nt*TileDim + c
		seg := w[o*in+kt*TileDim : o*in+kt*TileDim+rows]
		for r := range seg {
			seg[r] = buf[(r&31)*TileDim+(c&31)]
		}
	}
}

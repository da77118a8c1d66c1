package kernels

import (
	"errors"
	"fmt"
	"math"
	"runtime"
)

// Format is the element format of a Matrix's weights.
type Format uint8

// The weight formats a Matrix can hold.
const (
	// F32 weights are float32 in the Hugging Face layout [out, in], row-major.
	F32 Format = iota + 1
	// BF16 weights are bfloat16 bit patterns in the Hugging Face layout
	// [out, in], row-major; the float32 value is bits<<16.
	BF16
	// BFP8 weights are Tenstorrent BFP8_b tiles in the lfmq-1 layout
	// (docs/lfmq-1.md, "The bytes of one tile" and
	// "How a BFP tensor is stored"): Wᵀ [K=in, N=out] zero-padded to
	// multiples of 32, 32×32 tiles of 1088 bytes in row-major tile order.
	BFP8
	// BFP4 weights are Tenstorrent BFP4_b tiles in the lfmq-1 layout, 576
	// bytes per tile.
	BFP4
)

// TileSize is the side of a BFP tile.
const TileSize = 32

// String returns the format's name as the lfmq-1 manifest spells it.
func (f Format) String() string {
	switch f {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case BFP8:
		return "bfp8_b"
	case BFP4:
		return "bfp4_b"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// tiled reports whether f is a BFP format, stored in 32×32 tiles.
func (f Format) tiled() bool { return f.TileBytes() > 0 }

// TileBytes returns the bytes of one 32×32 tile for BFP8 (1088) and BFP4
// (576), and 0 for the formats that are not tiled.
func (f Format) TileBytes() int {
	switch f {
	case BFP8:
		return 1088
	case BFP4:
		return 576
	}
	return 0
}

// ErrMatrix is the error that every Matrix validation error matches with
// errors.Is.
var ErrMatrix = errors.New("kernels: invalid matrix")

// MatrixError describes why a Matrix is invalid: which format and shape, which
// field, and the length that field needed against the one it had.
type MatrixError struct {
	Format  Format
	Out, In int
	Field   string // "shape", "format", or the data field: "F32", "BF16", "BFP"
	Want    int    // the required length (or -1 when the field must be empty)
	Got     int
	Reason  string
}

// Error implements error.
func (e *MatrixError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("kernels: %s matrix [%d, %d]: %s: %s", e.Format, e.Out, e.In, e.Field, e.Reason)
	}
	return fmt.Sprintf("kernels: %s matrix [%d, %d]: %s has %d elements, want %d", e.Format, e.Out, e.In, e.Field, e.Got, e.Want)
}

// Is reports whether target is ErrMatrix.
func (e *MatrixError) Is(target error) bool { return target == ErrMatrix }

// Matrix is a linear layer's weight W with the logical Hugging Face shape
// [Out, In], so that y = W·x maps In inputs to Out outputs. Exactly one of
// the data slices is set, the one Format names. The slices are only read,
// never written, so they may alias memory-mapped checkpoint bytes.
//
// A Matrix must pass Validate (the New* constructors call it) before any
// product method is used: the hot paths do not re-check lengths of the
// weight data, only of the vectors they are given.
type Matrix struct {
	Format  Format
	Out, In int
	F32     []float32 // F32: Out*In values, row-major [Out, In]
	BF16    []uint16  // BF16: Out*In bit patterns, row-major [Out, In]
	BFP     []byte    // BFP8, BFP4: Tiles()*Format.TileBytes() bytes
}

// maxDim bounds Out and In so that every index and byte offset fits an int
// on 32-bit platforms too; real LFM2-MoE dimensions are below 2^17.
const maxDim = 1 << 24

// NewF32 returns a validated F32 Matrix over w, which it does not copy.
func NewF32(out, in int, w []float32) (*Matrix, error) {
	m := &Matrix{Format: F32, Out: out, In: in, F32: w}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// NewBF16 returns a validated BF16 Matrix over w, which it does not copy.
func NewBF16(out, in int, w []uint16) (*Matrix, error) {
	m := &Matrix{Format: BF16, Out: out, In: in, BF16: w}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// NewBFP returns a validated BFP8 or BFP4 Matrix with logical shape
// [out, in] over the packed tiles, which it does not copy.
func NewBFP(f Format, out, in int, tiles []byte) (*Matrix, error) {
	m := &Matrix{Format: f, Out: out, In: in, BFP: tiles}
	if !f.tiled() {
		return nil, &MatrixError{Format: f, Out: out, In: in, Field: "format", Reason: "NewBFP needs BFP8 or BFP4"}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate checks that the format is known, the shape is non-negative and
// bounded, and exactly the data slice of the format is set with the length
// the shape needs. It returns a *MatrixError (matching ErrMatrix) otherwise.
func (m *Matrix) Validate() error {
	bad := func(field string, want, got int, reason string) error {
		return &MatrixError{Format: m.Format, Out: m.Out, In: m.In, Field: field, Want: want, Got: got, Reason: reason}
	}
	if m.Out < 0 || m.In < 0 || m.Out > maxDim || m.In > maxDim {
		return bad("shape", 0, 0, fmt.Sprintf("dimensions must be in [0, %d]", maxDim))
	}
	// Every element count and byte offset (4 bytes per F32 weight, at most
	// 1.07 per padded BFP weight) must fit an int, also on 32-bit platforms.
	if padded := int64(m.kTiles()*TileSize) * int64(m.nTiles()*TileSize); padded > math.MaxInt/4 {
		return bad("shape", 0, 0, "too many elements for this platform")
	}
	type field struct {
		name string
		n    int
	}
	fields := []field{{"F32", len(m.F32)}, {"BF16", len(m.BF16)}, {"BFP", len(m.BFP)}}
	var want string
	var n int
	switch m.Format {
	case F32:
		want, n = "F32", m.Out*m.In
	case BF16:
		want, n = "BF16", m.Out*m.In
	case BFP8, BFP4:
		want, n = "BFP", m.Tiles()*m.Format.TileBytes()
	default:
		return bad("format", 0, 0, "unknown format")
	}
	for _, f := range fields {
		if f.name == want {
			if f.n != n {
				return bad(f.name, n, f.n, "")
			}
		} else if f.n != 0 {
			return bad(f.name, 0, f.n, "must be empty for this format")
		}
	}
	return nil
}

// Tiles returns the number of 32×32 tiles of a BFP matrix: (Kp/32)·(Np/32)
// with K = In and N = Out padded to multiples of 32.
func (m *Matrix) Tiles() int { return m.kTiles() * m.nTiles() }

func (m *Matrix) kTiles() int { return (m.In + TileSize - 1) / TileSize }
func (m *Matrix) nTiles() int { return (m.Out + TileSize - 1) / TileSize }

// WeightBytes returns the bytes of weight data the matrix reads per product.
func (m *Matrix) WeightBytes() int {
	switch m.Format {
	case F32:
		return 4 * m.Out * m.In
	case BF16:
		return 2 * m.Out * m.In
	}
	return len(m.BFP)
}

// At returns the weight W[o][i] as the kernels use it: the float32 value,
// decoded exactly for BFP (q·2^(E−133) for BFP8, q·2^(E−129) for BFP4). It
// is meant for tests and debugging, not for loops over the matrix. It
// panics if (o, i) is out of range.
func (m *Matrix) At(o, i int) float32 {
	if o < 0 || o >= m.Out || i < 0 || i >= m.In {
		panic(fmt.Sprintf("kernels: At(%d, %d) outside matrix [%d, %d]", o, i, m.Out, m.In))
	}
	switch m.Format {
	case F32:
		return m.F32[o*m.In+i]
	case BF16:
		return math.Float32frombits(uint32(m.BF16[o*m.In+i]) << 16)
	case BFP8, BFP4:
		c := o % TileSize
		return decodeBFP(m.Format, m.tile(i/TileSize, o/TileSize), tileGroup(i%TileSize, c), c%16)
	}
	panic("kernels: At on a matrix of unknown format")
}

// tile returns the BFP tile at tile row kt (inputs 32kt…) and tile column
// nt (outputs 32nt…).
func (m *Matrix) tile(kt, nt int) []byte {
	tb := m.Format.TileBytes()
	return m.BFP[(kt*m.nTiles()+nt)*tb:][:tb]
}

// tileGroup returns the exponent group of a tile that holds row r, column
// c (docs/bfp.md): 16 groups of 16 columns for rows 0–15, left then right
// of column 16, then the same for rows 16–31.
func tileGroup(r, c int) int { return (r/16*2+c/16)*16 + r%16 }

// decodeBFP returns lane j of group g of one tile, decoded exactly. It is
// the spec-literal decoder (docs/bfp.md, "Decoding") the reference kernels
// are built on. The "negative zero" codes 0x80 and 0x8, which no packer
// emits, decode to +0 as the formula says (the Tensix unpacker would read
// −2^128); every kernel agrees, including on the sign of that zero.
func decodeBFP(f Format, tile []byte, g, j int) float32 {
	e := tile[g]
	var neg bool
	var q uint8
	var scale float32
	if f == BFP8 {
		code := tile[64+16*g+j]
		neg, q, scale = code&0x80 != 0, code&0x7f, bfp8Scale[e]
	} else {
		code := tile[64+8*g+j/2]
		if j%2 == 1 {
			code >>= 4
		}
		neg, q, scale = code&0x8 != 0, code&0x7, bfp4Scale[e]
	}
	v := float32(q) * scale // exact: q has at most 7 bits, scale is 2^n
	if neg && q != 0 {
		v = -v
	}
	return v
}

// bfp8Scale[E] = 2^(E−133) and bfp4Scale[E] = 2^(E−129): the value of one
// magnitude step of a group with shared exponent E
// (docs/bfp.md, "Decoding"). Every entry is an exact float32 (subnormal for
// the smallest E), so q·scale is the exact decoded value; for E = 255
// (groups holding Inf or NaN) large q overflow to ±Inf, which is what such a
// group means.
var bfp8Scale, bfp4Scale [256]float32

func init() {
	for e := range 256 {
		bfp8Scale[e] = float32(math.Ldexp(1, e-133))
		bfp4Scale[e] = float32(math.Ldexp(1, e-129))
	}
}

// ScaleTable returns the exact float32 step of every shared exponent of a
// BFP format (bfp8Scale or bfp4Scale): what a device decoding the same
// tiles must use, uploaded rather than recomputed.
func ScaleTable(f Format) [256]float32 {
	if f == BFP8 {
		return bfp8Scale
	}
	return bfp4Scale
}

// Row writes row o of m, In values decoded exactly, into dst: an
// embedding's row for a token, or a drafter's Markov row for the previous
// token.
func (m *Matrix) Row(o int, dst []float32) {
	dst = dst[:m.In]
	switch m.Format {
	case BF16:
		for i, b := range m.BF16[o*m.In:][:m.In] {
			dst[i] = math.Float32frombits(uint32(b) << 16)
		}
	case F32:
		copy(dst, m.F32[o*m.In:][:m.In])
	default:
		// Row o is column o%32 of one tile in every tile row: each tile
		// is found once, not once a value as At finds it, and its lines
		// are loaded before they are decoded. A decode step's embedding
		// row (BenchmarkMatrixRow, a row of 2,048 from memory) took 45 to
		// 46 us of serial time value by value, 22 to 25 us so (three
		// alternating pairs).
		if o < 0 || o >= m.Out {
			panic(fmt.Sprintf("kernels: Row(%d) outside matrix [%d, %d]", o, m.Out, m.In))
		}
		tb, c := m.Format.TileBytes(), o%TileSize
		// The lines the row reads, loaded first in a tight loop: the
		// loads are independent, so many misses are in flight at once,
		// where the decoding loop's longer body keeps few in flight.
		// Per tile: the exponents, and the two runs of 16 groups that
		// hold column c (rows 0-15 and 16-31; tileGroup), of 16 codes
		// each, 256 bytes in BFP8 and 128 in BFP4.
		run := 16 * (tb - 64) / 64
		lo := 64 + c/16*run
		var touch byte
		for kt := range m.kTiles() {
			tile := m.tile(kt, o/TileSize)
			touch ^= tile[0]
			for _, r0 := range [2]int{lo, lo + 2*run} {
				for off := r0; off < r0+run; off += 64 {
					touch ^= tile[off]
				}
				touch ^= tile[r0+run-1]
			}
		}
		runtime.KeepAlive(touch)
		for kt := range m.kTiles() {
			tile := m.tile(kt, o/TileSize)
			for r := range min(TileSize, m.In-kt*TileSize) {
				dst[kt*TileSize+r] = decodeBFP(m.Format, tile, tileGroup(r, c), c%16)
			}
		}
	}
}

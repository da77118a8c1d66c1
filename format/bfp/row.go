package bfp

import "math"

// Row-level API for GPTQ (docs/gptq.md §1, §4). GPTQ quantizes one input
// index k of the Hugging Face weight W [out, in] per step: row k of W_tt
// [in, out]. Every exponent group lies inside one such row (16 consecutive
// output channels at one input index), so a row is quantized on its own,
// in any order, and the rows are assembled into tiles afterwards.
//
// A row with out columns is handled in its padded width Np = PaddedDim(out):
// it has RowGroups(out) = Np/16 groups, group G covering columns
// 16G..16G+15. Its encoding is two slices: exps[G], the shared exponent of
// group G, and codes[n], the element code of column n (sign<<m | q, one
// byte per element even for BFP4), with zero codes in the padding columns
// n ≥ out. EncodeRow produces them, DecodeRow gives the exact values the
// device will read (GPTQ's error feedback needs them), and a Builder places
// them in the tile stream.

// RowGroups returns Np/16, the number of exponent groups in one row of W_tt
// for a weight with out output channels. It returns 0 for out ≤ 0.
func RowGroups(out int) int { return PaddedDim(out) / GroupSize }

// EncodeRow encodes one row of W_tt (len(row) = out ≥ 1 values) by the
// plain packer rule, as if zero-padded to Np = PaddedDim(out): exps must
// have length Np/16 and codes length Np. The result is byte-for-byte what
// PackMatrix stores for that row.
func EncodeRow(f Format, row []float32, exps, codes []uint8) error {
	if err := checkRow(f, len(row), len(exps), len(codes), "row"); err != nil {
		return err
	}
	var bits [GroupSize]uint32
	for G := range exps {
		n0 := G * GroupSize
		bits = [GroupSize]uint32{}
		if n0 < len(row) {
			for j, v := range row[n0:min(n0+GroupSize, len(row))] {
				bits[j] = math.Float32bits(v)
			}
		}
		exps[G], *(*[GroupSize]uint8)(codes[n0:]) = QuantizeGroupBits(f, &bits)
	}
	return nil
}

// EncodeRowBits is EncodeRow for fp32 bit patterns (BF16 widened by << 16).
func EncodeRowBits(f Format, row []uint32, exps, codes []uint8) error {
	return EncodeRowRule(f, RuleMax, row, exps, codes)
}

// DecodeRow decodes an encoded row into dst (len(dst) = out ≥ 1), each value
// by DecodeValue; exps and codes have the lengths EncodeRow requires and
// padding columns are not read.
func DecodeRow(f Format, exps, codes []uint8, dst []float32) error {
	if err := checkRow(f, len(dst), len(exps), len(codes), "dst"); err != nil {
		return err
	}
	m := uint32(f.MagBits())
	for n := range dst {
		dst[n] = math.Float32frombits(decodeBits(uint32(codes[n]), uint32(exps[n/GroupSize]), m))
	}
	return nil
}

// checkRow validates the format and the lengths of a row of out values
// (named what) and of its exponents and codes.
func checkRow(f Format, out, nexps, ncodes int, what string) error {
	if err := checkFormat(f); err != nil {
		return err
	}
	if out <= 0 {
		return &LengthError{What: what, Got: out, Want: 1}
	}
	np := PaddedDim(out)
	if ncodes != np {
		return &LengthError{What: "codes", Got: ncodes, Want: np}
	}
	if nexps != np/GroupSize {
		return &LengthError{What: "exps", Got: nexps, Want: np / GroupSize}
	}
	return nil
}

// Builder assembles the packed tile stream of a weight [out, in] from
// encoded rows of W_tt, one input index k at a time, in any order. Rows
// never set, and the padding rows k ≥ in, stay all zero, which is
// exactly the encoding of zero weights (exponent 0, codes 0). When every
// row has been set from EncodeRow's output, Bytes equals PackMatrix of
// the decoded weights, and is canonical (docs/gptq.md §1).
//
// Different rows occupy disjoint bytes, so calls for different k may run
// concurrently; calls for the same k, or Bytes during such calls, may not.
type Builder struct {
	f       Format
	out, in int
	nt      int // Np/32, tiles per tile row
	data    []byte
}

// NewBuilder returns a Builder for a weight [out, in] in format f, with
// PackedSize(f, out, in) zeroed bytes.
func NewBuilder(f Format, out, in int) (*Builder, error) {
	_, nt, err := checkMatrix(f, -1, out, in, "")
	if err != nil {
		return nil, err
	}
	return &Builder{f: f, out: out, in: in, nt: nt, data: make([]byte, PackedSize(f, out, in))}, nil
}

// SetRow stores row k ∈ [0, in) of W_tt (input index k of W) from its
// exponents and codes, laid out as EncodeRow produces them. It checks them
// first and changes nothing on error: a BFP4 code above 0xF, a non-zero code
// in a padding column, or a non-zero exponent for a group made only of
// padding gives a *CodeError. It does not check that each exponent is its
// group's maximum; Canonical does.
func (b *Builder) SetRow(k int, exps, codes []uint8) error {
	if k < 0 || k >= b.in {
		return &RangeError{What: "row", Index: k, Len: b.in}
	}
	if err := checkRow(b.f, b.out, len(exps), len(codes), "row"); err != nil {
		return err
	}
	return b.setPart(k, 0, exps, codes)
}

// SetRowPart is SetRow for the columns [n0, n0+len(codes)) of row k alone:
// n0 a multiple of TileDim, exps and codes as EncodeRow produces them for
// those columns (len(codes) = GroupSize·len(exps), a multiple of TileDim or
// reaching the padded width), so that a row can be stored in bands of
// columns. Errors as SetRow; a band outside the padded row is a
// *RangeError.
func (b *Builder) SetRowPart(k, n0 int, exps, codes []uint8) error {
	if k < 0 || k >= b.in {
		return &RangeError{What: "row", Index: k, Len: b.in}
	}
	if err := checkFormat(b.f); err != nil {
		return err
	}
	np := PaddedDim(b.out)
	n1 := n0 + len(codes)
	if n0 < 0 || n0%TileDim != 0 || n1 > np || (n1%TileDim != 0 && n1 != np) || len(codes) == 0 {
		return &RangeError{What: "row band start", Index: n0, Len: np}
	}
	if len(exps)*GroupSize != len(codes) {
		return &LengthError{What: "exps", Got: len(exps), Want: len(codes) / GroupSize}
	}
	return b.setPart(k, n0, exps, codes)
}

// setPart checks the codes and exponents of columns [n0, n0+len(codes)) of
// row k (lengths already checked) and stores them.
func (b *Builder) setPart(k, n0 int, exps, codes []uint8) error {
	limit := uint8(1)<<(b.f.MagBits()+1) - 1 // 0xFF for BFP8, 0xF for BFP4
	for n, c := range codes {
		switch {
		case c > limit:
			return &CodeError{Format: b.f, Index: n0 + n, Code: c, Reason: "code wider than m+1 bits"}
		case n0+n >= b.out && c != 0:
			return &CodeError{Format: b.f, Index: n0 + n, Code: c, Reason: "non-zero code in padding column"}
		}
	}
	g0 := n0 / GroupSize
	for G, e := range exps {
		if (g0+G)*GroupSize >= b.out && e != 0 {
			return &CodeError{Format: b.f, Index: g0 + G, Code: e, Reason: "non-zero exponent of a padding group"}
		}
	}
	for G, e := range exps {
		b.putGroup(k, g0+G, e, (*[GroupSize]uint8)(codes[G*GroupSize:]))
	}
	return nil
}

// EncodeRow encodes row k ∈ [0, in) of W_tt, given as out values, by the
// plain packer rule and stores it: SetRow of EncodeRow's output, without
// the intermediate slices.
func (b *Builder) EncodeRow(k int, row []float32) error {
	if k < 0 || k >= b.in {
		return &RangeError{What: "row", Index: k, Len: b.in}
	}
	if len(row) != b.out {
		return &LengthError{What: "row", Got: len(row), Want: b.out}
	}
	var bits [GroupSize]uint32
	for G := range RowGroups(b.out) {
		n0 := G * GroupSize
		bits = [GroupSize]uint32{}
		if n0 < len(row) {
			for j, v := range row[n0:min(n0+GroupSize, len(row))] {
				bits[j] = math.Float32bits(v)
			}
		}
		e, codes := QuantizeGroupBits(b.f, &bits)
		b.putGroup(k, G, e, &codes)
	}
	return nil
}

// Bytes returns the packed tile stream, PackedSize(f, out, in) bytes. It is
// the Builder's own buffer, not a copy.
func (b *Builder) Bytes() []byte { return b.data }

// putGroup writes group G of row k. Row k is tile row k%32 of the tiles
// (k/32, nt); row group G lies in tile nt = G/2, in face column G%2, which
// is tile group GroupLane(k%32, 16·(G%2)).
func (b *Builder) putGroup(k, G int, e uint8, codes *[GroupSize]uint8) {
	tb := b.f.TileBytes()
	tile := b.data[(k/TileDim*b.nt+G/2)*tb:][:tb]
	g, _ := GroupLane(k%TileDim, G%2*GroupSize)
	tile[g] = e
	if b.f == BFP8 {
		*(*[GroupSize]uint8)(tile[GroupsPerTile+GroupSize*g:]) = *codes
		return
	}
	dst := (*[GroupSize / 2]uint8)(tile[GroupsPerTile+GroupSize/2*g:])
	for j := range dst {
		dst[j] = codes[2*j] | codes[2*j+1]<<4
	}
}

// SetBand stores the weights of outputs [n0, n0+nb) from packed, those
// outputs alone packed as a weight [nb, in] in the Builder's format (by
// PackMatrix or another Builder's Bytes): n0 a multiple of TileDim, and nb
// one too unless the band ends the matrix. The band's tiles are a run of
// nb/32 tiles in every tile row of the whole matrix, and a tile's bytes
// depend on its values alone, so a matrix stored band by band has the bytes
// PackMatrix gives for it whole; a large weight can then be converted and
// packed a band at a time. It does not check the tiles (Canonical does); a
// band outside the matrix is a *RangeError, packed of the wrong length a
// *LengthError.
func (b *Builder) SetBand(n0, nb int, packed []byte) error {
	n1 := n0 + nb
	if nb < 1 || n0 < 0 || n0%TileDim != 0 || n1 > b.out || (nb%TileDim != 0 && n1 != b.out) {
		return &RangeError{What: "band start", Index: n0, Len: b.out}
	}
	tb := b.f.TileBytes()
	bt := (nb + TileDim - 1) / TileDim // the band's tiles per tile row
	kt := PaddedDim(b.in) / TileDim
	if want := kt * bt * tb; len(packed) != want {
		return &LengthError{What: "band", Got: len(packed), Want: want}
	}
	run := bt * tb
	for k := range kt {
		dst := (k*b.nt + n0/TileDim) * tb
		copy(b.data[dst:dst+run], packed[k*run:(k+1)*run])
	}
	return nil
}

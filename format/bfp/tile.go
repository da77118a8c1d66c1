package bfp

import "math"

// GroupLane returns the exponent group g ∈ [0, 64) and lane j ∈ [0, 16) of
// element (r, c) of a tile, r and c in [0, 32)
// (docs/lfmq-1.md, "The bytes of one tile"): the tile is four 16×16 faces
// in the order top-left, top-right, bottom-left, bottom-right, and a group
// is one row of a face.
func GroupLane(r, c int) (g, j int) {
	face := r/16*2 + c/16
	return face*16 + r%16, c % 16
}

// GroupOrigin returns the tile row r and the first tile column c0 of group
// g ∈ [0, 64); the group covers columns c0..c0+15 of row r. It inverts
// GroupLane. Because a group is contiguous within one tile row, the group
// is src[r*32+c0 : r*32+c0+16] of a row-major tile.
func GroupOrigin(g int) (r, c0 int) {
	face := g / 16
	return face/2*16 + g%16, face % 2 * 16
}

// EncodeTile encodes the 32×32 row-major tile src into dst, which must have
// length f.TileBytes(). It is EncodeTileBits applied to the bit patterns of
// src: no float arithmetic is involved.
func EncodeTile(f Format, src *[TileElems]float32, dst []byte) error {
	if err := checkTile(f, len(dst), "dst"); err != nil {
		return err
	}
	var bits [TileElems]uint32
	for k, v := range src {
		bits[k] = math.Float32bits(v)
	}
	encodeTile(f, &bits, dst)
	return nil
}

// EncodeTileBits encodes a 32×32 row-major tile of fp32 bit patterns into
// dst (length f.TileBytes()) exactly as tt-metal's host packer does
// (docs/lfmq-1.md, "The bytes of one tile"; docs/bfp.md, "Encoding"),
// using integer arithmetic only. BF16 inputs are encoded by widening them
// first (bits << 16), which is exact (docs/bfp.md, "Encoding").
func EncodeTileBits(f Format, src *[TileElems]uint32, dst []byte) error {
	if err := checkTile(f, len(dst), "dst"); err != nil {
		return err
	}
	encodeTile(f, src, dst)
	return nil
}

// DecodeTile decodes one encoded tile src (length f.TileBytes()) into the
// 32×32 row-major tile dst. Every byte pattern is accepted: values are as
// DecodeValue defines them, so a non-canonical tile (a code 0x80, an
// exponent larger than its group needs) decodes without error.
func DecodeTile(f Format, src []byte, dst *[TileElems]float32) error {
	if err := checkTile(f, len(src), "src"); err != nil {
		return err
	}
	decodeTile(f, src, dst)
	return nil
}

// checkTile validates the format and the length n of a tile buffer.
func checkTile(f Format, n int, what string) error {
	if err := checkFormat(f); err != nil {
		return err
	}
	if n != f.TileBytes() {
		return &LengthError{What: what, Got: n, Want: f.TileBytes()}
	}
	return nil
}

// encodeTile does the work of EncodeTileBits; f and len(dst) are valid.
func encodeTile(f Format, src *[TileElems]uint32, dst []byte) {
	exps := (*[GroupsPerTile]byte)(dst[:GroupsPerTile])
	for g := range GroupsPerTile {
		r, c0 := GroupOrigin(g)
		grp := (*[GroupSize]uint32)(src[r*TileDim+c0:])
		E := SharedExponent(grp)
		exps[g] = E
		if f == BFP8 {
			encodeGroup8(grp, uint32(E), (*[GroupSize]byte)(dst[GroupsPerTile+GroupSize*g:]))
		} else {
			encodeGroup4(grp, uint32(E), (*[GroupSize / 2]byte)(dst[GroupsPerTile+GroupSize/2*g:]))
		}
	}
}

// encodeGroup8 writes the 16 BFP8 codes of a group, one byte per lane.
func encodeGroup8(grp *[GroupSize]uint32, E uint32, dst *[GroupSize]byte) {
	for j, x := range grp {
		dst[j] = code8(x, E)
	}
}

// encodeGroup4 writes the 16 BFP4 codes of a group as 8 bytes, even lanes in
// the low nibble (docs/lfmq-1.md, "The bytes of one tile").
func encodeGroup4(grp *[GroupSize]uint32, E uint32, dst *[GroupSize / 2]byte) {
	for k := range dst {
		dst[k] = code4(grp[2*k], E) | code4(grp[2*k+1], E)<<4
	}
}

// decodeTile does the work of DecodeTile; f and len(src) are valid.
func decodeTile(f Format, src []byte, dst *[TileElems]float32) {
	exps := (*[GroupsPerTile]byte)(src[:GroupsPerTile])
	for g, E := range exps {
		r, c0 := GroupOrigin(g)
		out := (*[GroupSize]float32)(dst[r*TileDim+c0:])
		if f == BFP8 {
			decodeGroup8((*[GroupSize]byte)(src[GroupsPerTile+GroupSize*g:]), uint32(E), out)
		} else {
			decodeGroup4((*[GroupSize / 2]byte)(src[GroupsPerTile+GroupSize/2*g:]), uint32(E), out)
		}
	}
}

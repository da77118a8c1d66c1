package kernels

import (
	"fmt"
	"math"
)

// The read paths of the compact KV cache formats (engine/kv's Rows):
// a block of a head's keys or values, stored as bfloat16 or as BFP8 groups,
// widened into float32 rows that attention then reads like a float32
// cache's. Both conversions are exact, so the rows are the stored values
// bit for bit and the attention that follows sums exactly what a float32
// cache holding them would.

// WidenBF16Rows sets dst[r·d+i] = bf16(src[r·srcStride+i]) for r < rows and
// i < d: rows of d bfloat16 values srcStride elements apart, widened
// exactly (NaN payloads included) into rows of dst d floats apart.
func WidenBF16Rows(dst []float32, src []uint16, d, srcStride, rows int) {
	if rows <= 0 || d <= 0 {
		return
	}
	if d > srcStride || len(dst) < rows*d || len(src) < (rows-1)*srcStride+d {
		panic(fmt.Sprintf("kernels: WidenBF16Rows: %d rows of %d (stride %d) from %d into %d", rows, d, srcStride, len(src), len(dst)))
	}
	if useSIMD && d%16 == 0 {
		widenBF16RowsAVX(dst, src, d, srcStride, rows)
		return
	}
	widenBF16RowsGo(dst, src, d, srcStride, rows)
}

// widenBF16RowsGo is WidenBF16Rows' reference.
func widenBF16RowsGo(dst []float32, src []uint16, d, srcStride, rows int) {
	for r := range rows {
		s := src[r*srcStride:][:d]
		o := dst[r*d:][:d]
		for i, b := range s {
			o[i] = bf16(b)
		}
	}
}

// BFP8GroupBytes is the bytes of one BFP8 group as DecodeBFP8Rows reads it:
// the shared exponent, then 16 sign-magnitude codes.
const BFP8GroupBytes = 17

// DecodeBFP8Rows decodes rows of BFP8 groups into float32: row r of src
// starts at byte r·srcStride and holds groups groups of BFP8GroupBytes
// bytes, each an exponent e and 16 codes, which become the 16 floats at
// dst[(r·groups+g)·16:]. A code is decoded as format/bfp decodes it (docs/
// docs/bfp.md, "Decoding" and "Special inputs"): (−1)^sign · q · 2^(e−133)
// exactly, the sign kept on a zero magnitude (code 0x80 is −0), and with e
// = 255 a magnitude q ≥ 64 is ±Inf (q = 64) or a NaN with payload (q − 64)·2^17.
func DecodeBFP8Rows(dst []float32, src []byte, groups, srcStride, rows int) {
	if rows <= 0 || groups <= 0 {
		return
	}
	n := groups * BFP8GroupBytes
	if n > srcStride || len(dst) < rows*groups*16 || len(src) < (rows-1)*srcStride+n {
		panic(fmt.Sprintf("kernels: DecodeBFP8Rows: %d rows of %d groups (stride %d) from %d bytes into %d", rows, groups, srcStride, len(src), len(dst)))
	}
	// The SIMD kernel decodes an exponent of 255 as a finite one (its
	// large magnitudes as +Inf, without their sign or NaN payload) and
	// reports that it met one: those rows, which only a cache that
	// overflowed holds, are decoded again by the reference.
	if useSIMD && decodeBFP8RowsAVX(dst, src, groups, srcStride, rows, &bfp8Scale) == 0 {
		return
	}
	decodeBFP8RowsGo(dst, src, groups, srcStride, rows)
}

// decodeBFP8RowsGo is DecodeBFP8Rows' reference.
func decodeBFP8RowsGo(dst []float32, src []byte, groups, srcStride, rows int) {
	for r := range rows {
		row := src[r*srcStride:][:groups*BFP8GroupBytes]
		for g := range groups {
			grp := row[g*BFP8GroupBytes:][:BFP8GroupBytes]
			decodeKVGroup8((*[16]float32)(dst[(r*groups+g)*16:]), grp[0], (*[16]byte)(grp[1:]))
		}
	}
}

// decodeKVGroup8 decodes one BFP8 group of exponent e as DecodeBFP8Rows
// says. bfp8Scale[e] is the exact step 2^(e−133), so q·step is exact and
// the sign bit can be set on the product's bits.
func decodeKVGroup8(dst *[16]float32, e byte, codes *[16]byte) {
	step := bfp8Scale[e]
	for j, c := range codes {
		sign := uint32(c&0x80) << 24
		q := c & 0x7f
		if e == 255 && q >= 64 {
			dst[j] = math.Float32frombits(sign | 0x7F800000 | uint32(q-64)<<17)
			continue
		}
		dst[j] = math.Float32frombits(math.Float32bits(float32(q)*step) | sign)
	}
}

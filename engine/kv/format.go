package kv

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
)

// DType is the number format of the KV cache: how each key and value is
// stored once it is written. Values are rounded once, when written;
// attention reads them back exactly and computes in float32, so a format
// changes which values attention sees, never the order it sums them in.
type DType uint8

const (
	// F32 keeps float32 keys and values: the mode in which the engine
	// matches the float32 reference. It is the zero value.
	F32 DType = iota
	// BF16 rounds each value to bfloat16 (to nearest, ties to even):
	// half of float32's bytes.
	BF16
	// BFP8 stores each 16 consecutive values along the head dimension
	// as one BFP8 group (bfloat8_b, docs/bfp.md: a shared exponent byte
	// and 16 sign-magnitude codes): 17 bytes per 16 values, 0.266 of
	// float32's bytes.
	BFP8
)

// DTypes lists the formats in the order of their names' documentation.
var DTypes = []DType{F32, BF16, BFP8}

// String returns the format's flag name: f32, bf16 or bfp8.
func (t DType) String() string {
	switch t {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case BFP8:
		return "bfp8"
	}
	return fmt.Sprintf("KVDType(%d)", uint8(t))
}

// RowBytes returns the bytes one position's keys (or values) of n floats
// take in the format; for BFP8, n is a multiple of 16.
func (t DType) RowBytes(n int) int {
	switch t {
	case BF16:
		return 2 * n
	case BFP8:
		return n / bfp.GroupSize * (1 + bfp.GroupSize)
	}
	return 4 * n
}

// groupBytes is one BFP8 group's bytes in the cache: its exponent, then
// its 16 codes.
const groupBytes = 1 + bfp.GroupSize

// Rows is one attention layer's keys or values of one KV page (or of a
// span held as rows), one row of kvd values per position, in the cache's
// format: only the slice of its format is used. Its length is fixed when
// it is made (PageTokens rows for a page); rows are written in place,
// never appended.
type Rows struct {
	f []float32 // F32: [n·kvd]
	h []uint16  // BF16: [n·kvd]
	b []byte    // BFP8: [n·kvd/16·17], each group its exponent then its codes
}

// MakeRows returns rows for n positions of kvd values in format t.
func MakeRows(t DType, kvd, n int) Rows {
	switch t {
	case BF16:
		return Rows{h: make([]uint16, n*kvd)}
	case BFP8:
		return Rows{b: make([]byte, n*t.RowBytes(kvd))}
	}
	return Rows{f: make([]float32, n*kvd)}
}

// Set rounds the rows of x (whole rows of kvd values) to the format
// and writes them from row at on.
func (r *Rows) Set(t DType, kvd, at int, x []float32) {
	switch t {
	case F32:
		copy(r.f[at*kvd:], x)
	case BF16:
		dst := r.h[at*kvd:][:len(x)]
		for i, v := range x {
			dst[i] = dtype.Float32ToBF16(v)
		}
	case BFP8:
		var g [bfp.GroupSize]float32
		dst := r.b[at*t.RowBytes(kvd):]
		for i := 0; i < len(x); i += bfp.GroupSize {
			copy(g[:], x[i:])
			e, codes := bfp.QuantizeGroup(bfp.BFP8, &g)
			grp := dst[i/bfp.GroupSize*groupBytes:][:groupBytes]
			grp[0] = e
			copy(grp[1:], codes[:])
		}
	}
}

// Copy copies n rows already in the format from src's row from to
// r's row at.
func (r *Rows) Copy(t DType, kvd, at int, src *Rows, from, n int) {
	switch t {
	case BF16:
		copy(r.h[at*kvd:(at+n)*kvd], src.h[from*kvd:])
	case BFP8:
		rb := t.RowBytes(kvd)
		copy(r.b[at*rb:(at+n)*rb], src.b[from*rb:])
	default:
		copy(r.f[at*kvd:(at+n)*kvd], src.f[from*kvd:])
	}
}

// AppendRaw appends rows [from, from+n) in the format's encoding: the bytes
// a span stores (little-endian for float32 and bfloat16).
func (r *Rows) AppendRaw(b []byte, t DType, kvd, from, n int) []byte {
	switch t {
	case BF16:
		for _, h := range r.h[from*kvd : (from+n)*kvd] {
			b = binary.LittleEndian.AppendUint16(b, h)
		}
	case BFP8:
		rb := t.RowBytes(kvd)
		b = append(b, r.b[from*rb:(from+n)*rb]...)
	default:
		for _, f := range r.f[from*kvd : (from+n)*kvd] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

// ReadRaw decodes n rows in the format's encoding from p into rows from
// at on, and returns what follows them; ok is false when p is too short.
func (r *Rows) ReadRaw(p []byte, t DType, kvd, at, n int) (rest []byte, ok bool) {
	size := n * t.RowBytes(kvd)
	if len(p) < size {
		return p, false
	}
	switch t {
	case BF16:
		dst := r.h[at*kvd:][:n*kvd]
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint16(p[2*i:])
		}
	case BFP8:
		copy(r.b[at*t.RowBytes(kvd):], p[:size])
	default:
		dst := r.f[at*kvd:][:n*kvd]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		}
	}
	return p[size:], true
}

// BF16 returns a BF16 format's rows in place (nil in another format).
func (r *Rows) BF16() []uint16 { return r.h }

// Bytes returns the memory of the rows' format slice, in place: the bytes a
// device's cache holds for them (the host is little-endian there).
func (r *Rows) Bytes() []byte {
	switch {
	case r.h != nil:
		if len(r.h) == 0 {
			return nil
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&r.h[0])), 2*len(r.h))
	case r.b != nil:
		return r.b
	}
	if len(r.f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&r.f[0])), 4*len(r.f))
}

// Empty reports whether the rows were never made (a conv layer's).
func (r *Rows) Empty() bool { return r.f == nil && r.h == nil && r.b == nil }

// Block returns d values of one head (at offset off in rows of kvd) for
// positions [j0, j0+cnt), as float32 rows stride floats apart: a view of
// a float32 cache, or the exact values of another format decoded into
// scratch (at least cnt·d floats, stride d).
func (r *Rows) Block(t DType, kvd, off, d, j0, cnt int, scratch []float32) ([]float32, int) {
	switch t {
	case BF16:
		kernels.WidenBF16Rows(scratch, r.h[j0*kvd+off:], d, kvd, cnt)
		return scratch, d
	case BFP8:
		rb := t.RowBytes(kvd)
		kernels.DecodeBFP8Rows(scratch, r.b[j0*rb+off/bfp.GroupSize*groupBytes:], d/bfp.GroupSize, rb, cnt)
		return scratch, d
	}
	return r.f[j0*kvd+off:], kvd
}

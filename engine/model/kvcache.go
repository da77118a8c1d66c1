package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
)

// KVDType is the number format of the KV cache: how each key and value is
// stored once it is written. Values are rounded once, when written;
// attention reads them back exactly and computes in float32, so a format
// changes which values attention sees, never the order it sums them in.
type KVDType uint8

const (
	// KVF32 keeps float32 keys and values: the mode in which the engine
	// matches the float32 reference. It is the zero value.
	KVF32 KVDType = iota
	// KVBF16 rounds each value to bfloat16 (to nearest, ties to even):
	// half of float32's bytes.
	KVBF16
	// KVBFP8 stores each 16 consecutive values along the head dimension
	// as one BFP8 group (bfloat8_b, docs/bfp.md: a shared exponent byte
	// and 16 sign-magnitude codes): 17 bytes per 16 values, 0.266 of
	// float32's bytes.
	KVBFP8
)

// KVDTypes lists the formats in the order of their names' documentation.
var KVDTypes = []KVDType{KVF32, KVBF16, KVBFP8}

// String returns the format's flag name: f32, bf16 or bfp8.
func (t KVDType) String() string {
	switch t {
	case KVF32:
		return "f32"
	case KVBF16:
		return "bf16"
	case KVBFP8:
		return "bfp8"
	}
	return fmt.Sprintf("KVDType(%d)", uint8(t))
}

// ParseKVDType reads a format's flag name.
func ParseKVDType(s string) (KVDType, error) {
	for _, t := range KVDTypes {
		if s == t.String() {
			return t, nil
		}
	}
	return 0, &InputError{What: "KV cache dtype", Msg: fmt.Sprintf("%q is not one of f32, bf16, bfp8", s)}
}

// RowBytes returns the bytes one position's keys (or values) of n floats
// take in the format; for BFP8, n is a multiple of 16.
func (t KVDType) RowBytes(n int) int {
	switch t {
	case KVBF16:
		return 2 * n
	case KVBFP8:
		return n / bfp.GroupSize * (1 + bfp.GroupSize)
	}
	return 4 * n
}

// KVBytesPerToken returns the bytes one position's keys and values take in
// the model's KV cache, over all its attention layers.
func (m *Model) KVBytesPerToken() int {
	n := 0
	for _, k := range m.Config.LayerKinds {
		if k == config.Attention {
			n += 2 * m.kvDType.RowBytes(m.Config.NumKVHeads*m.Config.HeadDim)
		}
	}
	return n
}

// kvGroupBytes is one BFP8 group's bytes in the cache: its exponent, then
// its 16 codes.
const kvGroupBytes = 1 + bfp.GroupSize

// kvRows is one attention layer's keys or values of one KV page, one row
// of kvd values per position, in the cache's format: only the slice of its
// format is used. Its length is fixed when the page is made (KVPageTokens
// rows); rows are written in place, never appended.
type kvRows struct {
	f []float32 // KVF32: [n·kvd]
	h []uint16  // KVBF16: [n·kvd]
	b []byte    // KVBFP8: [n·kvd/16·17], each group its exponent then its codes
}

// makeKVRows returns rows for n positions of kvd values in format t.
func makeKVRows(t KVDType, kvd, n int) kvRows {
	switch t {
	case KVBF16:
		return kvRows{h: make([]uint16, n*kvd)}
	case KVBFP8:
		return kvRows{b: make([]byte, n*t.RowBytes(kvd))}
	}
	return kvRows{f: make([]float32, n*kvd)}
}

// setRows rounds the rows of x (whole rows of kvd values) to the format
// and writes them from row at on.
func (r *kvRows) setRows(t KVDType, kvd, at int, x []float32) {
	switch t {
	case KVF32:
		copy(r.f[at*kvd:], x)
	case KVBF16:
		dst := r.h[at*kvd:][:len(x)]
		for i, v := range x {
			dst[i] = dtype.Float32ToBF16(v)
		}
	case KVBFP8:
		var g [bfp.GroupSize]float32
		dst := r.b[at*t.RowBytes(kvd):]
		for i := 0; i < len(x); i += bfp.GroupSize {
			copy(g[:], x[i:])
			e, codes := bfp.QuantizeGroup(bfp.BFP8, &g)
			grp := dst[i/bfp.GroupSize*kvGroupBytes:][:kvGroupBytes]
			grp[0] = e
			copy(grp[1:], codes[:])
		}
	}
}

// copyRows copies n rows already in the format from src's row from to
// r's row at.
func (r *kvRows) copyRows(t KVDType, kvd, at int, src *kvRows, from, n int) {
	switch t {
	case KVBF16:
		copy(r.h[at*kvd:(at+n)*kvd], src.h[from*kvd:])
	case KVBFP8:
		rb := t.RowBytes(kvd)
		copy(r.b[at*rb:(at+n)*rb], src.b[from*rb:])
	default:
		copy(r.f[at*kvd:(at+n)*kvd], src.f[from*kvd:])
	}
}

// appendRaw appends rows [from, from+n) in the format's encoding: the bytes
// a span stores (little-endian for float32 and bfloat16).
func (r *kvRows) appendRaw(b []byte, t KVDType, kvd, from, n int) []byte {
	switch t {
	case KVBF16:
		for _, h := range r.h[from*kvd : (from+n)*kvd] {
			b = binary.LittleEndian.AppendUint16(b, h)
		}
	case KVBFP8:
		rb := t.RowBytes(kvd)
		b = append(b, r.b[from*rb:(from+n)*rb]...)
	default:
		for _, f := range r.f[from*kvd : (from+n)*kvd] {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

// readRaw decodes n rows in the format's encoding from p into rows from
// at on, and returns what follows them; ok is false when p is too short.
func (r *kvRows) readRaw(p []byte, t KVDType, kvd, at, n int) (rest []byte, ok bool) {
	size := n * t.RowBytes(kvd)
	if len(p) < size {
		return p, false
	}
	switch t {
	case KVBF16:
		dst := r.h[at*kvd:][:n*kvd]
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint16(p[2*i:])
		}
	case KVBFP8:
		copy(r.b[at*t.RowBytes(kvd):], p[:size])
	default:
		dst := r.f[at*kvd:][:n*kvd]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		}
	}
	return p[size:], true
}

// empty reports whether the rows were never made (a conv layer's).
func (r *kvRows) empty() bool { return r.f == nil && r.h == nil && r.b == nil }

// block returns d values of one head (at offset off in rows of kvd) for
// positions [j0, j0+cnt), as float32 rows stride floats apart: a view of
// a float32 cache, or the exact values of another format decoded into
// scratch (at least cnt·d floats, stride d).
func (r *kvRows) block(t KVDType, kvd, off, d, j0, cnt int, scratch []float32) ([]float32, int) {
	switch t {
	case KVBF16:
		kernels.WidenBF16Rows(scratch, r.h[j0*kvd+off:], d, kvd, cnt)
		return scratch, d
	case KVBFP8:
		rb := t.RowBytes(kvd)
		kernels.DecodeBFP8Rows(scratch, r.b[j0*rb+off/bfp.GroupSize*kvGroupBytes:], d/bfp.GroupSize, rb, cnt)
		return scratch, d
	}
	return r.f[j0*kvd+off:], kvd
}

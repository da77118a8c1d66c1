package model

import (
	"fmt"

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

// kvRows is one attention layer's keys or values, one row of kvd values
// per position, in the cache's format: only the slice of its format is
// used.
type kvRows struct {
	f []float32 // KVF32: [n·kvd]
	h []uint16  // KVBF16: [n·kvd]
	b []byte    // KVBFP8: [n·kvd/16·17], each group its exponent then its codes
}

// appendRows rounds the rows of x (whole rows of kvd values) to the format
// and appends them.
func (r *kvRows) appendRows(t KVDType, x []float32) {
	switch t {
	case KVF32:
		r.f = append(r.f, x...)
	case KVBF16:
		for _, v := range x {
			r.h = append(r.h, dtype.Float32ToBF16(v))
		}
	case KVBFP8:
		var g [bfp.GroupSize]float32
		for i := 0; i < len(x); i += bfp.GroupSize {
			copy(g[:], x[i:])
			e, codes := bfp.QuantizeGroup(bfp.BFP8, &g)
			r.b = append(r.b, e)
			r.b = append(r.b, codes[:]...)
		}
	}
}

// appendRaw appends rows already in the format (a span's).
func (r *kvRows) appendRaw(o *kvRows) {
	r.f = append(r.f, o.f...)
	r.h = append(r.h, o.h...)
	r.b = append(r.b, o.b...)
}

// slice returns a copy of positions [start, end) (rows of kvd values).
func (r *kvRows) slice(t KVDType, kvd, start, end int) kvRows {
	switch t {
	case KVBF16:
		return kvRows{h: clone16(r.h[start*kvd : end*kvd])}
	case KVBFP8:
		n := t.RowBytes(kvd)
		return kvRows{b: append([]byte(nil), r.b[start*n:end*n]...)}
	}
	return kvRows{f: clone32(r.f[start*kvd : end*kvd])}
}

// truncate keeps the first n positions.
func (r *kvRows) truncate(t KVDType, kvd, n int) {
	switch t {
	case KVBF16:
		r.h = r.h[:n*kvd]
	case KVBFP8:
		r.b = r.b[:n*t.RowBytes(kvd)]
	default:
		r.f = r.f[:n*kvd]
	}
}

// clone returns a deep copy.
func (r *kvRows) clone() kvRows {
	c := kvRows{f: clone32(r.f), h: clone16(r.h)}
	if r.b != nil {
		c.b = append(make([]byte, 0, len(r.b)), r.b...)
	}
	return c
}

// bytes is the memory the rows hold.
func (r *kvRows) bytes() int { return 4*len(r.f) + 2*len(r.h) + len(r.b) }

// empty reports whether the rows were never written (a conv layer's).
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

func clone16(x []uint16) []uint16 {
	if x == nil {
		return nil
	}
	return append(make([]uint16, 0, len(x)), x...)
}

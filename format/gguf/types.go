package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/lfmq/lfmq/format/dtype"
)

// TensorType is a ggml tensor type code.
type TensorType uint32

// The ggml tensor types this package writes, with ggml's codes.
const (
	F32  TensorType = 0
	F16  TensorType = 1
	Q8_0 TensorType = 8
	BF16 TensorType = 30
)

// q8Block is the number of values in a Q8_0 block: one float16 scale, then
// 32 signed bytes.
const q8Block = 32

// String returns ggml's name of the type.
func (t TensorType) String() string {
	switch t {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case Q8_0:
		return "Q8_0"
	case BF16:
		return "BF16"
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// ParseTensorType reads a type name as the converters spell it (f32,
// f16, bf16, q8_0; any case).
func ParseTensorType(s string) (TensorType, error) {
	for _, t := range []TensorType{F32, F16, BF16, Q8_0} {
		if equalFold(s, t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("gguf: unknown tensor type %q: want f32, f16, bf16 or q8_0", s)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// BlockSize returns the values per block (1 for the float types), or 0
// for a type this package does not write.
func (t TensorType) BlockSize() int {
	switch t {
	case F32, F16, BF16:
		return 1
	case Q8_0:
		return q8Block
	}
	return 0
}

// BlockBytes returns the bytes of one block.
func (t TensorType) BlockBytes() int {
	switch t {
	case F32:
		return 4
	case F16, BF16:
		return 2
	case Q8_0:
		return 2 + q8Block
	}
	return 0
}

// encode writes vals as t into out, which has exactly the encoded size.
func (t TensorType) encode(vals []float32, out []byte) {
	switch t {
	case F32:
		for i, v := range vals {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range vals {
			binary.LittleEndian.PutUint16(out[2*i:], dtype.Float32ToF16(v))
		}
	case BF16:
		for i, v := range vals {
			binary.LittleEndian.PutUint16(out[2*i:], dtype.Float32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b*q8Block < len(vals); b++ {
			QuantizeQ8_0Block((*[q8Block]float32)(vals[b*q8Block:]), (*[2 + q8Block]byte)(out[b*(2+q8Block):]))
		}
	}
}

// QuantizeQ8_0Block encodes 32 values as one Q8_0 block the way ggml's
// reference quantizer does (the one llama.cpp's Python converter mirrors):
// the scale d is the largest magnitude over 127, stored as float16
// (rounded to nearest, ties to even); each value is x/d rounded half away
// from zero, computed as x times the float32 reciprocal of the unrounded d.
func QuantizeQ8_0Block(x *[q8Block]float32, out *[2 + q8Block]byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(out[:2], dtype.Float32ToF16(d))
	for j, v := range x {
		out[2+j] = byte(int8(math.Round(float64(v * id))))
	}
}

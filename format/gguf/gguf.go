// Package gguf writes GGUF version 3 files, the single-file checkpoint
// format of ggml and llama.cpp: a header of typed key–value metadata and
// tensor descriptions, then the tensors' data, each aligned. It writes
// float32, float16, bfloat16 and Q8_0 tensors, which is what a
// llama.cpp-loadable copy of an LFM2 checkpoint needs for speed
// comparisons; it does not read GGUF.
//
// Layout (all integers little-endian): "GGUF", version uint32, tensor
// count uint64, metadata count uint64; each metadata entry is a string key
// (uint64 length, bytes), a uint32 value type and the value; each tensor
// description is its name, a uint32 dimension count, that many uint64
// dimensions (innermost first: ggml's ne[0] is the length of a row), a
// uint32 ggml type and a uint64 offset into the data section. The data
// section starts at the next multiple of the alignment after the header,
// and every tensor's offset is a multiple of it.
package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Alignment is the data alignment this package writes; it is GGUF's
// default, so no general.alignment key is needed.
const Alignment = 32

// Version is the GGUF version written.
const Version = 3

// ValueType is a metadata value's type code.
type ValueType uint32

// The metadata value types of GGUF version 3.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

// KV is one metadata entry. Value is one of uint32, int32, float32, bool,
// string, []int32 or []string; llama.cpp checks each key's type, so the
// Go type chosen is the GGUF type written.
type KV struct {
	Key   string
	Value any
}

// Tensor is one tensor to write. Dims are innermost first (Dims[0] is the
// row length). Values calls emit with the tensor's float32 values in
// order, in pieces of whole rows; Write encodes them as Type.
type Tensor struct {
	Name   string
	Dims   []uint64
	Type   TensorType
	Values func(emit func(rows []float32) error) error
}

// elements returns the tensor's element count and row length.
func (t Tensor) elements() (n, row uint64) {
	n = 1
	for _, d := range t.Dims {
		n *= d
	}
	return n, t.Dims[0]
}

// Size returns the tensor's encoded byte count, or an error naming the
// tensor when its row length does not fit its type's blocks.
func (t Tensor) Size() (uint64, error) {
	if len(t.Dims) == 0 || len(t.Dims) > 4 {
		return 0, fmt.Errorf("gguf: tensor %q: %d dimensions, want 1 to 4", t.Name, len(t.Dims))
	}
	n, row := t.elements()
	bs := uint64(t.Type.BlockSize())
	if bs == 0 {
		return 0, fmt.Errorf("gguf: tensor %q: unsupported type %d", t.Name, t.Type)
	}
	if row%bs != 0 {
		return 0, fmt.Errorf("gguf: tensor %q: rows of %d values do not split into %s blocks of %d", t.Name, row, t.Type, bs)
	}
	return n / bs * uint64(t.Type.BlockBytes()), nil
}

// Write writes a GGUF file of the metadata and tensors to w. Each tensor's
// Values must produce exactly its element count in whole rows; otherwise
// Write stops with an error naming the tensor (the caller discards the
// partial output).
func Write(w io.Writer, meta []KV, tensors []Tensor) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.raw([]byte("GGUF"))
	e.u32(Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(meta)))
	seen := make(map[string]bool, len(meta))
	for _, kv := range meta {
		if seen[kv.Key] {
			return fmt.Errorf("gguf: metadata key %q given twice", kv.Key)
		}
		seen[kv.Key] = true
		e.str(kv.Key)
		if err := e.value(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	var offset uint64
	sizes := make([]uint64, len(tensors))
	names := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		if names[t.Name] {
			return fmt.Errorf("gguf: tensor %q given twice", t.Name)
		}
		names[t.Name] = true
		size, err := t.Size()
		if err != nil {
			return err
		}
		sizes[i] = size
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offset)
		offset = alignUp(offset + size)
	}
	e.pad()
	if e.err != nil {
		return e.err
	}
	for i, t := range tensors {
		if err := e.tensor(t, sizes[i]); err != nil {
			return err
		}
		e.pad()
	}
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

func alignUp(n uint64) uint64 { return (n + Alignment - 1) / Alignment * Alignment }

// encoder writes little-endian fields and remembers the first error, so
// the header code reads as a list of fields.
type encoder struct {
	w   *bufio.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	_, e.err = e.w.Write(b)
	e.n += uint64(len(b))
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.raw(e.buf[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.raw(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

// pad writes zeros up to the next multiple of Alignment.
func (e *encoder) pad() {
	var zeros [Alignment]byte
	e.raw(zeros[:alignUp(e.n)-e.n])
}

func (e *encoder) value(key string, v any) error {
	switch v := v.(type) {
	case uint32:
		e.u32(uint32(TypeUint32))
		e.u32(v)
	case int32:
		e.u32(uint32(TypeInt32))
		e.u32(uint32(v))
	case float32:
		e.u32(uint32(TypeFloat32))
		e.u32(math.Float32bits(v))
	case bool:
		e.u32(uint32(TypeBool))
		b := byte(0)
		if v {
			b = 1
		}
		e.raw([]byte{b})
	case string:
		e.u32(uint32(TypeString))
		e.str(v)
	case []int32:
		e.u32(uint32(TypeArray))
		e.u32(uint32(TypeInt32))
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(uint32(x))
		}
	case []string:
		e.u32(uint32(TypeArray))
		e.u32(uint32(TypeString))
		e.u64(uint64(len(v)))
		for _, s := range v {
			e.str(s)
		}
	default:
		return fmt.Errorf("gguf: metadata %q: unsupported value type %T", key, v)
	}
	return nil
}

// tensor encodes one tensor's values and checks that they fill its size.
func (e *encoder) tensor(t Tensor, size uint64) error {
	_, row := t.elements()
	start := e.n
	var out []byte
	err := t.Values(func(vals []float32) error {
		if uint64(len(vals))%row != 0 {
			return fmt.Errorf("gguf: tensor %q: %d values is not a whole number of rows of %d", t.Name, len(vals), row)
		}
		need := uint64(len(vals)) / uint64(t.Type.BlockSize()) * uint64(t.Type.BlockBytes())
		if e.n-start+need > size {
			return fmt.Errorf("gguf: tensor %q: more values than its %v dimensions hold", t.Name, t.Dims)
		}
		if uint64(cap(out)) < need {
			out = make([]byte, need)
		}
		out = out[:need]
		t.Type.encode(vals, out)
		e.raw(out)
		return e.err
	})
	if err != nil {
		return err
	}
	if got := e.n - start; got != size {
		return fmt.Errorf("gguf: tensor %q: values fill %d of its %d bytes", t.Name, got, size)
	}
	return nil
}

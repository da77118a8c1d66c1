package dtype

import (
	"errors"
	"fmt"
)

// DType is a safetensors element type, spelled as in a safetensors header
// ("BF16", "F32", ...).
type DType string

// The dtypes lfmq converts. Their names are the safetensors header strings.
const (
	// BF16 is bfloat16: the top half of an IEEE 754 binary32.
	BF16 DType = "BF16"
	// F16 is IEEE 754 binary16.
	F16 DType = "F16"
	// F32 is IEEE 754 binary32.
	F32 DType = "F32"
	// I32 is a two's-complement signed 32-bit integer.
	I32 DType = "I32"
	// U8 is an unsigned byte; lfmq stores packed BFP tiles as U8.
	U8 DType = "U8"
)

// The other dtypes that the safetensors format defines. lfmq accepts them in
// headers and can copy their bytes, but does not convert them.
const (
	// F64 is IEEE 754 binary64.
	F64 DType = "F64"
	// I64 is a signed 64-bit integer.
	I64 DType = "I64"
	// I16 is a signed 16-bit integer.
	I16 DType = "I16"
	// I8 is a signed byte.
	I8 DType = "I8"
	// U16 is an unsigned 16-bit integer.
	U16 DType = "U16"
	// U32 is an unsigned 32-bit integer.
	U32 DType = "U32"
	// U64 is an unsigned 64-bit integer.
	U64 DType = "U64"
	// BOOL is a boolean stored in one byte.
	BOOL DType = "BOOL"
	// F8E4M3 is the 8-bit float with 4 exponent and 3 mantissa bits.
	F8E4M3 DType = "F8_E4M3"
	// F8E5M2 is the 8-bit float with 5 exponent and 2 mantissa bits.
	F8E5M2 DType = "F8_E5M2"
)

// sizes holds the element size of every known dtype; a dtype absent from it
// is unknown.
var sizes = map[DType]int{
	BF16: 2, F16: 2, F32: 4, I32: 4, U8: 1,
	F64: 8, I64: 8, I16: 2, I8: 1, U16: 2, U32: 4, U64: 8, BOOL: 1,
	F8E4M3: 1, F8E5M2: 1,
}

// Size returns the number of bytes of one element of d, or 0 if d is not a
// known safetensors dtype.
func (d DType) Size() int {
	switch d {
	// The common cases first, without a map lookup.
	case BF16, F16:
		return 2
	case F32, I32:
		return 4
	case U8:
		return 1
	}
	return sizes[d]
}

// Convertible reports whether ToFloat32 can decode d: true for BF16, F16,
// F32, I32 and U8.
func (d DType) Convertible() bool {
	switch d {
	case BF16, F16, F32, I32, U8:
		return true
	}
	return false
}

// Parse returns the DType named s. The match is exact (safetensors names are
// upper case); an unknown name gives an *Error wrapping ErrUnknown.
func Parse(s string) (DType, error) {
	d := DType(s)
	if d.Size() == 0 {
		return "", &Error{Op: "Parse", DType: d, Msg: fmt.Sprintf("unknown dtype %q", s), Err: ErrUnknown}
	}
	return d, nil
}

// Sentinel errors, wrapped by *Error; test for them with errors.Is.
var (
	// ErrUnknown reports a dtype name that safetensors does not define.
	ErrUnknown = errors.New("dtype: unknown dtype")
	// ErrUnsupported reports a conversion that the dtype does not have.
	ErrUnsupported = errors.New("dtype: conversion not supported")
	// ErrLength reports source and destination lengths that do not match.
	ErrLength = errors.New("dtype: length mismatch")
)

// Error is the error of a failed parse or conversion. It wraps one of
// ErrUnknown, ErrUnsupported or ErrLength.
type Error struct {
	Op    string // the function: "Parse", "ToFloat32", "FromFloat32", "PutFloat32"
	DType DType  // the dtype involved
	Msg   string // what went wrong, for humans
	Err   error  // the sentinel
}

// Error returns "dtype: Op: Msg".
func (e *Error) Error() string {
	return "dtype: " + e.Op + ": " + e.Msg
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }

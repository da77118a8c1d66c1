package bfp

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns matches exactly one of
// them with errors.Is; the typed errors below carry the details.
var (
	// ErrFormat reports a format name or Format value that is neither
	// BFP8 nor BFP4.
	ErrFormat = errors.New("bfp: unknown format")
	// ErrShape reports a matrix shape that is not positive or whose packed
	// size does not fit in an int.
	ErrShape = errors.New("bfp: invalid matrix shape")
	// ErrLength reports a buffer whose length does not match what the
	// format and shape require.
	ErrLength = errors.New("bfp: wrong buffer length")
	// ErrRange reports an index (a row of a Builder) outside its range.
	ErrRange = errors.New("bfp: index out of range")
	// ErrCode reports an element code that a canonical tile cannot hold:
	// a magnitude beyond the format's m bits, or a non-zero code in the
	// zero padding.
	ErrCode = errors.New("bfp: invalid element code")
	// ErrNotCanonical reports packed data that differs from what the
	// plain packer makes of its decoded values (see Canonical).
	ErrNotCanonical = errors.New("bfp: data not canonical")
	// ErrRule reports an ExponentRule value the package does not know.
	ErrRule = errors.New("bfp: unknown exponent rule")
)

// FormatError reports an unknown format: a name given to ParseFormat, or a
// Format value other than BFP8 and BFP4 passed to a function (then Name is
// that value's String, e.g. "bfp.Format(0)").
type FormatError struct {
	Name string
}

// Error returns the message, naming the offending value.
func (e *FormatError) Error() string {
	return fmt.Sprintf("bfp: unknown format %q (want \"bfp8_b\" or \"bfp4_b\")", e.Name)
}

// Is reports whether target is ErrFormat.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// ShapeError reports a logical weight shape [Out, In] that the codec refuses.
type ShapeError struct {
	Out, In int
}

// Error returns the message, naming the offending value.
func (e *ShapeError) Error() string {
	return fmt.Sprintf("bfp: invalid matrix shape [out,in] = [%d,%d]: both must be positive and the packed size must fit in an int", e.Out, e.In)
}

// Is reports whether target is ErrShape.
func (e *ShapeError) Is(target error) bool { return target == ErrShape }

// LengthError reports a buffer of the wrong length.
type LengthError struct {
	What string // which argument, e.g. "packed data" or "dst"
	Got  int    // its length
	Want int    // the length the format and shape require
}

// Error returns the message, naming the offending value.
func (e *LengthError) Error() string {
	return fmt.Sprintf("bfp: %s has length %d, want %d", e.What, e.Got, e.Want)
}

// Is reports whether target is ErrLength.
func (e *LengthError) Is(target error) bool { return target == ErrLength }

// RangeError reports an index outside [0, Len).
type RangeError struct {
	What  string // what is indexed, e.g. "row"
	Index int
	Len   int
}

// Error returns the message, naming the offending value.
func (e *RangeError) Error() string {
	return fmt.Sprintf("bfp: %s %d out of range [0,%d)", e.What, e.Index, e.Len)
}

// Is reports whether target is ErrRange.
func (e *RangeError) Is(target error) bool { return target == ErrRange }

// CodeError reports an element code that cannot be stored.
type CodeError struct {
	Format Format
	Index  int    // position of the code in the slice that held it
	Code   uint8  // the offending code
	Reason string // e.g. "non-zero code in padding column"
}

// Error returns the message, naming the offending value.
func (e *CodeError) Error() string {
	return fmt.Sprintf("bfp: %s code %#x at index %d: %s", e.Format, e.Code, e.Index, e.Reason)
}

// Is reports whether target is ErrCode.
func (e *CodeError) Is(target error) bool { return target == ErrCode }

// checkFormat returns a *FormatError unless f is BFP8 or BFP4.
func checkFormat(f Format) error {
	if f.Valid() {
		return nil
	}
	return &FormatError{Name: f.String()}
}

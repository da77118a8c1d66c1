package safetensors

import (
	"errors"
	"strconv"
	"strings"
)

// The values of FormatError.Field: the part of the file that is wrong.
const (
	// FieldHeaderSize is the 8-byte header length prefix and the file size
	// it implies.
	FieldHeaderSize = "header_size"
	// FieldHeader is the header JSON as a whole: syntax, encoding, layout of
	// its entries, unknown fields.
	FieldHeader = "header"
	// FieldMetadata is the optional __metadata__ object.
	FieldMetadata = "__metadata__"
	// FieldName is a tensor's name: empty, duplicated or not valid UTF-8.
	FieldName = "name"
	// FieldDType is a tensor entry's "dtype".
	FieldDType = "dtype"
	// FieldShape is a tensor entry's "shape".
	FieldShape = "shape"
	// FieldDataOffsets is a tensor entry's "data_offsets", including spans
	// that overlap, leave gaps or run past the data section.
	FieldDataOffsets = "data_offsets"
	// FieldData is the data section as a whole, such as bytes after the last
	// tensor, or a tensor's bytes given to the writer.
	FieldData = "data"
)

// FormatError reports a safetensors file (or a header, or tensors given to
// the writer) that breaks the format. Tensor is empty for errors of the file
// as a whole, File is empty where no file is involved (ParseHeader, Encode).
type FormatError struct {
	File   string // the path given to Open or Write
	Tensor string // the tensor concerned, if any
	Field  string // one of the Field constants
	Msg    string // what is wrong and what was expected
	Err    error  // the underlying cause (a JSON syntax error), if any
}

// Error formats the error as
// `safetensors: FILE: tensor "NAME": FIELD: MSG`, leaving out the parts that
// are empty.
func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("safetensors: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Tensor != "" {
		b.WriteString("tensor ")
		b.WriteString(strconv.Quote(e.Tensor))
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying cause, if any.
func (e *FormatError) Unwrap() error { return e.Err }

// NotFoundError reports a tensor name that a file does not hold.
type NotFoundError struct {
	File   string // the path given to Open
	Tensor string // the name asked for
}

// Error formats the error as `safetensors: FILE: no tensor "NAME"`.
func (e *NotFoundError) Error() string {
	return "safetensors: " + e.File + ": no tensor " + strconv.Quote(e.Tensor)
}

// ErrClosed is returned, wrapped with the file's path, by methods of a File
// after Close.
var ErrClosed = errors.New("safetensors: file already closed")

package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/durable"
)

// Tensor is one tensor to write: its name, dtype, shape and little-endian
// bytes, of exactly the length the shape and dtype give.
type Tensor struct {
	Name  string
	DType dtype.DType
	Shape []int64
	Data  []byte
}

// Write writes tensors and metadata as a safetensors file at path, replacing
// any file there atomically: the bytes go to a temporary file in the same
// directory, which is fsynced, renamed over path, and the directory fsynced.
// On error the temporary file is removed and path is untouched, except when
// only the final directory fsync fails: the complete file is then in place
// and the error says so.
//
// The tensors are validated first (see Encode for the layout and rules);
// invalid ones give a *FormatError naming path. The caller's slice is not
// reordered.
func Write(path string, tensors []Tensor, metadata map[string]string) (err error) {
	l, err := plan(tensors, metadata)
	if err != nil {
		if fe, ok := err.(*FormatError); ok {
			fe.File = path
		}
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := l.writeTo(tmp); err != nil {
		return fmt.Errorf("safetensors: write %s: %w", tmp.Name(), err)
	}
	// CreateTemp makes the file 0600; a checkpoint is meant to be shared.
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("safetensors: %s written, but syncing its directory failed: %w", path, err)
	}
	return nil
}

// WriteTo writes tensors and metadata in safetensors format to w, streaming
// each tensor's bytes from its Data, and returns the number of bytes written.
// The layout and validation are Encode's.
func WriteTo(w io.Writer, tensors []Tensor, metadata map[string]string) (int64, error) {
	l, err := plan(tensors, metadata)
	if err != nil {
		return 0, err
	}
	return l.writeTo(w)
}

// Encode returns tensors and metadata as the bytes of a safetensors file.
//
// The layout is deterministic: tensors sorted by name, their bytes
// contiguous in that order from offset 0; the header compact JSON with
// "__metadata__" first (keys sorted, left out when metadata is empty), then
// the tensors with fields in the order dtype, shape, data_offsets; no HTML
// escaping; spaces appended so that the header length is a multiple of 8.
// The same tensors and metadata, in any order, give the same bytes.
//
// Names must be non-empty, unique, valid UTF-8 and not "__metadata__";
// metadata must be valid UTF-8; dtypes must be known safetensors dtypes;
// dimensions must be non-negative; len(Data) must equal the number of
// elements times the dtype size. Violations give a *FormatError.
func Encode(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	l, err := plan(tensors, metadata)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(int(l.size))
	if _, err := l.writeTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// layout is a validated file: its header region (padded) and the tensors in
// file order.
type layout struct {
	header []byte
	order  []*Tensor
	size   int64 // total file size
}

func plan(tensors []Tensor, metadata map[string]string) (*layout, error) {
	order := make([]*Tensor, len(tensors))
	for i := range tensors {
		order[i] = &tensors[i]
	}
	slices.SortFunc(order, func(a, b *Tensor) int { return strings.Compare(a.Name, b.Name) })

	for i, t := range order {
		switch {
		case t.Name == "":
			return nil, &FormatError{Field: FieldName, Msg: "empty tensor name"}
		case t.Name == metadataKey:
			return nil, &FormatError{Tensor: t.Name, Field: FieldName, Msg: "reserved name"}
		case !utf8.ValidString(t.Name):
			return nil, &FormatError{Tensor: t.Name, Field: FieldName, Msg: "not valid UTF-8"}
		case i > 0 && order[i-1].Name == t.Name:
			return nil, &FormatError{Tensor: t.Name, Field: FieldName, Msg: "duplicate tensor name"}
		}
		if t.DType.Size() == 0 {
			return nil, &FormatError{Tensor: t.Name, Field: FieldDType, Msg: fmt.Sprintf("unknown dtype %q", string(t.DType))}
		}
		for j, d := range t.Shape {
			if d < 0 {
				return nil, &FormatError{Tensor: t.Name, Field: FieldShape, Msg: fmt.Sprintf("dimension %d is %d, want a non-negative integer", j, d)}
			}
		}
		size, ok := byteSize(t.DType, t.Shape)
		if !ok {
			return nil, &FormatError{Tensor: t.Name, Field: FieldShape, Msg: fmt.Sprintf("%s of %s is too large", formatShape(t.Shape), t.DType)}
		}
		if int64(len(t.Data)) != size {
			return nil, &FormatError{Tensor: t.Name, Field: FieldData,
				Msg: fmt.Sprintf("%d bytes given, shape %s of %s needs %d", len(t.Data), formatShape(t.Shape), t.DType, size)}
		}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, &FormatError{Field: FieldMetadata, Msg: fmt.Sprintf("key %q: not valid UTF-8", k)}
		}
	}

	var h []byte
	h = append(h, '{')
	if len(metadata) > 0 {
		h = appendString(h, metadataKey)
		h = append(h, ":{"...)
		for i, k := range slices.Sorted(maps.Keys(metadata)) {
			if i > 0 {
				h = append(h, ',')
			}
			h = appendString(h, k)
			h = append(h, ':')
			h = appendString(h, metadata[k])
		}
		h = append(h, '}')
	}
	var off int64
	for _, t := range order {
		if len(h) > 1 {
			h = append(h, ',')
		}
		h = appendString(h, t.Name)
		h = append(h, `:{"dtype":`...)
		h = appendString(h, string(t.DType))
		h = append(h, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				h = append(h, ',')
			}
			h = strconv.AppendInt(h, d, 10)
		}
		h = append(h, `],"data_offsets":[`...)
		h = strconv.AppendInt(h, off, 10)
		h = append(h, ',')
		off += int64(len(t.Data))
		h = strconv.AppendInt(h, off, 10)
		h = append(h, "]}"...)
	}
	h = append(h, '}')
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	if len(h) > MaxHeaderSize {
		return nil, &FormatError{Field: FieldHeaderSize, Msg: fmt.Sprintf("header would be %d bytes, more than the limit of %d", len(h), MaxHeaderSize)}
	}
	return &layout{header: h, order: order, size: 8 + int64(len(h)) + off}, nil
}

// appendString appends s as a JSON string. It escapes only what JSON
// requires (quote, backslash, control characters), so the output does not
// depend on an encoder's HTML-escaping choices; s is valid UTF-8.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// writeTo streams the file to w. A buffer gathers the header and small
// tensors; bufio passes tensors larger than its free space straight to w.
func (l *layout) writeTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(len(l.header)))
	bw.Write(prefix[:])
	bw.Write(l.header)
	for _, t := range l.order {
		if err := writeData(bw, t.Data); err != nil {
			break
		}
	}
	err := bw.Flush()
	if err == nil && cw.n != l.size {
		err = errors.New("short write")
	}
	return cw.n, err
}

// writeChunk is how many bytes of a tensor aliasing an open File's
// mapping writeData copies before it drops their pages.
const writeChunk = 8 << 20

// writeData writes one tensor's bytes. Bytes that alias an open File's
// mapping go a chunk at a time, each chunk's pages dropped from the
// process's resident memory once bw has taken it (written it, or copied it
// into its buffer), so that writing a large tensor straight from a mapped
// checkpoint does not leave all of it resident (see openMappings).
func writeData(bw *bufio.Writer, b []byte) error {
	if len(b) <= writeChunk || !inMapping(b) {
		_, err := bw.Write(b)
		return err
	}
	for len(b) > 0 {
		n := min(len(b), writeChunk)
		if _, err := bw.Write(b[:n]); err != nil {
			return err
		}
		dropInterior(b[:n])
		b = b[n:]
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

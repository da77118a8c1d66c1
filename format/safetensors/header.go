package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lfmq/lfmq/format/dtype"
)

// MaxHeaderSize bounds the header length, as the reference implementation
// (huggingface/safetensors) does: a header is read and parsed whole before
// anything else is checked, so its size is what an attacker controls.
const MaxHeaderSize = 100_000_000

const metadataKey = "__metadata__"

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name  string      // the header key
	DType dtype.DType // the element type
	Shape []int64     // the dimensions, outermost first; [] for a scalar
	// Begin and End delimit the tensor's bytes, [Begin, End), relative to
	// the start of the data section (the byte after the header).
	Begin, End int64
}

// NumElements returns the product of the dimensions (1 for a scalar of
// shape []). It returns -1 if a dimension is negative or the product
// overflows int64, which a TensorInfo from this package never has.
func (t TensorInfo) NumElements() int64 {
	n, ok := numElements(t.Shape)
	if !ok {
		return -1
	}
	return n
}

// numElements multiplies the dimensions, reporting false for a negative
// dimension or for overflow. Overflow of the non-zero dimensions is an error
// even when another dimension is zero, so that no accepted shape has a
// dimension product that cannot be computed in any order.
func numElements(shape []int64) (int64, bool) {
	var p uint64 = 1
	zero := false
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			zero = true
			continue
		}
		hi, lo := bits.Mul64(p, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		p = lo
	}
	if zero {
		return 0, true
	}
	return int64(p), true
}

// byteSize returns the number of bytes of a tensor, reporting false on
// overflow or for an unknown dtype or bad shape.
func byteSize(d dtype.DType, shape []int64) (int64, bool) {
	n, ok := numElements(shape)
	size := int64(d.Size())
	if !ok || size == 0 || n > math.MaxInt64/size {
		return 0, false
	}
	return n * size, true
}

// Header is a parsed and validated safetensors header.
type Header struct {
	// Tensors lists every tensor, sorted by name.
	Tensors []TensorInfo
	// Metadata holds the __metadata__ object; nil if the header has none.
	Metadata map[string]string
	// DataLen is the length of the data section the header describes.
	DataLen int64

	index map[string]int
}

// Tensor returns the tensor called name. It finds tensors only in headers
// returned by ParseHeader.
func (h *Header) Tensor(name string) (TensorInfo, bool) {
	i, ok := h.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return h.Tensors[i], true
}

// ParseHeader parses and validates the JSON header of a safetensors file
// whose data section is dataLen bytes long. header is the whole header
// region (the bytes after the 8-byte length prefix, including any trailing
// space padding). Every error is a *FormatError with an empty File.
func ParseHeader(header []byte, dataLen int64) (*Header, error) {
	if dataLen < 0 {
		return nil, &FormatError{Field: FieldData, Msg: fmt.Sprintf("negative data section length %d", dataLen)}
	}
	if len(header) == 0 {
		return nil, &FormatError{Field: FieldHeaderSize, Msg: "header is empty"}
	}
	if len(header) > MaxHeaderSize {
		return nil, &FormatError{Field: FieldHeaderSize,
			Msg: fmt.Sprintf("header is %d bytes, more than the limit of %d", len(header), MaxHeaderSize)}
	}
	// encoding/json would silently replace invalid UTF-8 by U+FFFD, making
	// two different names equal; refuse it before decoding.
	if !utf8.Valid(header) {
		return nil, &FormatError{Field: FieldHeader, Msg: "header is not valid UTF-8"}
	}
	if header[0] != '{' {
		return nil, &FormatError{Field: FieldHeader, Msg: fmt.Sprintf("header starts with %q, want '{'", header[0])}
	}
	p := &parser{dec: json.NewDecoder(bytes.NewReader(header)), dataLen: dataLen}
	p.dec.UseNumber()
	h, err := p.parse()
	if err != nil {
		return nil, err
	}
	// Only JSON whitespace may follow the object: writers pad with spaces.
	rest := header[p.dec.InputOffset():]
	if i := bytes.IndexFunc(rest, func(r rune) bool { return !strings.ContainsRune(" \t\r\n", r) }); i >= 0 {
		return nil, &FormatError{Field: FieldHeader,
			Msg: fmt.Sprintf("unexpected %q at offset %d after the header object", rest[i], p.dec.InputOffset()+int64(i))}
	}
	if err := checkLayout(h); err != nil {
		return nil, err
	}
	return h, nil
}

// parser walks the header with json.Decoder tokens, which lets it see
// duplicate keys (a decode into a map would keep the last one silently).
// The format has a fixed depth, so the walk needs no recursion: an
// unexpected object or array is an error at its first token, except inside
// shape and data_offsets, which are read whole and refused if nested.
type parser struct {
	dec     *json.Decoder
	dataLen int64
}

// token returns the next token, mapping syntax errors and a premature end to
// a FormatError for tensor (possibly empty) and field.
func (p *parser) token(tensor, field string) (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(tensor, field, err)
	}
	return tok, nil
}

// syntax maps a decoder error to a FormatError.
func (p *parser) syntax(tensor, field string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	where := ""
	if field != FieldHeader {
		where = " in " + field
	}
	msg := fmt.Sprintf("invalid JSON%s: %v", where, err)
	if se, ok := err.(*json.SyntaxError); ok {
		msg += fmt.Sprintf(" (offset %d)", se.Offset)
	}
	return &FormatError{Tensor: tensor, Field: FieldHeader, Msg: msg, Err: err}
}

// delim reads the next token and requires it to be the delimiter want.
func (p *parser) delim(tensor, field string, want json.Delim, what string) error {
	tok, err := p.token(tensor, field)
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return &FormatError{Tensor: tensor, Field: field, Msg: fmt.Sprintf("want %s, got %s", what, describe(tok))}
	}
	return nil
}

// str reads the next token and requires it to be a string.
func (p *parser) str(tensor, field string) (string, error) {
	tok, err := p.token(tensor, field)
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", &FormatError{Tensor: tensor, Field: field, Msg: fmt.Sprintf("want a string, got %s", describe(tok))}
	}
	return s, nil
}

// ints reads the next value, which must be an array of non-negative
// integers in plain decimal notation that fit an int64. what(i) names
// element i in messages.
//
// The array is read whole with Decode rather than token by token: the
// decoder's Token path costs an allocated error string for every number it
// ends, which made number-heavy headers several times slower to parse. The
// decoder has already checked that the value is well-formed JSON, so
// splitting it at commas is exact once nested values are refused.
func (p *parser) ints(tensor, field string, what func(int) string) ([]int64, error) {
	var raw json.RawMessage
	if err := p.dec.Decode(&raw); err != nil {
		return nil, p.syntax(tensor, field, err)
	}
	body := bytes.TrimSpace(raw)
	if len(body) < 2 || body[0] != '[' {
		return nil, &FormatError{Tensor: tensor, Field: field, Msg: "want an array, got " + kind(body)}
	}
	body = bytes.TrimSpace(body[1 : len(body)-1])
	if len(body) == 0 {
		return []int64{}, nil
	}
	out := make([]int64, 0, bytes.Count(body, []byte{','})+1)
	for elem := range bytes.SplitSeq(body, []byte{','}) {
		elem = bytes.TrimSpace(elem)
		if v, ok := parseDecimal(elem); ok {
			out = append(out, v)
			continue
		}
		s, w := string(elem), what(len(out))
		switch {
		case s == "" || strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("0123456789-+.eE", r) }) >= 0:
			return nil, &FormatError{Tensor: tensor, Field: field, Msg: fmt.Sprintf("%s: want an integer, got %s", w, kind(elem))}
		case s[0] == '-':
			return nil, &FormatError{Tensor: tensor, Field: field, Msg: fmt.Sprintf("%s is %s, want a non-negative integer", w, s)}
		case strings.ContainsAny(s, ".eE"):
			return nil, &FormatError{Tensor: tensor, Field: field, Msg: fmt.Sprintf("%s is %s, want an integer", w, s)}
		}
		return nil, &FormatError{Tensor: tensor, Field: field, Msg: fmt.Sprintf("%s is %s, too large", w, s)}
	}
	return out, nil
}

// parseDecimal parses a non-empty run of ASCII digits that fits an int64.
// JSON has already excluded leading zeros.
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// kind names the kind of a raw JSON value for error messages.
func kind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '[':
		return "an array"
	case '{':
		return "an object"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// describe names a token's kind for error messages without echoing
// arbitrarily long input.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

func (p *parser) parse() (*Header, error) {
	if err := p.delim("", FieldHeader, '{', "an object"); err != nil {
		return nil, err
	}
	h := &Header{DataLen: p.dataLen, index: make(map[string]int)}
	sawMetadata := false
	for p.dec.More() {
		name, err := p.str("", FieldHeader)
		if err != nil {
			return nil, err
		}
		if name == metadataKey {
			if sawMetadata {
				return nil, &FormatError{Field: FieldMetadata, Msg: "duplicate key " + metadataKey}
			}
			sawMetadata = true
			if h.Metadata, err = p.metadata(); err != nil {
				return nil, err
			}
			continue
		}
		if name == "" {
			return nil, &FormatError{Field: FieldName, Msg: "empty tensor name"}
		}
		if _, dup := h.index[name]; dup {
			return nil, &FormatError{Tensor: name, Field: FieldName, Msg: "duplicate tensor name"}
		}
		t, err := p.entry(name)
		if err != nil {
			return nil, err
		}
		h.index[name] = len(h.Tensors)
		h.Tensors = append(h.Tensors, t)
	}
	if err := p.delim("", FieldHeader, '}', "'}'"); err != nil {
		return nil, err
	}
	slices.SortFunc(h.Tensors, func(a, b TensorInfo) int { return strings.Compare(a.Name, b.Name) })
	for i, t := range h.Tensors {
		h.index[t.Name] = i
	}
	return h, nil
}

func (p *parser) metadata() (map[string]string, error) {
	if err := p.delim("", FieldMetadata, '{', "an object of strings"); err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for p.dec.More() {
		k, err := p.str("", FieldMetadata)
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, &FormatError{Field: FieldMetadata, Msg: fmt.Sprintf("duplicate key %q", k)}
		}
		tok, err := p.token("", FieldMetadata)
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			return nil, &FormatError{Field: FieldMetadata, Msg: fmt.Sprintf("key %q: want a string value, got %s", k, describe(tok))}
		}
		m[k] = v
	}
	if err := p.delim("", FieldMetadata, '}', "'}'"); err != nil {
		return nil, err
	}
	return m, nil
}

// entry parses one tensor's {"dtype", "shape", "data_offsets"} object and
// checks it on its own; checkLayout checks the spans against each other.
func (p *parser) entry(name string) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	if err := p.delim(name, FieldHeader, '{', "an object"); err != nil {
		return t, err
	}
	var haveDType, haveShape, haveOffsets bool
	for p.dec.More() {
		key, err := p.str(name, FieldHeader)
		if err != nil {
			return t, err
		}
		switch key {
		case FieldDType:
			if haveDType {
				return t, &FormatError{Tensor: name, Field: FieldDType, Msg: "duplicate key"}
			}
			haveDType = true
			s, err := p.str(name, FieldDType)
			if err != nil {
				return t, err
			}
			if t.DType, err = dtype.Parse(s); err != nil {
				return t, &FormatError{Tensor: name, Field: FieldDType, Msg: fmt.Sprintf("unknown dtype %q", s), Err: err}
			}
		case FieldShape:
			if haveShape {
				return t, &FormatError{Tensor: name, Field: FieldShape, Msg: "duplicate key"}
			}
			haveShape = true
			shape, err := p.ints(name, FieldShape, func(i int) string { return fmt.Sprintf("dimension %d", i) })
			if err != nil {
				return t, err
			}
			t.Shape = shape
		case FieldDataOffsets:
			if haveOffsets {
				return t, &FormatError{Tensor: name, Field: FieldDataOffsets, Msg: "duplicate key"}
			}
			haveOffsets = true
			offs, err := p.ints(name, FieldDataOffsets, func(i int) string {
				if i < 2 {
					return [2]string{"begin", "end"}[i]
				}
				return fmt.Sprintf("offset %d", i)
			})
			if err != nil {
				return t, err
			}
			if len(offs) != 2 {
				return t, &FormatError{Tensor: name, Field: FieldDataOffsets, Msg: fmt.Sprintf("want exactly 2 offsets [begin, end], got %d", len(offs))}
			}
			t.Begin, t.End = offs[0], offs[1]
		default:
			return t, &FormatError{Tensor: name, Field: FieldHeader, Msg: fmt.Sprintf("unknown field %q", key)}
		}
	}
	if err := p.delim(name, FieldHeader, '}', "'}'"); err != nil {
		return t, err
	}
	switch {
	case !haveDType:
		return t, &FormatError{Tensor: name, Field: FieldDType, Msg: "missing"}
	case !haveShape:
		return t, &FormatError{Tensor: name, Field: FieldShape, Msg: "missing"}
	case !haveOffsets:
		return t, &FormatError{Tensor: name, Field: FieldDataOffsets, Msg: "missing"}
	}
	size, ok := byteSize(t.DType, t.Shape)
	if !ok {
		return t, &FormatError{Tensor: name, Field: FieldShape,
			Msg: fmt.Sprintf("%s of %s is too large", formatShape(t.Shape), t.DType)}
	}
	if t.Begin > t.End {
		return t, &FormatError{Tensor: name, Field: FieldDataOffsets,
			Msg: fmt.Sprintf("span [%d,%d) ends before it begins", t.Begin, t.End)}
	}
	if t.End > p.dataLen {
		return t, &FormatError{Tensor: name, Field: FieldDataOffsets,
			Msg: fmt.Sprintf("span [%d,%d) runs past the end of the data section (%d bytes)", t.Begin, t.End, p.dataLen)}
	}
	if t.End-t.Begin != size {
		return t, &FormatError{Tensor: name, Field: FieldDataOffsets,
			Msg: fmt.Sprintf("span [%d,%d) holds %d bytes, shape %s of %s needs %d", t.Begin, t.End, t.End-t.Begin, formatShape(t.Shape), t.DType, size)}
	}
	return t, nil
}

// checkLayout requires the spans, taken in order of offset, to tile the data
// section exactly: no overlap, no gap, no bytes after the last one.
func checkLayout(h *Header) error {
	order := make([]int, len(h.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ta, tb := &h.Tensors[a], &h.Tensors[b]
		if ta.Begin != tb.Begin {
			return cmpInt64(ta.Begin, tb.Begin)
		}
		if ta.End != tb.End {
			return cmpInt64(ta.End, tb.End)
		}
		return strings.Compare(ta.Name, tb.Name)
	})
	var pos int64
	prev := ""
	for _, i := range order {
		t := &h.Tensors[i]
		switch {
		case t.Begin < pos:
			return &FormatError{Tensor: t.Name, Field: FieldDataOffsets,
				Msg: fmt.Sprintf("span [%d,%d) overlaps %q", t.Begin, t.End, prev)}
		case t.Begin > pos && prev == "":
			return &FormatError{Tensor: t.Name, Field: FieldDataOffsets,
				Msg: fmt.Sprintf("span [%d,%d) leaves a gap [0,%d) at the start of the data section", t.Begin, t.End, t.Begin)}
		case t.Begin > pos:
			return &FormatError{Tensor: t.Name, Field: FieldDataOffsets,
				Msg: fmt.Sprintf("span [%d,%d) leaves a gap [%d,%d) after %q", t.Begin, t.End, pos, t.Begin, prev)}
		}
		pos = t.End
		prev = t.Name
	}
	if pos != h.DataLen {
		return &FormatError{Field: FieldData,
			Msg: fmt.Sprintf("%d bytes after the last tensor (tensors end at %d, the data section at %d)", h.DataLen-pos, pos, h.DataLen)}
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func formatShape(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

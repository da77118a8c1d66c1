package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// maxJSONDepth bounds the nesting of decoded request JSON. Python's json
// module stops near 1000 levels too; no chat request needs more.
const maxJSONDepth = 1000

// Object is a JSON object that keeps its keys in input order, so that a
// template's tojson reproduces a request's tools and tool-call arguments
// byte for byte as Python's json.dumps would. The zero value is empty and
// ready to use; a nil *Object reads as empty.
type Object struct {
	keys []string
	vals map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{} }

// Len returns the number of keys.
func (o *Object) Len() int {
	if o == nil {
		return 0
	}
	return len(o.keys)
}

// Keys returns the keys in insertion order.
func (o *Object) Keys() []string {
	if o == nil {
		return nil
	}
	return append([]string(nil), o.keys...)
}

// Get returns the value stored under key.
func (o *Object) Get(key string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[key]
	return v, ok
}

// Set stores value under key. A new key goes last; an existing key keeps its
// position and gets the new value, as in a Python dict.
func (o *Object) Set(key string, value any) {
	if o.vals == nil {
		o.vals = make(map[string]any)
	}
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = value
}

// UnmarshalJSON decodes a JSON object, keeping key order. Nested values get
// the dynamic types that DecodeJSON documents.
func (o *Object) UnmarshalJSON(data []byte) error {
	v, err := DecodeJSON(data)
	if err != nil {
		return err
	}
	obj, ok := v.(*Object)
	if !ok {
		return fmt.Errorf("chat: JSON value is %s, not an object", jsonKind(v))
	}
	*o = *obj
	return nil
}

// MarshalJSON encodes the object compactly with keys in insertion order and
// without HTML escaping. Floats use Python's repr (1.0 stays "1.0").
// json.Marshal escapes <, > and & in the result again; a json.Encoder with
// SetEscapeHTML(false) keeps them.
func (o *Object) MarshalJSON() ([]byte, error) {
	v, err := toValue(o, nil, 0)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	enc := jsonEncoder{itemSep: ",", keySep: ":"}
	if err := enc.encode(&b, v, 0); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// decodePrefix starts DecodeJSON's errors.
const decodePrefix = "chat: decode JSON: "

// DecodeJSON decodes one JSON value into order-preserving Go values: nil,
// bool, int64 (an integer literal that fits), float64 (any other number),
// string, []any and *Object. Duplicate keys keep the first position and the
// last value, as Python's json.loads does.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf(decodePrefix+"%w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New(decodePrefix + "data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		case '{':
			obj := NewObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is %v, not a string", kt)
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				obj.Set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return parseNumber(string(t))
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// parseNumber keeps integer literals as int64 like Python keeps them int;
// integers beyond int64 become float64 (Python would keep them exact).
func parseNumber(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %q: %w", s, err)
	}
	return f, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case *Object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// jsonEncoder writes a template value as Python's json.dumps does with the
// given options (HF's tojson passes ensure_ascii=False by default).
type jsonEncoder struct {
	itemSep, keySep string
	indent          *string // nil: single line
	ensureASCII     bool
	sortKeys        bool
}

func (enc *jsonEncoder) newline(b *strings.Builder, level int) {
	b.WriteByte('\n')
	for range level {
		b.WriteString(*enc.indent)
	}
}

func (enc *jsonEncoder) encode(b *strings.Builder, v jinja.Value, level int) error {
	if level > maxJSONDepth {
		return errors.New("tojson: value nested too deeply")
	}
	switch {
	case v.IsUndefined():
		return errors.New("tojson: value is undefined")
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		f := v.AsFloat()
		switch {
		case math.IsNaN(f):
			b.WriteString("NaN")
		case math.IsInf(f, 1):
			b.WriteString("Infinity")
		case math.IsInf(f, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(f))
		}
	case v.IsString():
		writeJSONString(b, v.AsString(), enc.ensureASCII)
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				b.WriteString(enc.itemSep)
			}
			if enc.indent != nil {
				enc.newline(b, level+1)
			}
			if err := enc.encode(b, item, level+1); err != nil {
				return err
			}
		}
		if enc.indent != nil {
			enc.newline(b, level)
		}
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if enc.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(enc.itemSep)
			}
			if enc.indent != nil {
				enc.newline(b, level+1)
			}
			writeJSONString(b, k, enc.ensureASCII)
			b.WriteString(enc.keySep)
			item, _ := d.Get(k)
			if err := enc.encode(b, item, level+1); err != nil {
				return err
			}
		}
		if enc.indent != nil {
			enc.newline(b, level)
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: cannot encode %s", v.String())
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// writeJSONString follows CPython's json encoder: short escapes for
// " \ \n \r \t \b \f, \u00XX for other control characters, and with
// ensureASCII every non-ASCII rune as \uXXXX (surrogate pairs above U+FFFF).
// Nothing else is escaped: no HTML escaping, U+2028/U+2029 stay raw.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (ensureASCII && r >= 0x7f):
				if r > 0xffff {
					r -= 0x10000
					writeU4(b, 0xd800+(r>>10))
					writeU4(b, 0xdc00+(r&0x3ff))
				} else {
					writeU4(b, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

func writeU4(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[r>>12&0xf])
	b.WriteByte(hexDigits[r>>8&0xf])
	b.WriteByte(hexDigits[r>>4&0xf])
	b.WriteByte(hexDigits[r&0xf])
}

package parser

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// value is a parsed Python or JSON literal, kept in the shape json.dumps
// writes: numbers hold their canonical JSON text, objects their key order.
type value struct {
	kind valueKind
	b    bool    // kindBool
	s    string  // kindString; kindInt, kindFloat: the JSON number text
	list []value // kindList
	obj  *object // kindObject
}

type valueKind uint8

const (
	kindNull valueKind = iota
	kindBool
	kindInt
	kindFloat
	kindString
	kindList
	kindObject
)

// object is a dict that keeps the order keys were first written. A repeated
// key replaces the value and keeps the first position, as a Python dict
// does.
type object struct {
	keys  []string
	vals  []value
	index map[string]int
}

func (o *object) set(k string, v value) {
	if i, ok := o.index[k]; ok {
		o.vals[i] = v
		return
	}
	if o.index == nil {
		o.index = make(map[string]int)
	}
	o.index[k] = len(o.keys)
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *object) get(k string) (value, bool) {
	i, ok := o.index[k]
	if !ok {
		return value{}, false
	}
	return o.vals[i], true
}

// keyString turns a dict key into the JSON key json.dumps writes for it;
// ok is false for keys json.dumps rejects (lists and dicts are not even
// hashable in Python).
func (v value) keyString() (string, bool) {
	switch v.kind {
	case kindString, kindInt, kindFloat:
		return v.s, true
	case kindBool:
		if v.b {
			return "true", true
		}
		return "false", true
	case kindNull:
		return "null", true
	}
	return "", false
}

// appendJSON writes v as compact JSON.
func appendJSON(dst []byte, v value) []byte {
	switch v.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindBool:
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kindInt, kindFloat:
		return append(dst, v.s...)
	case kindString:
		return appendJSONString(dst, v.s)
	case kindList:
		dst = append(dst, '[')
		for i, e := range v.list {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, e)
		}
		return append(dst, ']')
	default:
		return appendJSONObject(dst, v.obj)
	}
}

func appendJSONObject(dst []byte, o *object) []byte {
	dst = append(dst, '{')
	for i, k := range o.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSON(dst, o.vals[i])
	}
	return append(dst, '}')
}

// appendJSONString writes s as a JSON string the way json.dumps with
// ensure_ascii=False does: only '"', '\\' and control characters are
// escaped (not <, >, &, U+2028 or U+2029, which Go's encoder escapes).
// Invalid UTF-8 becomes U+FFFD so the result is always valid JSON.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += n
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendPyFloat writes f as Python's repr(f) does, which is what
// json.dumps writes for a float: the shortest digits that round-trip,
// fixed notation with at least one fractional digit ("1.0") when the
// decimal exponent is in [-4, 16), otherwise d.ddde±XX with at least two
// exponent digits ("1e+16", "1e-05"). f must be finite.
func appendPyFloat(dst []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // [-]d[.ddd]e±dd
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	mark := 0
	for e[mark] != 'e' {
		mark++
	}
	var digits []byte
	for _, c := range e[:mark] {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	exp, _ := strconv.Atoi(string(e[mark+1:]))
	decpt := exp + 1 // value = 0.digits × 10^decpt
	if decpt <= -4 || decpt > 16 {
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	switch {
	case decpt <= 0:
		dst = append(dst, '0', '.')
		for range -decpt {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	case decpt >= len(digits):
		dst = append(dst, digits...)
		for range decpt - len(digits) {
			dst = append(dst, '0')
		}
		dst = append(dst, '.', '0')
	default:
		dst = append(dst, digits[:decpt]...)
		dst = append(dst, '.')
		dst = append(dst, digits[decpt:]...)
	}
	return dst
}

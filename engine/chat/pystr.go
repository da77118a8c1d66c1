package chat

import (
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
)

// pyStr returns Python's str() of a template value, which is what Jinja2
// prints for {{ value }} and what the string filter returns: None, True,
// False, repr() of floats, and repr() of the items of lists and dicts.
// An undefined value prints as the empty string, as Jinja2's Undefined does.
func pyStr(v jinja.Value) string {
	switch {
	case v.IsUndefined():
		return ""
	case v.IsString():
		return v.AsString()
	}
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

// writeRepr writes Python's repr() of v.
func writeRepr(b *strings.Builder, v jinja.Value, depth int) {
	if depth > maxJSONDepth {
		b.WriteString("...")
		return
	}
	switch {
	case v.IsUndefined():
		b.WriteString("Undefined")
	case v.IsNone():
		b.WriteString("None")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		f := v.AsFloat()
		switch {
		case math.IsNaN(f):
			b.WriteString("nan")
		case math.IsInf(f, 1):
			b.WriteString("inf")
		case math.IsInf(f, -1):
			b.WriteString("-inf")
		default:
			b.WriteString(pyFloat(f))
		}
	case v.IsString():
		writeStrRepr(b, v.AsString())
	case v.IsList():
		b.WriteByte('[')
		for i, item := range v.AsList().Items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, item, depth+1)
		}
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		b.WriteByte('{')
		for i, k := range d.OrderedKeys() {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStrRepr(b, k)
			b.WriteString(": ")
			item, _ := d.Get(k)
			writeRepr(b, item, depth+1)
		}
		b.WriteByte('}')
	default:
		b.WriteString(v.String())
	}
}

// writeStrRepr follows CPython's unicode_repr: single quotes unless the
// text holds a single quote and no double quote; backslash escapes for the
// quote, backslash, \t \n \r; \xNN, \uNNNN or \UNNNNNNNN for characters
// that are not printable. Go's unicode.IsPrint and Python's
// str.isprintable agree: both admit exactly the letter, mark, number,
// punctuation and symbol categories plus the ASCII space.
func writeStrRepr(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			writeHexEscape(b, 'x', r, 2)
		case r < 0x7f || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			writeHexEscape(b, 'x', r, 2)
		case r <= 0xffff:
			writeHexEscape(b, 'u', r, 4)
		default:
			writeHexEscape(b, 'U', r, 8)
		}
	}
	b.WriteByte(quote)
}

func writeHexEscape(b *strings.Builder, kind byte, r rune, width int) {
	b.WriteByte('\\')
	b.WriteByte(kind)
	for shift := (width - 1) * 4; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>shift)&0xf])
	}
}

// pyFloat formats a finite float as Python's repr(): the shortest digits
// that round-trip, in positional notation when the decimal exponent is in
// (-4, 16], otherwise in scientific notation with a signed, at least
// two-digit exponent; integral values keep a ".0".
func pyFloat(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // e.g. "-1.2345e+06"
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, exp, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	decpt := e + 1 // digits[0] sits just left of the point when decpt == 1
	var out string
	switch {
	case decpt > -4 && decpt <= 16:
		switch {
		case decpt <= 0:
			out = "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			out = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			out = digits[:decpt] + "." + digits[decpt:]
		}
	default:
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		x := decpt - 1
		esign := "+"
		if x < 0 {
			esign, x = "-", -x
		}
		es := strconv.Itoa(x)
		if len(es) < 2 {
			es = "0" + es
		}
		out += "e" + esign + es
	}
	return sign + out
}

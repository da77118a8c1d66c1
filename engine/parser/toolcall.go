package parser

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxDepth bounds the nesting of lists, tuples and dicts in a tool-call
// body, so that hostile output cannot exhaust the stack; deeper is a parse
// failure (CPython's parser stops at 200 nested brackets).
const maxDepth = 256

// maxRadixDigits bounds hexadecimal, octal and binary integer literals,
// whose conversion to decimal is superlinear. Decimal integers need no
// bound: they are copied as digits.
const maxRadixDigits = 4096

// ParseToolCalls parses the body of a tool-call block, the text between
// <|tool_call_start|> and <|tool_call_end|>, and reports whether it holds
// at least one call and nothing else. It never panics.
//
// The Pythonic form is an optional [ … ] around comma-separated calls
// name(key=value, …): name is identifier(.identifier)* (a '-' between
// identifier characters is also accepted, as OpenAI names allow it);
// arguments are keyword only, and keywords may be Python reserved words.
// Values are the Python literals ast.literal_eval accepts that json.dumps
// can write, plus JSON's:
//   - strings in ' or ", triple-quoted too, with an r/R (raw) or u/U prefix,
//     adjacent literals concatenated; Python escapes (\\ \' \" \a \b \f \n
//     \r \t \v, octal \ooo, \xhh, \uXXXX, \UXXXXXXXX, backslash-newline);
//     unknown escapes, \N{…} included, keep the backslash. Unlike Python, a
//     raw newline inside a one-quote string is accepted. A \uXXXX pair of
//     surrogates becomes one character, a lone surrogate U+FFFD.
//   - integers, signed, with leading zeros, underscores and 0x/0o/0b
//     prefixes, written as canonical decimal digits of any size;
//   - floats (1.5, 1., .5, 1e5, -2.5E-3) written as Python's repr writes
//     them (1.0, 1e+16, 1e-05); one that overflows to infinity is a
//     failure, since JSON cannot hold it;
//   - True False None and true false null;
//   - lists [ … ], tuples ( … ) as lists (a parenthesised single value
//     without a comma is that value), dicts { … } whose keys are strings
//     (numbers, booleans and None are turned into strings as json.dumps
//     does).
//
// Whitespace may appear between any tokens and trailing commas are
// accepted everywhere. A repeated keyword or dict key keeps its first
// position and takes the last value, as a Python dict does.
//
// The JSON form is a dict {"name": …, "arguments": {…}} in place of a
// call, alone or in the list ("parameters" is accepted for "arguments",
// arguments may also be a string holding a JSON object, and
// {"type": "function", "function": {…}} is unwrapped); in such a dict "\/"
// is "/", as JSON has it. Other keys are ignored.
//
// An empty body or an empty list is a failure: a block without calls
// conveys nothing, and failing keeps its text as content.
func ParseToolCalls(body string) ([]ToolCall, bool) {
	p := &lit{s: body}
	p.ws()
	var calls []ToolCall
	var ok bool
	if p.eat('[') {
		calls, ok = p.calls(']')
		ok = ok && p.eat(']')
	} else {
		calls, ok = p.calls(0)
	}
	p.ws()
	if !ok || p.i != len(p.s) || len(calls) == 0 {
		return nil, false
	}
	return calls, true
}

// lit is a cursor over a tool-call body.
type lit struct {
	s     string
	i     int
	depth int
	json  bool // inside a JSON-form call: "\/" is "/"
}

func (p *lit) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *lit) peekAt(k int) byte {
	if p.i+k < len(p.s) {
		return p.s[p.i+k]
	}
	return 0
}

func (p *lit) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *lit) ws() {
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c < utf8.RuneSelf {
			if c != ' ' && (c < '\t' || c > '\r') {
				return
			}
			p.i++
			continue
		}
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if !unicode.IsSpace(r) {
			return
		}
		p.i += n
	}
}

// calls parses comma-separated calls up to close (0: the end of the body),
// leaving close for the caller.
func (p *lit) calls(close byte) ([]ToolCall, bool) {
	var out []ToolCall
	for {
		p.ws()
		if close == 0 && p.i == len(p.s) || close != 0 && p.peek() == close {
			return out, true
		}
		c, ok := p.call()
		if !ok {
			return nil, false
		}
		out = append(out, c)
		p.ws()
		if !p.eat(',') {
			return out, true
		}
	}
}

func (p *lit) call() (ToolCall, bool) {
	if p.peek() == '{' {
		return p.jsonCall()
	}
	name, ok := p.name()
	if !ok {
		return ToolCall{}, false
	}
	p.ws()
	if !p.eat('(') {
		return ToolCall{}, false
	}
	args := &object{}
	for {
		p.ws()
		if p.eat(')') {
			break
		}
		key, ok := p.ident(false)
		if !ok {
			return ToolCall{}, false
		}
		p.ws()
		if !p.eat('=') {
			return ToolCall{}, false
		}
		p.ws()
		v, ok := p.value()
		if !ok {
			return ToolCall{}, false
		}
		args.set(key, v)
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat(')') {
			break
		}
		return ToolCall{}, false
	}
	return ToolCall{Name: name, Arguments: string(appendJSONObject(nil, args))}, true
}

// jsonCall parses a {"name": …, "arguments": …} call.
func (p *lit) jsonCall() (ToolCall, bool) {
	saved := p.json
	p.json = true
	v, ok := p.value()
	p.json = saved
	if !ok || v.kind != kindObject {
		return ToolCall{}, false
	}
	o := v.obj
	if fn, ok := o.get("function"); ok && fn.kind == kindObject {
		if _, named := o.get("name"); !named {
			o = fn.obj
		}
	}
	name, ok := o.get("name")
	if !ok || name.kind != kindString || name.s == "" {
		return ToolCall{}, false
	}
	args, ok := o.get("arguments")
	if !ok {
		args, ok = o.get("parameters")
	}
	var ao *object
	switch {
	case !ok || args.kind == kindNull:
		ao = &object{}
	case args.kind == kindObject:
		ao = args.obj
	case args.kind == kindString:
		q := &lit{s: args.s, json: true}
		q.ws()
		v, ok := q.value()
		q.ws()
		if !ok || q.i != len(q.s) || v.kind != kindObject {
			return ToolCall{}, false
		}
		ao = v.obj
	default:
		return ToolCall{}, false
	}
	// The body should be UTF-8 already; a name is passed on, so make sure.
	return ToolCall{Name: strings.ToValidUTF8(name.s, "\uFFFD"), Arguments: string(appendJSONObject(nil, ao))}, true
}

// name parses identifier(.identifier)*.
func (p *lit) name() (string, bool) {
	start := p.i
	if _, ok := p.ident(true); !ok {
		return "", false
	}
	for p.peek() == '.' {
		p.i++
		if _, ok := p.ident(true); !ok {
			return "", false
		}
	}
	return p.s[start:p.i], true
}

// ident parses a Python identifier; with hyphen, a '-' between identifier
// characters too.
func (p *lit) ident(hyphen bool) (string, bool) {
	start := p.i
	r, n := utf8.DecodeRuneInString(p.s[p.i:])
	if !isIdentStart(r) {
		return "", false
	}
	p.i += n
	for p.i < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if isIdentContinue(r) {
			p.i += n
			continue
		}
		if hyphen && r == '-' {
			if r2, _ := utf8.DecodeRuneInString(p.s[p.i+1:]); isIdentContinue(r2) {
				p.i++
				continue
			}
		}
		break
	}
	return p.s[start:p.i], true
}

func isIdentStart(r rune) bool {
	return r == '_' || unicode.IsLetter(r)
}

func isIdentContinue(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) ||
		unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc)
}

// identFollows reports whether an identifier character follows, which
// makes a just-scanned number invalid (12abc, 1j).
func (p *lit) identFollows() bool {
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return p.i < len(p.s) && isIdentContinue(r)
}

func isStringPrefix(c byte) bool { return c == 'r' || c == 'R' || c == 'u' || c == 'U' }

// atString reports whether a string literal starts here.
func (p *lit) atString() bool {
	c := p.peek()
	if c == '"' || c == '\'' {
		return true
	}
	c2 := p.peekAt(1)
	return isStringPrefix(c) && (c2 == '"' || c2 == '\'')
}

func (p *lit) value() (value, bool) {
	if p.depth >= maxDepth {
		return value{}, false
	}
	if p.atString() {
		return p.str()
	}
	c := p.peek()
	switch {
	case c == '[':
		p.i++
		p.depth++
		list, _, ok := p.seq(']')
		p.depth--
		return value{kind: kindList, list: list}, ok
	case c == '(':
		p.i++
		p.depth++
		list, comma, ok := p.seq(')')
		p.depth--
		if ok && len(list) == 1 && !comma {
			return list[0], true
		}
		return value{kind: kindList, list: list}, ok
	case c == '{':
		p.i++
		p.depth++
		v, ok := p.dict()
		p.depth--
		return v, ok
	case c == '-' || c == '+':
		p.i++
		p.ws()
		if d := p.peek(); !isDigit(d) && !(d == '.' && isDigit(p.peekAt(1))) {
			return value{}, false
		}
		return p.number(c == '-')
	case isDigit(c) || c == '.' && isDigit(p.peekAt(1)):
		return p.number(false)
	}
	start := p.i
	if _, ok := p.ident(false); !ok {
		return value{}, false
	}
	switch p.s[start:p.i] {
	case "True", "true":
		return value{kind: kindBool, b: true}, true
	case "False", "false":
		return value{kind: kindBool}, true
	case "None", "null":
		return value{kind: kindNull}, true
	}
	return value{}, false
}

// seq parses values up to close and consumes it; comma reports a comma
// after the last value.
func (p *lit) seq(close byte) (list []value, comma, ok bool) {
	for {
		p.ws()
		if p.eat(close) {
			return list, comma, true
		}
		v, ok := p.value()
		if !ok {
			return nil, false, false
		}
		list = append(list, v)
		p.ws()
		comma = p.eat(',')
		if !comma {
			p.ws()
			return list, false, p.eat(close)
		}
	}
}

func (p *lit) dict() (value, bool) {
	o := &object{}
	for {
		p.ws()
		if p.eat('}') {
			return value{kind: kindObject, obj: o}, true
		}
		k, ok := p.value()
		if !ok {
			return value{}, false
		}
		key, ok := k.keyString()
		if !ok {
			return value{}, false
		}
		p.ws()
		if !p.eat(':') {
			return value{}, false
		}
		p.ws()
		v, ok := p.value()
		if !ok {
			return value{}, false
		}
		o.set(key, v)
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			return value{kind: kindObject, obj: o}, true
		}
		return value{}, false
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digitValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return 99
}

// digits scans digit ('_'? digit)* in base and returns the digits without
// underscores; none at all is ("", true), an underscore not followed by a
// digit is a failure.
func (p *lit) digits(base int) (string, bool) {
	var d []byte
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '_' && len(d) > 0 {
			if p.i+1 >= len(p.s) || digitValue(p.s[p.i+1]) >= base {
				return "", false
			}
			p.i++
			continue
		}
		if digitValue(c) >= base {
			break
		}
		d = append(d, c)
		p.i++
	}
	return string(d), true
}

func (p *lit) number(neg bool) (value, bool) {
	if p.peek() == '0' {
		base := 0
		switch p.peekAt(1) {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			p.i += 2
			if p.peek() == '_' { // Python allows 0x_1f
				p.i++
			}
			d, ok := p.digits(base)
			if !ok || d == "" || len(d) > maxRadixDigits || p.identFollows() {
				return value{}, false
			}
			n, _ := new(big.Int).SetString(d, base)
			if neg {
				n.Neg(n)
			}
			return value{kind: kindInt, s: n.String()}, true
		}
	}
	ip, ok := p.digits(10)
	if !ok {
		return value{}, false
	}
	isFloat := false
	var fp, exp string
	if p.eat('.') {
		isFloat = true
		if fp, ok = p.digits(10); !ok {
			return value{}, false
		}
	}
	if ip == "" && fp == "" {
		return value{}, false
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		sign := ""
		if c := p.peek(); c == '+' || c == '-' {
			sign = string(c)
			p.i++
		}
		d, ok := p.digits(10)
		if !ok || d == "" {
			return value{}, false
		}
		isFloat = true
		exp = "e" + sign + d
	}
	if p.identFollows() {
		return value{}, false
	}
	if !isFloat {
		i := 0
		for i < len(ip)-1 && ip[i] == '0' {
			i++
		}
		ip = ip[i:]
		if neg && ip != "0" {
			ip = "-" + ip
		}
		return value{kind: kindInt, s: ip}, true
	}
	if ip == "" {
		ip = "0"
	}
	if fp == "" {
		fp = "0"
	}
	f, err := strconv.ParseFloat(ip+"."+fp+exp, 64)
	// An underflow to zero is a range error too, and fine: Python gives 0.0.
	if err != nil && !isRangeErr(err) || math.IsInf(f, 0) {
		return value{}, false
	}
	if neg {
		f = -f
	}
	return value{kind: kindFloat, s: string(appendPyFloat(nil, f))}, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// str parses one or more adjacent string literals.
func (p *lit) str() (value, bool) {
	var b []byte
	for {
		raw := false
		if c := p.peek(); isStringPrefix(c) {
			raw = c == 'r' || c == 'R'
			p.i++
		}
		var ok bool
		if b, ok = p.strBody(b, raw); !ok {
			return value{}, false
		}
		save := p.i
		p.ws()
		if !p.atString() {
			p.i = save
			return value{kind: kindString, s: string(b)}, true
		}
	}
}

// strBody parses one quoted literal, the cursor on its opening quote, and
// appends its value to b.
func (p *lit) strBody(b []byte, raw bool) ([]byte, bool) {
	s := p.s
	q := s[p.i]
	triple := p.peekAt(1) == q && p.peekAt(2) == q
	if triple {
		p.i += 3
	} else {
		p.i++
	}
	for p.i < len(s) {
		c := s[p.i]
		if c == q {
			if !triple {
				p.i++
				return b, true
			}
			if p.peekAt(1) == q && p.peekAt(2) == q {
				p.i += 3
				return b, true
			}
			b = append(b, c)
			p.i++
			continue
		}
		if c != '\\' {
			b = append(b, c)
			p.i++
			continue
		}
		if p.i+1 >= len(s) {
			return nil, false
		}
		e := s[p.i+1]
		if raw {
			// A raw string keeps the backslash, and an escaped quote does
			// not end it.
			b = append(b, '\\', e)
			p.i += 2
			continue
		}
		p.i += 2
		switch e {
		case '\n':
		case '\r':
			p.eat('\n')
		case '\\', '\'', '"':
			b = append(b, e)
		case 'a':
			b = append(b, '\a')
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'v':
			b = append(b, '\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := int(e - '0')
			for k := 0; k < 2 && p.i < len(s) && '0' <= s[p.i] && s[p.i] <= '7'; k++ {
				n = n*8 + int(s[p.i]-'0')
				p.i++
			}
			b = utf8.AppendRune(b, rune(n))
		case 'x':
			n, ok := p.hex(2)
			if !ok {
				return nil, false
			}
			b = utf8.AppendRune(b, rune(n))
		case 'u':
			n, ok := p.hex(4)
			if !ok {
				return nil, false
			}
			if 0xD800 <= n && n < 0xDC00 && p.peek() == '\\' && p.peekAt(1) == 'u' {
				save := p.i
				p.i += 2
				if lo, ok := p.hex(4); ok && 0xDC00 <= lo && lo < 0xE000 {
					n = 0x10000 + (n-0xD800)<<10 + (lo - 0xDC00)
				} else {
					p.i = save
				}
			}
			b = utf8.AppendRune(b, rune(n)) // a lone surrogate becomes U+FFFD
		case 'U':
			n, ok := p.hex(8)
			if !ok || n > unicode.MaxRune {
				return nil, false
			}
			b = utf8.AppendRune(b, rune(n))
		case '/':
			if !p.json {
				b = append(b, '\\')
			}
			b = append(b, '/')
		default:
			// Unknown escape: Python keeps the backslash; the character
			// after it is read again as ordinary text.
			b = append(b, '\\')
			p.i--
		}
	}
	return nil, false
}

// hex reads exactly n hexadecimal digits.
func (p *lit) hex(n int) (int, bool) {
	if p.i+n > len(p.s) {
		return 0, false
	}
	v := 0
	for k := range n {
		d := digitValue(p.s[p.i+k])
		if d >= 16 {
			return 0, false
		}
		v = v*16 + d
	}
	p.i += n
	return v, true
}

package chat

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names under which the HF-compatible helpers are handed to the engine. The
// translation renames the tojson and string filters to them and wraps every
// {{ expression }} in the print filter, because the engine's own tojson,
// string and output conversion differ from Python in details that change
// prompts (float formatting, U+2028 escaping, None printing, repr quoting).
const (
	fnPrint  = "__lfmq_str"
	fnToJSON = "__lfmq_tojson"
)

// translate rewrites a Jinja2 template, read the way Hugging Face's
// apply_chat_template reads it (trim_blocks and lstrip_blocks on,
// keep_trailing_newline off, newlines normalised to "\n"), into a template
// for the engine that needs no whitespace handling at all:
//
//   - every piece of literal text, already trimmed as Jinja2's lexer trims
//     it, becomes a string-literal output {{ '...' }}, so the engine never
//     sees raw text and its own trimming rules have nothing to act on;
//   - comments are dropped, {% raw %} bodies become literals, and the
//     "-"/"+" whitespace markers are removed from tags after being applied;
//   - string literals inside tags are re-escaped to the escapes the engine
//     understands, floats like 1e5 get the ".0" it needs, and "}}" or "%}"
//     inside an expression are spaced apart;
//   - the tojson and string filters and {{ }} output go to fnToJSON and
//     fnPrint.
//
// Line numbers are kept: empty comments carrying the newlines that trimming
// removed are inserted so that each tag starts on its original line, which
// keeps the engine's error positions meaningful.
func translate(src string) (string, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")
	t := &translator{src: src, lineStarting: true}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			t.newlines = append(t.newlines, i)
		}
	}
	if err := t.run(); err != nil {
		return "", err
	}
	return t.out.String(), nil
}

// syntaxError is a template error found by the translation.
type syntaxError struct {
	line int
	msg  string
}

func (e *syntaxError) Error() string { return e.msg }

type endMode int

const (
	endPlain endMode = iota // the tag consumes nothing after it
	endStrip                // "-": all whitespace after the tag
	endTrim                 // trim_blocks: one newline after the tag
)

type translator struct {
	src          string
	newlines     []int // offsets of '\n' in src
	out          strings.Builder
	written      int  // newlines written to out
	lineStarting bool // the previous tag's match ended with "\n" (Jinja2's line_starting)
}

func (t *translator) lineAt(off int) int {
	return sort.SearchInts(t.newlines, off) + 1
}

func (t *translator) errorf(off int, format string, args ...any) error {
	return &syntaxError{line: t.lineAt(off), msg: fmt.Sprintf(format, args...)}
}

// align pads the output with newlines inside an empty comment so that the
// next tag starts on the line where its source starts.
func (t *translator) align(off int) {
	if n := t.lineAt(off) - 1 - t.written; n > 0 {
		t.write("{#" + strings.Repeat("\n", n) + "#}")
	}
}

func (t *translator) write(s string) {
	t.out.WriteString(s)
	t.written += strings.Count(s, "\n")
}

func (t *translator) emitText(text string, off int) {
	if text == "" {
		return
	}
	t.align(off)
	var b strings.Builder
	b.WriteString("{{ '")
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\\', '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c) // raw newlines keep the line count
		}
	}
	b.WriteString("' }}")
	t.write(b.String())
}

func (t *translator) run() error {
	src := t.src
	pos := 0
	for pos < len(src) {
		open := indexOpener(src, pos)
		if open < 0 {
			t.emitText(src[pos:], pos)
			return nil
		}
		text := src[pos:open]
		kind := src[open+1]
		p := open + 2
		var sign byte
		if p < len(src) && (src[p] == '-' || src[p] == '+') {
			sign = src[p]
			p++
		}
		if kind == '%' {
			if end, strip, ok := matchRawBegin(src, open); ok {
				t.emitText(t.leftText(text, sign, true), pos)
				var err error
				pos, err = t.raw(open, end, strip)
				if err != nil {
					return err
				}
				continue
			}
		}
		t.emitText(t.leftText(text, sign, kind != '{'), pos)
		var err error
		switch kind {
		case '#':
			pos, err = t.comment(open, p)
		default:
			pos, err = t.tag(open, p, kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// indexOpener returns the offset of the first "{{", "{%" or "{#" at or after
// pos, or -1.
func indexOpener(src string, pos int) int {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 {
			return -1
		}
		i += pos
		if i+1 < len(src) {
			switch src[i+1] {
			case '{', '%', '#':
				return i
			}
		}
		pos = i + 1
	}
}

// leftText applies the opening tag's whitespace control to the text before
// it, as Jinja2's lexer does: "-" strips all trailing whitespace; otherwise,
// for block and comment tags (lstrip_blocks), spaces and tabs between the
// start of the line and the tag are removed, "+" keeping them.
func (t *translator) leftText(text string, sign byte, lstrip bool) string {
	switch {
	case sign == '-':
		return strings.TrimRightFunc(text, isPySpace)
	case sign != '+' && lstrip:
		l := strings.LastIndexByte(text, '\n') + 1
		if l > 0 || t.lineStarting {
			if rest := text[l:]; rest != "" && strings.TrimLeftFunc(rest, isPySpace) == "" {
				return text[:l]
			}
		}
	}
	return text
}

// consume applies a closing tag's whitespace control from pos and returns
// the new position.
func (t *translator) consume(pos int, mode endMode) int {
	start := pos
	switch mode {
	case endStrip:
		for pos < len(t.src) {
			r, n := utf8.DecodeRuneInString(t.src[pos:])
			if !isPySpace(r) {
				break
			}
			pos += n
		}
	case endTrim:
		if pos < len(t.src) && t.src[pos] == '\n' {
			pos++
		}
	}
	t.lineStarting = pos > start && t.src[pos-1] == '\n'
	return pos
}

// isPySpace reports whether Python's str.isspace holds for r, which is what
// Jinja2's rstrip() and \s see: Go's Unicode spaces plus the separators
// U+001C..U+001F.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func (t *translator) comment(open, p int) (int, error) {
	end := strings.Index(t.src[p:], "#}")
	if end < 0 {
		return 0, t.errorf(open, "missing end of comment tag")
	}
	end += p
	mode := endTrim
	if end > p {
		switch t.src[end-1] {
		case '-':
			mode = endStrip
		case '+':
			mode = endPlain
		}
	}
	return t.consume(end+2, mode), nil
}

// matchRawBegin matches {%[-+]? raw [-]%} at open. It returns the offset
// after the tag and whether it ended with "-%}".
func matchRawBegin(src string, open int) (end int, strip, ok bool) {
	p := open + 2
	if p < len(src) && (src[p] == '-' || src[p] == '+') {
		p++
	}
	p = skipSpace(src, p)
	if !strings.HasPrefix(src[p:], "raw") {
		return 0, false, false
	}
	p = skipSpace(src, p+3)
	switch {
	case strings.HasPrefix(src[p:], "-%}"):
		return p + 3, true, true
	case strings.HasPrefix(src[p:], "%}"):
		return p + 2, false, true
	}
	return 0, false, false
}

func skipSpace(src string, p int) int {
	for p < len(src) {
		r, n := utf8.DecodeRuneInString(src[p:])
		if !isPySpace(r) {
			break
		}
		p += n
	}
	return p
}

// raw emits the body of a {% raw %} block as literal text. The opening tag
// takes no trim_blocks newline (Jinja2 gives raw_begin no block suffix).
func (t *translator) raw(open, end int, strip bool) (int, error) {
	mode := endPlain
	if strip {
		mode = endStrip
	}
	body := t.consume(end, mode)
	for p := body; ; {
		i := strings.Index(t.src[p:], "{%")
		if i < 0 {
			return 0, t.errorf(open, "missing end of raw directive")
		}
		i += p
		q := i + 2
		var sign byte
		if q < len(t.src) && (t.src[q] == '-' || t.src[q] == '+') {
			sign = t.src[q]
			q++
		}
		q = skipSpace(t.src, q)
		if strings.HasPrefix(t.src[q:], "endraw") {
			q = skipSpace(t.src, q+len("endraw"))
			closeMode, n := endPlain, 0
			switch {
			case strings.HasPrefix(t.src[q:], "+%}"):
				closeMode, n = endPlain, 3
			case strings.HasPrefix(t.src[q:], "-%}"):
				closeMode, n = endStrip, 3
			case strings.HasPrefix(t.src[q:], "%}"):
				closeMode, n = endTrim, 2
			}
			if n > 0 {
				t.emitText(t.leftText(t.src[body:i], sign, true), body)
				return t.consume(q+n, closeMode), nil
			}
		}
		p = i + 2
	}
}

// tag translates one {{ }} or {% %} tag whose content starts at p.
func (t *translator) tag(open, p int, kind byte) (int, error) {
	src := t.src
	var (
		content  strings.Builder
		stack    []byte
		afterBar bool
		keyword  string
		tokens   int
	)
	// put appends to the content, spacing apart "}}" and "%}" so that the
	// engine's scanner does not take them for the end of the tag.
	put := func(s string) {
		if s == "" {
			return
		}
		cur := content.String()
		if s[0] == '}' && len(cur) > 0 && (cur[len(cur)-1] == '}' || cur[len(cur)-1] == '%') {
			content.WriteByte(' ')
		}
		content.WriteString(s)
	}
	for {
		if p >= len(src) {
			return 0, t.errorf(open, "unexpected end of template: tag is not closed")
		}
		if len(stack) == 0 {
			mode, n := endPlain, 0
			if kind == '%' {
				switch {
				case strings.HasPrefix(src[p:], "+%}"):
					mode, n = endPlain, 3
				case strings.HasPrefix(src[p:], "-%}"):
					mode, n = endStrip, 3
				case strings.HasPrefix(src[p:], "%}"):
					mode, n = endTrim, 2
				}
			} else {
				switch {
				case strings.HasPrefix(src[p:], "-}}"):
					mode, n = endStrip, 3
				case strings.HasPrefix(src[p:], "}}"):
					mode, n = endPlain, 2
				}
			}
			if n > 0 {
				if strings.TrimSpace(content.String()) == "" {
					return 0, t.errorf(open, "empty tag")
				}
				t.align(open)
				if kind == '%' {
					t.write("{% " + content.String() + " %}")
				} else {
					t.write("{{ (" + content.String() + ") | " + fnPrint + " }}")
				}
				return t.consume(p+n, mode), nil
			}
		}
		r, size := utf8.DecodeRuneInString(src[p:])
		switch {
		case isPySpace(r):
			put(src[p : p+size])
			p += size
			continue
		case r == '\'' || r == '"':
			end, lit, err := reencodeString(src, p)
			if err != nil {
				return 0, t.errorf(p, "%v", err)
			}
			put(lit)
			p = end
		case r == '_' || unicode.IsLetter(r):
			q := p
			for q < len(src) {
				r2, n2 := utf8.DecodeRuneInString(src[q:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
					break
				}
				q += n2
			}
			name := src[p:q]
			if tokens == 0 {
				keyword = name
			}
			// {% filter %} blocks only take the engine's built-in filters.
			if afterBar && (kind != '%' || keyword != "filter") {
				switch name {
				case "tojson":
					name = fnToJSON
				case "string":
					name = fnPrint
				}
			}
			put(name)
			p = q
		case r >= '0' && r <= '9':
			q, num := scanNumber(src, p)
			put(num)
			p = q
		default:
			switch r {
			case '(':
				stack = append(stack, ')')
			case '[':
				stack = append(stack, ']')
			case '{':
				stack = append(stack, '}')
			case ')', ']', '}':
				if len(stack) == 0 {
					return 0, t.errorf(p, "unexpected %q", r)
				}
				if want := stack[len(stack)-1]; want != byte(r) {
					return 0, t.errorf(p, "unexpected %q, expected %q", r, want)
				}
				stack = stack[:len(stack)-1]
			default:
				if !strings.ContainsRune("+-/*%~=<>!.:|,;", r) {
					return 0, t.errorf(p, "unexpected char %q", r)
				}
			}
			put(string(r))
			p += size
			afterBar = r == '|'
			tokens++
			continue
		}
		afterBar = false
		tokens++
	}
}

// scanNumber reads a Jinja2 number literal at p: digits with optional "_"
// separators, an optional fraction and an optional exponent. The result
// drops the separators and gives an exponent-only float the ".0" the engine
// needs to read it as a float.
func scanNumber(src string, p int) (int, string) {
	digits := func(q int) int {
		for q < len(src) && (src[q] >= '0' && src[q] <= '9' || src[q] == '_') {
			q++
		}
		return q
	}
	isDigit := func(q int) bool { return q < len(src) && src[q] >= '0' && src[q] <= '9' }
	q := digits(p)
	frac := false
	if q < len(src) && src[q] == '.' && isDigit(q+1) {
		q = digits(q + 1)
		frac = true
	}
	mant := strings.ReplaceAll(src[p:q], "_", "")
	if q < len(src) && (src[q] == 'e' || src[q] == 'E') {
		e := q + 1
		if e < len(src) && (src[e] == '+' || src[e] == '-') {
			e++
		}
		if isDigit(e) {
			end := digits(e)
			if !frac {
				mant += ".0"
			}
			return end, mant + "e" + strings.ReplaceAll(src[q+1:end], "_", "")
		}
	}
	return q, mant
}

// reencodeString reads the Jinja2 string literal at p (Python escapes) and
// returns the offset after it and an equivalent single-quoted literal that
// uses only the escapes the engine knows: \\ \' \n \t. Any other escape is
// replaced by the character it stands for.
func reencodeString(src string, p int) (int, string, error) {
	quote := src[p]
	var b strings.Builder
	b.WriteByte('\'')
	put := func(r rune) {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	i := p + 1
	for {
		if i >= len(src) {
			return 0, "", errors.New("unterminated string literal")
		}
		c := src[i]
		if c == quote {
			b.WriteByte('\'')
			return i + 1, b.String(), nil
		}
		if c != '\\' {
			if c == '\'' {
				b.WriteString(`\'`)
			} else {
				b.WriteByte(c) // raw bytes, raw newlines included, keep line numbers
			}
			i++
			continue
		}
		if i+1 >= len(src) {
			return 0, "", errors.New("unterminated string literal")
		}
		e := src[i+1]
		i += 2
		switch e {
		case '\n':
			// line continuation: nothing
		case '\\', '\'', '"':
			put(rune(e))
		case 'n':
			put('\n')
		case 't':
			put('\t')
		case 'r':
			put('\r')
		case 'a':
			put(7)
		case 'b':
			put(8)
		case 'f':
			put(12)
		case 'v':
			put(11)
		case 'x', 'u', 'U':
			n := 2
			switch e {
			case 'u':
				n = 4
			case 'U':
				n = 8
			}
			if i+n > len(src) {
				return 0, "", fmt.Errorf(`truncated \%c escape`, e)
			}
			v, err := strconv.ParseUint(src[i:i+n], 16, 32)
			if err != nil || v > unicode.MaxRune {
				return 0, "", fmt.Errorf(`invalid \%c escape %q`, e, src[i:i+n])
			}
			put(rune(v))
			i += n
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for k := 0; k < 2 && i < len(src) && src[i] >= '0' && src[i] <= '7'; k++ {
				v = v*8 + int(src[i]-'0')
				i++
			}
			put(rune(v))
		case 'N':
			return 0, "", errors.New(`\N{...} escapes are not supported`)
		default:
			// Python keeps an unknown escape as written.
			b.WriteString(`\\`)
			i--
		}
	}
}

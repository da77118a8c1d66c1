package tokenizer

import (
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// llama3Pattern is the Split regex of the LFM2 tokenizers (the Llama-3
// pattern). A file whose Split pattern is exactly this string is run by
// llama3Splitter instead of regexp2.
const llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// gpt2Pattern is the split used by a ByteLevel pre-tokenizer with
// use_regex true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// A splitter cuts text into pre-tokens. split appends to dst the end offset
// of each piece of s, in order; the pieces are non-empty and cover s.
type splitter interface {
	split(dst []int, s string) []int
}

// wholeSplitter does not split: the text is one piece.
type wholeSplitter struct{}

func (wholeSplitter) split(dst []int, s string) []int {
	if s == "" {
		return dst
	}
	return append(dst, len(s))
}

// regexSplitter runs a Split pre-tokenizer with behavior Isolated: every
// match is a piece and so is every stretch between matches.
type regexSplitter struct {
	re *regexp2.Regexp
}

func newRegexSplitter(pattern string) (*regexSplitter, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, err
	}
	return &regexSplitter{re: re}, nil
}

func (r *regexSplitter) split(dst []int, s string) []int {
	if s == "" {
		return dst
	}
	// regexp2 works on runes and reports rune indices. Converting a string
	// to []rune turns each invalid byte into one U+FFFD, exactly as
	// utf8.DecodeRuneInString steps, so offs maps rune index to byte offset.
	runes := []rune(s)
	offs := make([]int, len(runes)+1)
	o := 0
	for i := range runes {
		offs[i] = o
		_, w := utf8.DecodeRuneInString(s[o:])
		o += w
	}
	offs[len(runes)] = o
	prev := 0
	m, err := r.re.FindRunesMatch(runes)
	for err == nil && m != nil {
		st, en := m.Index, m.Index+m.Length
		if en > st {
			if st > prev {
				dst = append(dst, offs[st])
			}
			dst = append(dst, offs[en])
			prev = en
		}
		m, err = r.re.FindNextMatch(m)
	}
	// A match error can only be a timeout, and no timeout is set; if one
	// happens anyway, the rest of the text stays one piece.
	if prev < len(runes) {
		dst = append(dst, len(s))
	}
	return dst
}

// Character classes of the Llama-3 pattern.
const (
	clsOther   uint8 = iota // not \s, \p{L} or \p{N}
	clsLetter               // \p{L}
	clsNumber               // \p{N}
	clsSpace                // \s other than CR and LF
	clsNewline              // \r or \n
)

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for b := 0; b < utf8.RuneSelf; b++ {
		asciiClass[b] = classOf(rune(b))
	}
}

func classOf(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return clsNewline
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// onigClassOf is classOf with Oniguruma's newer Unicode letters and
// numbers (unicode_onig.go).
func onigClassOf(r rune) uint8 {
	c := classOf(r)
	if c == clsOther && r > unicode.MaxLatin1 {
		switch {
		case unicode.Is(onigLetters, r):
			return clsLetter
		case unicode.Is(onigNumbers, r):
			return clsNumber
		}
	}
	return c
}

// llama3Splitter is a hand-written matcher for llama3Pattern. At each
// position it tries the alternatives in the pattern's order, with the
// backtracking outcomes worked out by hand:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)   contraction
//	[^\r\n\p{L}\p{N}]?\p{L}+       optional non-letter, non-number, non-CR/LF, then letters
//	\p{N}{1,3}                     up to three numbers
//	 ?[^\s\p{L}\p{N}]+[\r\n]*      optional space, other characters, then CR/LFs
//	\s*[\r\n]+                     a whitespace run with a CR/LF: cut after its last CR/LF
//	\s+(?!\S)                      a whitespace run at the end of text: all of it;
//	                               before a non-space: all but its last character
//	\s+                            (a single whitespace character before a non-space)
//
// An invalid UTF-8 byte is one character of class other, as U+FFFD is.
type llama3Splitter struct {
	// onig makes the splitter follow Oniguruma (Hugging Face) where it
	// differs from regexp2: "'ſ" is a contraction like "'s" (U+017F folds
	// to 's'), and the letters and numbers of Unicode 15.1 and 16.0 count
	// as \p{L} and \p{N}. Without it the splitter equals regexp2 running
	// llama3Pattern, which the tests check.
	onig bool
}

func (h *llama3Splitter) split(dst []int, s string) []int {
	for i := 0; i < len(s); {
		i = h.next(s, i)
		dst = append(dst, i)
	}
	return dst
}

// at returns the class and width of the character at s[i].
func (h *llama3Splitter) at(s string, i int) (uint8, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if h.onig {
		return onigClassOf(r), w
	}
	return classOf(r), w
}

// run returns the end of the run of class c characters starting at s[i].
func (h *llama3Splitter) run(s string, i int, c uint8) int {
	for i < len(s) {
		ci, w := h.at(s, i)
		if ci != c {
			break
		}
		i += w
	}
	return i
}

// next returns the end of the piece that starts at s[i], i < len(s).
func (h *llama3Splitter) next(s string, i int) int {
	c, w := h.at(s, i)
	j := i + w
	if s[i] == '\'' && j < len(s) {
		if k := h.contraction(s, j); k > 0 {
			return k
		}
	}
	switch c {
	case clsLetter:
		return h.run(s, j, clsLetter)
	case clsNumber:
		for n := 1; n < 3 && j < len(s); n++ {
			cj, wj := h.at(s, j)
			if cj != clsNumber {
				break
			}
			j += wj
		}
		return j
	}
	// c is other, space or newline.
	var c2 uint8
	w2 := 0
	if j < len(s) {
		c2, w2 = h.at(s, j)
	}
	if w2 > 0 && c2 == clsLetter && c != clsNewline {
		return h.run(s, j+w2, clsLetter)
	}
	if c == clsOther {
		return h.run(s, h.run(s, j, clsOther), clsNewline)
	}
	if s[i] == ' ' && w2 > 0 && c2 == clsOther {
		return h.run(s, h.run(s, j+w2, clsOther), clsNewline)
	}
	// A whitespace run [i, k).
	k, last, lastNL := i, i, -1
	for k < len(s) {
		ck, wk := h.at(s, k)
		if ck != clsSpace && ck != clsNewline {
			break
		}
		if ck == clsNewline {
			lastNL = k
		}
		last = k
		k += wk
	}
	switch {
	case lastNL >= 0:
		return lastNL + 1
	case k == len(s) || last == i:
		return k
	}
	return last
}

// contraction returns the end of a contraction whose letters start at s[j]
// (after an apostrophe), or 0 if there is none.
func (h *llama3Splitter) contraction(s string, j int) int {
	lower := func(b byte) byte { return b | 0x20 }
	switch lower(s[j]) {
	case 's', 't', 'm', 'd':
		if s[j] < utf8.RuneSelf {
			return j + 1
		}
	case 'r', 'v':
		if s[j] < utf8.RuneSelf && j+1 < len(s) && lower(s[j+1]) == 'e' {
			return j + 2
		}
	case 'l':
		if s[j] < utf8.RuneSelf && j+1 < len(s) && lower(s[j+1]) == 'l' {
			return j + 2
		}
	}
	// U+017F LATIN SMALL LETTER LONG S is C5 BF in UTF-8.
	if h.onig && j+1 < len(s) && s[j] == 0xC5 && s[j+1] == 0xBF {
		return j + 2
	}
	return 0
}

package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func pieces(sp splitter, s string) []string {
	var out []string
	prev := 0
	for _, e := range sp.split(nil, s) {
		out = append(out, s[prev:e])
		prev = e
	}
	return out
}

var (
	regexp2Llama3 = func() *regexSplitter {
		rs, err := newRegexSplitter(llama3Pattern)
		if err != nil {
			panic(err)
		}
		return rs
	}()
	handPlain = &llama3Splitter{}
	handOnig  = &llama3Splitter{onig: true}
)

// onigDivergent reports whether s holds a character on which Oniguruma
// (and so the onig splitter) and regexp2 may disagree.
func onigDivergent(s string) bool {
	for _, r := range s {
		if r == 'ſ' || (r > utf8.RuneSelf && onigClassOf(r) != classOf(r)) {
			return true
		}
	}
	return false
}

// checkSplitters compares the hand splitter with regexp2 running the same
// pattern from the file, and checks that the pieces cover s.
func checkSplitters(t *testing.T, s string) {
	t.Helper()
	want := pieces(regexp2Llama3, s)
	if got := pieces(handPlain, s); !slices.Equal(got, want) {
		t.Fatalf("hand splitter != regexp2 on %q\n got %q\nwant %q", s, got, want)
	}
	got := pieces(handOnig, s)
	if !onigDivergent(s) && !slices.Equal(got, want) {
		t.Fatalf("onig splitter != regexp2 on %q\n got %q\nwant %q", s, got, want)
	}
	if strings.Join(got, "") != s {
		t.Fatalf("pieces of %q do not cover it: %q", s, got)
	}
	for _, p := range got {
		if p == "" {
			t.Fatalf("empty piece in %q", got)
		}
	}
}

func TestSplitterMatchesRegexp2(t *testing.T) {
	texts := allTexts(t)
	for _, c := range loadHFVectors(t).Plain {
		texts = append(texts, c.Text)
	}
	n := 0
	for _, s := range texts {
		checkSplitters(t, s)
		n += len(s)
	}
	t.Logf("%d texts, %d bytes", len(texts), n)
}

// TestSplitterCases pins pieces measured with Hugging Face tokenizers
// 0.23.2, including where Oniguruma and regexp2 part.
func TestSplitterCases(t *testing.T) {
	cases := []struct {
		in          string
		onig, plain []string // plain nil: same as onig
	}{
		{"hello world", []string{"hello", " world"}, nil},
		{"  leading", []string{" ", " leading"}, nil},
		{"a   b", []string{"a", "  ", " b"}, nil},
		{"trailing   ", []string{"trailing", "   "}, nil},
		{"x \n\n  y", []string{"x", " \n\n", " ", " y"}, nil},
		{"Tabs\tand", []string{"Tabs", "\tand"}, nil},
		{"1234567", []string{"123", "456", "7"}, nil},
		{"I'm they've DON'T", []string{"I", "'m", " they", "'ve", " DON", "'T"}, nil},
		{"'Ll 'lL", []string{"'Ll", " '", "lL"}, nil},
		{"it's", []string{"it", "'s"}, nil},
		{"??? ...\n\nx", []string{"???", " ...\n\n", "x"}, nil},
		{"(hello)", []string{"(hello", ")"}, nil},
		{"a \u00a0 b", []string{"a", " \u00a0", " b"}, nil},
		{"x\u2028y", []string{"x", "\u2028y"}, nil},
		{"\r\n\r\n", []string{"\r\n\r\n"}, nil},
		{"it'ſa x", []string{"it", "'ſ", "a", " x"}, []string{"it", "'ſa", " x"}},
		{"x'ſ", []string{"x", "'ſ"}, []string{"x", "'ſ"}},
		{"a\u1C89b \u1C89\u1C89", []string{"a\u1C89b", " \u1C89\u1C89"}, []string{"a", "\u1C89b", " \u1C89\u1C89"}},
		{"\U00010D40\U00010D41 1", []string{"\U00010D40\U00010D41", " ", "1"}, []string{"\U00010D40\U00010D41", " ", "1"}},
		{"a\xffb", []string{"a", "\xffb"}, nil},
		{"\xff\xfe.\n", []string{"\xff\xfe.\n"}, nil},
	}
	for _, c := range cases {
		if got := pieces(handOnig, c.in); !slices.Equal(got, c.onig) {
			t.Errorf("onig pieces of %q = %q, want %q", c.in, got, c.onig)
		}
		plain := c.plain
		if plain == nil {
			plain = c.onig
		}
		if got := pieces(handPlain, c.in); !slices.Equal(got, plain) {
			t.Errorf("plain pieces of %q = %q, want %q", c.in, got, plain)
		}
		if got := pieces(regexp2Llama3, c.in); !slices.Equal(got, plain) {
			t.Errorf("regexp2 pieces of %q = %q, want %q", c.in, got, plain)
		}
	}
}

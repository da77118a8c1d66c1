package parser

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// bruteStop is the reference for StopMatcher: the first stop string to
// complete, reading the text from the start, the longest one if several
// complete at the same byte.
func bruteStop(text string, stops []string) (emit string, stopped bool) {
	bestEnd, bestStart := -1, -1
	for _, s := range stops {
		if s == "" || !utf8.ValidString(s) {
			continue
		}
		i := strings.Index(text, s)
		if i < 0 {
			continue
		}
		if end := i + len(s); bestEnd < 0 || end < bestEnd || end == bestEnd && i < bestStart {
			bestEnd, bestStart = end, i
		}
	}
	if bestEnd < 0 {
		return text, false
	}
	return text[:bestStart], true
}

// bruteHold is the longest suffix of text that is a proper prefix of a
// usable stop string: what the matcher must hold, no more.
func bruteHold(text string, stops []string) int {
	best := 0
	for _, s := range stops {
		if s == "" || !utf8.ValidString(s) {
			continue
		}
		for k := min(len(s)-1, len(text)); k > best; k-- {
			if strings.HasSuffix(text, s[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// runStops feeds pieces and returns the concatenated emitted text (plus
// Flush when no stop) and the stopped flag. It checks that emitted text
// never contains a stop string and, when runeSplit is set (pieces split
// only at rune boundaries of valid text), that exactly the necessary tail
// is held.
func runStops(t testing.TB, stops []string, pieces []string, runeSplit bool) (string, bool) {
	t.Helper()
	m := NewStopMatcher(stops)
	var out strings.Builder
	fed := ""
	stopped := false
	for _, s := range pieces {
		fed += s
		emit, st := m.Add(s)
		if utf8.ValidString(fed) && !utf8.ValidString(emit) {
			t.Fatalf("emitted %q cuts a character (pieces %q)", emit, pieces)
		}
		out.WriteString(emit)
		if st {
			stopped = true
			continue
		}
		if stopped {
			t.Fatalf("Add after a stop returned stopped=false")
		}
		if runeSplit {
			if want := bruteHold(fed, stops); len(m.held) != want {
				t.Fatalf("after %q held %q, want the last %d bytes (stops %q)", fed, m.held, want, stops)
			}
		}
		if out.Len()+len(m.held) != len(fed) {
			t.Fatalf("emitted %q + held %q != fed %q", out.String(), m.held, fed)
		}
	}
	if !stopped {
		out.WriteString(m.Flush())
	} else if f := m.Flush(); f != "" {
		t.Fatalf("Flush after a stop returned %q", f)
	}
	got := out.String()
	for _, s := range stops {
		if s != "" && utf8.ValidString(s) && strings.Contains(got, s) {
			t.Fatalf("emitted %q contains stop %q", got, s)
		}
	}
	return got, stopped
}

type stopCase struct {
	name  string
	stops []string
	text  string
}

var stopCases = []stopCase{
	{"no stops", nil, "abc é"},
	{"no match", []string{"END"}, "the end, EN, ENd"},
	{"simple", []string{"END"}, "helloEND world"},
	{"at start", []string{"END"}, "END"},
	{"whole text", []string{"hello"}, "hello"},
	{"prefix at the end, no match", []string{"END"}, "helloEN"},
	{"earliest of several", []string{"world", "lo"}, "hello world"},
	{"first to complete wins over earlier start", []string{"abcd", "bc"}, "xabcd"},
	{"same end: longest", []string{"bc", "abc"}, "xabcz"},
	{"repeated prefix", []string{"aab"}, "aaab"},
	{"kmp border", []string{"abab"}, "abaabab!"},
	{"self-overlap near miss", []string{"aaa"}, "aabaab aa"},
	{"unicode stop", []string{"é!"}, "café!x"},
	{"cjk stop", []string{"日本"}, "こんにちは日本語"},
	{"multibyte prefix held", []string{"éx"}, "aéé"},
	{"newline stop", []string{"\n\n"}, "line one\nline two\n\nrest"},
	{"marker-like stop", []string{"<|im_end|>"}, "done<|im_e<|im_end|>x"},
	{"empty stop ignored", []string{""}, "abc"},
	{"empty and real", []string{"", "b"}, "abc"},
	{"invalid stop ignored", []string{"\xa9"}, "café"},
	{"duplicate stops", []string{"x", "x"}, "abxcd"},
	{"long stop", []string{"the quick brown fox"}, "the quick brown fo the quick brown fox!"},
	{"stop longer than text", []string{"abcdef"}, "abc"},
}

// TestStopMatcher feeds each text whole, per byte, per rune, split at every
// byte offset and at every pair of rune offsets, and requires the
// reference result every time.
func TestStopMatcher(t *testing.T) {
	for _, c := range stopCases {
		t.Run(c.name, func(t *testing.T) {
			wantEmit, wantStop := bruteStop(c.text, c.stops)
			check := func(how string, pieces []string, runeSplit bool) {
				t.Helper()
				emit, stopped := runStops(t, c.stops, pieces, runeSplit)
				if emit != wantEmit || stopped != wantStop {
					t.Fatalf("%s: got %q, %v; want %q, %v", how, emit, stopped, wantEmit, wantStop)
				}
			}
			check("whole", []string{c.text}, true)
			var bytes, runes []string
			for i := range len(c.text) {
				bytes = append(bytes, c.text[i:i+1])
			}
			for _, r := range c.text {
				runes = append(runes, string(r))
			}
			check("per byte", bytes, false)
			check("per rune", runes, true)
			for i := 1; i < len(c.text); i++ {
				check(fmt.Sprintf("split at byte %d", i), []string{c.text[:i], c.text[i:]}, utf8.RuneStart(c.text[i]))
			}
			for i := range c.text {
				for j := range c.text {
					if 0 < i && i < j {
						check(fmt.Sprintf("split at %d and %d", i, j), []string{c.text[:i], c.text[i:j], c.text[j:]}, true)
					}
				}
			}
		})
	}
}

func TestStopMatcherSteps(t *testing.T) {
	type step struct {
		in, emit string
		stopped  bool
	}
	cases := []struct {
		name  string
		stops []string
		steps []step
		flush string
	}{
		{"partial held then released", []string{"END"}, []step{{"helloEN", "hello", false}, {"x", "ENx", false}}, ""},
		{"partial held then completed", []string{"END"}, []step{{"helloEN", "hello", false}, {"D tail", "", true}, {"more", "", true}}, ""},
		{"held tail flushed", []string{"END"}, []step{{"abcE", "abc", false}}, "E"},
		{"only the needed tail held", []string{"abc", "xyz"}, []step{{"zzab", "zz", false}, {"x", "ab", false}, {"y!", "xy!", false}}, ""},
		{"incomplete utf-8 held", nil, []step{{"a\xe2\x82", "a", false}, {"\xac!", "€!", false}}, ""},
		{"incomplete utf-8 flushed", nil, []step{{"a\xe2\x82", "a", false}}, "\xe2\x82"},
		{"invalid byte not held forever", nil, []step{{"a\xe2", "a", false}, {"x", "\xe2x", false}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewStopMatcher(c.stops)
			for i, s := range c.steps {
				emit, stopped := m.Add(s.in)
				if emit != s.emit || stopped != s.stopped {
					t.Fatalf("step %d Add(%q) = %q, %v; want %q, %v", i, s.in, emit, stopped, s.emit, s.stopped)
				}
			}
			if f := m.Flush(); f != c.flush {
				t.Fatalf("Flush() = %q, want %q", f, c.flush)
			}
		})
	}
}

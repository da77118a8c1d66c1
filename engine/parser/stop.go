package parser

import (
	"unicode/utf8"
)

// StopMatcher finds request stop strings (docs/serving.md §5 "Stops")
// in a stream of text pieces and decides which text may be emitted.
//
// Matching is on bytes. For valid UTF-8 text and stop strings a byte match
// is a character match, and every cut falls between characters. Held back
// is only the longest tail of the text that is a proper prefix of some stop
// string (never more than max(len(stop))−1 bytes), plus, defensively, an
// incomplete UTF-8 sequence at the very end, so emitted text never ends
// inside a character even when a piece does.
//
// Generation stops at the first byte where any stop string is complete;
// if several complete at that byte, the longest (earliest-starting) one is
// the match. The text before the match is emitted, the match and anything
// after it never are. This is the earliest match position among the
// matches complete so far; a longer stop string that starts earlier but
// would complete later is not waited for (stops "abcd" and "bc" on "abcd"
// cut before "bc"), because only then does the result not depend on how
// the text was split into pieces.
//
// Each stop string is scanned with its own Knuth–Morris–Pratt automaton,
// so the work per piece is linear in its length times the number of stop
// strings. A StopMatcher is not safe for concurrent use.
type StopMatcher struct {
	autos   []stopAuto
	held    string
	stopped bool
}

// stopAuto is the KMP automaton of one stop string; state is the length
// of the longest suffix of the text so far that is a prefix of pat.
type stopAuto struct {
	pat   string
	fail  []int // fail[k]: longest proper border of pat[:k+1]
	state int
}

// NewStopMatcher returns a matcher for stops. Empty strings and strings
// that are not valid UTF-8 are ignored (the caller validates requests; a
// stop string that is not UTF-8 could cut a character). Duplicates are
// harmless.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s == "" || !utf8.ValidString(s) {
			continue
		}
		fail := make([]int, len(s))
		for k, b := 1, 0; k < len(s); k++ {
			for b > 0 && s[k] != s[b] {
				b = fail[b-1]
			}
			if s[k] == s[b] {
				b++
			}
			fail[k] = b
		}
		m.autos = append(m.autos, stopAuto{pat: s, fail: fail})
	}
	return m
}

// Add feeds s and returns the text that may be emitted now: never any part
// of a stop string that might still complete. When a stop string completes,
// stopped is true and emit is the text before it; every later Add returns
// ("", true) and Flush returns "".
func (m *StopMatcher) Add(s string) (emit string, stopped bool) {
	if m.stopped {
		return "", true
	}
	buf := m.held + s
	base := len(m.held)
	for i := 0; i < len(s); i++ {
		c := s[i]
		match := -1
		for a := range m.autos {
			au := &m.autos[a]
			for au.state > 0 && au.pat[au.state] != c {
				au.state = au.fail[au.state-1]
			}
			if au.pat[au.state] == c {
				au.state++
			}
			if au.state == len(au.pat) && (match < 0 || len(au.pat) > len(m.autos[match].pat)) {
				match = a
			}
		}
		if match >= 0 {
			m.stopped = true
			m.held = ""
			return buf[:base+i+1-len(m.autos[match].pat)], true
		}
	}
	keep := 0
	for a := range m.autos {
		keep = max(keep, m.autos[a].state)
	}
	cut := len(buf) - keep
	if t := incompleteTail(buf); t < cut {
		cut = t
	}
	m.held = buf[cut:]
	return buf[:cut], false
}

// Flush ends the text without a stop and returns the held tail ("" after a
// stop). The matcher then starts afresh, except that a stop stays final.
func (m *StopMatcher) Flush() string {
	h := m.held
	m.held = ""
	for a := range m.autos {
		m.autos[a].state = 0
	}
	return h
}

// incompleteTail returns the index where an incomplete UTF-8 sequence at
// the end of s starts, or len(s).
func incompleteTail(s string) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(s); k++ {
		c := s[len(s)-k]
		if c < utf8.RuneSelf {
			return len(s)
		}
		if utf8.RuneStart(c) {
			if utf8.FullRuneInString(s[len(s)-k:]) {
				return len(s)
			}
			return len(s) - k
		}
	}
	return len(s)
}

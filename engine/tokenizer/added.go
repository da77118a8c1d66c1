package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddedToken is an entry of tokenizer.json's added_tokens: a string that is
// matched in the raw text before pre-tokenization and becomes one id.
type AddedToken struct {
	// ID is the token's id.
	ID int
	// Content is the string the token stands for.
	Content string
	// Special marks control tokens (BOS, EOS, chat markers). Special tokens
	// are matched only when EncodeOptions.MatchSpecial is set.
	Special bool
	// SingleWord: the token matches only where it is not preceded or
	// followed by a word character.
	SingleWord bool
	// LStrip: a match also takes the whitespace before it.
	LStrip bool
	// RStrip: a match also takes the whitespace after it.
	RStrip bool
	// Normalized: the token is matched in the normalized text, after the
	// tokens with Normalized false (there is no normalizer, so only the
	// order of matching differs).
	Normalized bool
}

// Segment is a stretch of text produced by SplitSpecial: either an added
// token (Token true, ID its id) or ordinary text between added tokens.
type Segment struct {
	// Text is the segment's text; for a token, the matched text, which
	// includes stripped whitespace when the token has LStrip or RStrip.
	Text string
	// Token reports whether the segment is an added token.
	Token bool
	// ID is the added token's id; -1 for ordinary text.
	ID int
}

// addedMatcher finds added tokens in text: the leftmost match, and the
// longest one at that position (Aho-Corasick "leftmost longest"), with a
// byte trie.
type addedMatcher struct {
	edges map[uint32]int32 // node<<8 | byte -> child node
	term  []int32          // node -> index into Tokenizer.added, or -1
	first [256]bool        // bytes that start some token
	only  int              // the single first byte if there is one, else -1
}

func newAddedMatcher(tokens []AddedToken, pick func(*AddedToken) bool) *addedMatcher {
	m := &addedMatcher{edges: map[uint32]int32{}, term: []int32{-1}, only: -1}
	nfirst := 0
	for i := range tokens {
		t := &tokens[i]
		if !pick(t) || t.Content == "" {
			continue
		}
		if !m.first[t.Content[0]] {
			m.first[t.Content[0]] = true
			nfirst++
			m.only = int(t.Content[0])
		}
		node := int32(0)
		for k := 0; k < len(t.Content); k++ {
			key := uint32(node)<<8 | uint32(t.Content[k])
			child, ok := m.edges[key]
			if !ok {
				child = int32(len(m.term))
				m.term = append(m.term, -1)
				m.edges[key] = child
			}
			node = child
		}
		m.term[node] = int32(i)
	}
	if nfirst == 0 {
		return nil
	}
	if nfirst > 1 {
		m.only = -1
	}
	return m
}

// find returns the leftmost-longest match at or after s[from:]: its byte
// range and the index of the token, or tok -1.
func (m *addedMatcher) find(s string, from int) (start, end, tok int) {
	for i := from; i < len(s); i++ {
		if m.only >= 0 {
			k := strings.IndexByte(s[i:], byte(m.only))
			if k < 0 {
				break
			}
			i += k
		} else if !m.first[s[i]] {
			continue
		}
		node, best, bestEnd := int32(0), int32(-1), 0
		for k := i; k < len(s); k++ {
			child, ok := m.edges[uint32(node)<<8|uint32(s[k])]
			if !ok {
				break
			}
			node = child
			if t := m.term[node]; t >= 0 {
				best, bestEnd = t, k+1
			}
		}
		if best >= 0 {
			return i, bestEnd, int(best)
		}
	}
	return -1, -1, -1
}

// isWordChar reports whether r is in Rust regex's Unicode \w: Alphabetic,
// Mark, Decimal_Number, Connector_Punctuation or Join_Control.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) ||
		unicode.Is(unicode.Join_Control, r)
}

// splitAdded cuts s at the matches of m, as Hugging Face's added vocabulary
// does (find_matches): the matcher reports non-overlapping leftmost-longest
// matches; a special token is skipped when !matchSpecial, a single_word
// token where a word character touches it; lstrip and rstrip widen a match
// over adjacent whitespace, never back over an earlier match. A skipped
// match stays ordinary text and is not searched again for shorter tokens.
// Segments are appended to dst; empty text produces none.
func splitAdded(dst []Segment, s string, m *addedMatcher, tokens []AddedToken, matchSpecial bool) []Segment {
	if m == nil {
		if s != "" {
			dst = append(dst, Segment{Text: s, ID: -1})
		}
		return dst
	}
	done := 0 // end of the last emitted segment
	for pos := 0; pos < len(s); {
		st, en, ti := m.find(s, pos)
		if ti < 0 {
			break
		}
		pos = en
		tok := &tokens[ti]
		if tok.Special && !matchSpecial {
			continue
		}
		if tok.SingleWord {
			if r, _ := utf8.DecodeLastRuneInString(s[:st]); st > 0 && isWordChar(r) {
				continue
			}
			if r, _ := utf8.DecodeRuneInString(s[en:]); en < len(s) && isWordChar(r) {
				continue
			}
		}
		if tok.LStrip {
			st = max(len(strings.TrimRightFunc(s[:st], unicode.IsSpace)), done)
		}
		if tok.RStrip {
			en = len(s) - len(strings.TrimLeftFunc(s[en:], unicode.IsSpace))
		}
		if done < st {
			dst = append(dst, Segment{Text: s[done:st], ID: -1})
		}
		dst = append(dst, Segment{Text: s[min(st, en):en], Token: true, ID: tok.ID})
		done = en
	}
	if done < len(s) {
		dst = append(dst, Segment{Text: s[done:], ID: -1})
	}
	return dst
}

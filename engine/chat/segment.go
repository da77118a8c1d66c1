package chat

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Segment is a piece of a rendered prompt. Special segments hold exactly one
// special-token string that the template emitted: the tokenizer maps it to
// its control-token id. Every other segment is ordinary text, to be encoded
// with special-token matching off; it may contain special-token strings
// typed by the user, which must stay text.
type Segment struct {
	Text    string
	Special bool
}

// Placeholders stand for special-token strings inside request strings while
// the template runs. They are built from U+27E6/U+27E7 and digits, which
// Python's repr, JSON encoding and case changes all leave alone, so they
// survive tojson, | string and upper(). The opening run is one longer than
// any run of U+27E6 in the template or the request, so it cannot come from
// either.
const (
	markOpen  = "\u27e6"
	markClose = "\u27e7"
)

// SegmentOption adjusts RenderSegments.
type SegmentOption func(*protector)

// TrustAssistant leaves the content and thinking of assistant messages as
// they are, so that special-token strings in them reach the template and,
// when it emits them, become Special segments. Assistant history is the
// model's own earlier output: templates split it at "</think>", and LFM2
// templates expect earlier tool calls as <|tool_call_start|>… text in it.
// A client can then inject control tokens through assistant messages; use
// it only where clients are trusted that far.
func TrustAssistant() SegmentOption {
	return func(p *protector) { p.trustAssistant = true }
}

// protector hides special-token strings in request data and finds them
// again in the rendered prompt.
type protector struct {
	trustAssistant bool
	specials       []string // distinct, longest first; placeholder i stands for specials[i]
	open           string
	replacer       *strings.Replacer
	root           *trieNode
	// starts marks the bytes that begin a special token or a placeholder:
	// split copies everything else in bulk. They are UTF-8 lead bytes,
	// never continuation bytes, so no match can start inside a rune.
	starts [256]bool
}

func newProtector(specials []string, tmplSource string, req *Request) *protector {
	seen := make(map[string]bool)
	var list []string
	for _, s := range specials {
		if s != "" && !seen[s] {
			seen[s] = true
			list = append(list, s)
		}
	}
	// Longest first: strings.Replacer prefers earlier arguments at a
	// position, which makes its matching leftmost-longest like the trie's.
	sort.SliceStable(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })

	run := maxRun(tmplSource)
	visitRequestStrings(req, func(s string) { run = max(run, maxRun(s)) })
	for _, s := range list {
		run = max(run, maxRun(s))
	}
	p := &protector{specials: list, open: strings.Repeat(markOpen, run+1), root: &trieNode{index: -1}}
	pairs := make([]string, 0, 2*len(list))
	for i, s := range list {
		pairs = append(pairs, s, p.placeholder(i))
		p.root.insert(s, i)
		p.starts[s[0]] = true
	}
	p.starts[markOpen[0]] = true
	p.replacer = strings.NewReplacer(pairs...)
	return p
}

func (p *protector) placeholder(i int) string {
	return p.open + strconv.Itoa(i) + markClose
}

func (p *protector) protect(s string) string {
	if len(p.specials) == 0 {
		return s
	}
	return p.replacer.Replace(s)
}

// maxRun returns the length of the longest run of markOpen in s.
func maxRun(s string) int {
	best, cur := 0, 0
	for s != "" {
		if strings.HasPrefix(s, markOpen) {
			cur++
			best = max(best, cur)
			s = s[len(markOpen):]
			continue
		}
		cur = 0
		_, n := utf8.DecodeRuneInString(s)
		s = s[n:]
	}
	return best
}

// placeholderAt reports the special-token index of a placeholder starting
// at s[0], and its length.
func (p *protector) placeholderAt(s string) (int, int, bool) {
	if !strings.HasPrefix(s, p.open) {
		return 0, 0, false
	}
	i := len(p.open)
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-i < 9 {
		j++
	}
	if j == i || !strings.HasPrefix(s[j:], markClose) {
		return 0, 0, false
	}
	idx, err := strconv.Atoi(s[i:j])
	if err != nil || idx >= len(p.specials) {
		return 0, 0, false
	}
	return idx, j + len(markClose), true
}

// split cuts the rendered prompt at the special-token strings the template
// emitted (leftmost-longest) and puts the user's own special-token strings
// back as ordinary text. Adjacent text is merged: a tokenizer must see each
// stretch of ordinary text whole, as the pre-tokenizer's pieces may cross
// the point where user text meets template text.
func (p *protector) split(rendered string) []Segment {
	var (
		segs []Segment
		text strings.Builder
	)
	flush := func() {
		if text.Len() > 0 {
			segs = append(segs, Segment{Text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(rendered); {
		if idx, n, ok := p.placeholderAt(rendered[i:]); ok {
			text.WriteString(p.specials[idx])
			i += n
			continue
		}
		if idx, n := p.root.longest(rendered[i:]); idx >= 0 {
			flush()
			segs = append(segs, Segment{Text: p.specials[idx], Special: true})
			i += n
			continue
		}
		j := i + 1
		for j < len(rendered) && !p.starts[rendered[j]] {
			j++
		}
		text.WriteString(rendered[i:j])
		i = j
	}
	flush()
	return segs
}

type trieNode struct {
	next  map[byte]*trieNode
	index int // special-token index ending here, or -1
}

func (t *trieNode) insert(s string, index int) {
	n := t
	for i := 0; i < len(s); i++ {
		if n.next == nil {
			n.next = make(map[byte]*trieNode)
		}
		c, ok := n.next[s[i]]
		if !ok {
			c = &trieNode{index: -1}
			n.next[s[i]] = c
		}
		n = c
	}
	if n.index < 0 {
		n.index = index
	}
}

// longest returns the index and length of the longest special-token string
// that prefixes s, or index -1.
func (t *trieNode) longest(s string) (index, length int) {
	index = -1
	n := t
	for i := 0; i < len(s); i++ {
		n = n.next[s[i]]
		if n == nil {
			break
		}
		if n.index >= 0 {
			index, length = n.index, i+1
		}
	}
	return index, length
}

package spec

import "fmt"

// Defaults of docs/serving.md §6.
const (
	DefaultLookupMin = 3
	DefaultLookupMax = 5
	DefaultTokens    = 4
	// MaxTokens bounds --spec-tokens.
	MaxTokens = 7
)

// Lookup finds drafts in a growing token context: for n from max down to
// min, the most recent earlier occurrence of the context's last n tokens
// (any start before the suffix itself; overlaps allowed); the first n
// that matches wins, and the draft is what followed that occurrence.
// vLLM's n-gram proposer takes the earliest occurrence and llama.cpp's
// the last; lfmq takes the last. Where docs/serving.md §6 cuts the draft
// at the end of the context, lfmq continues it periodically: an
// occurrence d tokens before the suffix says the text repeats with
// period d, so a run of one token, or a line repeated with its neighbour
// overlapping, still gives a full draft.
//
// Per n it keeps a hash map from n-gram to its last start, updated as
// tokens are appended, so a proposal costs max−min+1 lookups. It is not
// safe for concurrent use.
type Lookup struct {
	min, max int
	toks     []int
	last     []map[uint64]int // per n−min: n-gram hash → start of its last registered occurrence
}

// NewLookup returns a Lookup for n-grams of min to max tokens.
func NewLookup(min, max int) (*Lookup, error) {
	if min < 1 || max < min {
		return nil, fmt.Errorf("spec: lookup n-gram lengths [%d, %d]: want 1 ≤ min ≤ max", min, max)
	}
	l := &Lookup{min: min, max: max, last: make([]map[uint64]int, max-min+1)}
	for i := range l.last {
		l.last[i] = map[uint64]int{}
	}
	return l, nil
}

// Len returns the context's length.
func (l *Lookup) Len() int { return len(l.toks) }

// Append adds tokens to the context.
func (l *Lookup) Append(ids ...int) {
	for _, id := range ids {
		// The n-grams ending at the token before this one become
		// searchable: the suffix itself (ending at the newest token) is
		// never registered when a proposal looks it up, so every match is
		// an earlier occurrence.
		end := len(l.toks) // one past the previous token
		for n := l.min; n <= l.max; n++ {
			if s := end - n; s >= 0 {
				l.last[n-l.min][hashIDs(l.toks[s:end])] = s
			}
		}
		l.toks = append(l.toks, id)
	}
}

// Propose returns up to k draft tokens (nil when no n-gram of the suffix
// occurred before). The slice is the caller's.
func (l *Lookup) Propose(k int) []int {
	if k <= 0 {
		return nil
	}
	T := len(l.toks)
	for n := min(l.max, T-1); n >= l.min; n-- {
		suffix := l.toks[T-n:]
		s, ok := l.last[n-l.min][hashIDs(suffix)]
		if !ok || !equal(l.toks[s:s+n], suffix) { // absent, or a hash collision
			continue
		}
		// The suffix recurs d tokens after the occurrence; where the
		// tokens that followed it run into the suffix itself (an
		// overlapping match, such as a run of one token), the draft goes
		// on with period d instead of stopping at the end of the context.
		from, d := s+n, T-n-s
		draft := make([]int, 0, k)
		for i := range k {
			if from+i < T {
				draft = append(draft, l.toks[from+i])
			} else {
				draft = append(draft, draft[i-d])
			}
		}
		return draft
	}
	return nil
}

func equal(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// hashIDs is FNV-1a over the ids' 32-bit values.
func hashIDs(ids []int) uint64 {
	h := uint64(14695981039346656037)
	for _, id := range ids {
		v := uint32(id)
		for range 4 {
			h ^= uint64(v & 0xff)
			h *= 1099511628211
			v >>= 8
		}
	}
	return h
}

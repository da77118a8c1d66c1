package score

import "fmt"

// Window is a stretch of one record that is run through a model from an
// empty state (no KV or conv state carried over). The targets are
// Tokens[First:]; Tokens[p] is predicted by the logits at position p−1.
type Window struct {
	// Record is the index of the record in its corpus.
	Record int
	// Tokens are fed to the model.
	Tokens []int
	// First is the position of the first scored target, at least 1.
	First int
}

// Targets returns the number of tokens the window scores.
func (w *Window) Targets() int { return len(w.Tokens) - w.First }

// CtxError reports a window length the rule cannot use.
type CtxError struct{ Ctx int }

func (e *CtxError) Error() string {
	return fmt.Sprintf("score: context %d: the window length must be even and at least 2", e.Ctx)
}

// Split cuts the record ids = t_0 … t_{n−1} (t_0 is BOS) into windows by
// docs/scoring.md, "Windows", with context ctx = C (even, so that S = C/2
// splits it exactly): a record of n ≤ C tokens is one window scoring t_1
// … t_{n−1}; a longer one gets window 0 = t_0 … t_{C−1} scoring 1 … C−1,
// and windows w ≥ 1 = bos, t_{wS+1} … scoring targets (w+1)S … (w+2)S−1
// (truncated at n). Each window holds only the tokens its targets need,
// so a last window may be shorter than C. Every target is scored exactly
// once, and every target after the first window sees at least S−1 tokens
// of its record. A record of fewer than 2 tokens has nothing to score and
// gives no window. The windows alias ids except for the bos position.
func Split(ids []int, ctx, bos int) ([]Window, error) {
	if ctx < 2 || ctx%2 != 0 {
		return nil, &CtxError{Ctx: ctx}
	}
	n := len(ids)
	if n < 2 {
		return nil, nil
	}
	if n <= ctx {
		return []Window{{Tokens: ids, First: 1}}, nil
	}
	s := ctx / 2
	wins := []Window{{Tokens: ids[:ctx], First: 1}}
	for w := 1; (w+1)*s <= n-1; w++ {
		last := min(n-1, (w+2)*s-1)
		toks := make([]int, 0, last-w*s+1)
		toks = append(toks, bos)
		toks = append(toks, ids[w*s+1:last+1]...)
		wins = append(wins, Window{Tokens: toks, First: s})
	}
	return wins, nil
}

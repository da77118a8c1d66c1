package choice

import (
	"context"
	"errors"
	"fmt"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

// Answer is a scored closed-schema answer.
type Answer struct {
	// Chosen[i] is the index of field i's winning candidate.
	Chosen []int
	// Scores[i][j] is the log-likelihood of field i's candidate j: the sum
	// of the float32 log-probs of its branch tokens, in float64.
	Scores [][]float64
	// Text is the answer, Schema.Render(Chosen).
	Text string
	// PromptTokens and BranchTokens count what was run.
	PromptTokens, BranchTokens int
}

// branchBatch bounds the forks run in one batch: each holds a copy of the
// shared prompt's state.
const branchBatch = 32

// Encode returns the token ids of every branch, [field][candidate], each
// encoded as ordinary text on its own (it follows the prompt's tokens).
func (s *Schema) Encode(tok *tokenizer.Tokenizer) [][][]int {
	out := make([][][]int, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = make([][]int, len(f.Candidates))
		for j := range f.Candidates {
			out[i][j] = tok.EncodeOrdinary(s.Branch(i, j))
		}
	}
	return out
}

// Score prefills prompt (which must end with the tokens of Open) once and
// scores every branch from it (ScoreFrom).
func (s *Schema) Score(ctx context.Context, m *model.Model, prompt []int, branches [][][]int) (*Answer, error) {
	return s.ScoreOn(ctx, m, m.NewSequence(), prompt, branches)
}

// ScoreOn is Score with the empty sequence the prompt is prefilled into,
// such as one of a server's bounded pool (sched.Lease): the branches'
// clones share its pool and are freed as each group is scored, so the
// pages in use at once are Reservation's.
func (s *Schema) ScoreOn(ctx context.Context, m *model.Model, shared *model.Sequence, prompt []int, branches [][][]int) (*Answer, error) {
	if len(prompt) == 0 {
		return nil, errors.New("choice: empty prompt")
	}
	out, err := m.Forward(ctx, []*model.Sequence{shared}, [][]int{prompt}, model.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	a, err := s.ScoreFrom(ctx, m, shared, out[0], branches)
	if a != nil {
		a.PromptTokens = len(prompt)
	}
	return a, err
}

// ScoreFrom scores every branch from a prefilled shared sequence whose
// last position's logits are last: each branch runs on its own clone of
// the shared state (KV copied, conv state copied, never aliased), all in
// one batched Forward (in groups of branchBatch), and its score is the
// log-prob of its first token under last plus those of the rest under
// its own rows. shared is left as it was. For each field the highest score
// wins, ties to the first listed candidate.
func (s *Schema) ScoreFrom(ctx context.Context, m *model.Model, shared *model.Sequence, last []float32, branches [][][]int) (*Answer, error) {
	if len(branches) != len(s.Fields) {
		return nil, fmt.Errorf("choice: %d branch lists for %d fields", len(branches), len(s.Fields))
	}
	type ref struct{ field, cand int }
	var refs []ref
	for i, bs := range branches {
		if len(bs) != len(s.Fields[i].Candidates) {
			return nil, fmt.Errorf("choice: field %q: %d branches for %d candidates", s.Fields[i].Name, len(bs), len(s.Fields[i].Candidates))
		}
		for j, b := range bs {
			if len(b) == 0 {
				return nil, fmt.Errorf("choice: field %q candidate %d: empty branch", s.Fields[i].Name, j)
			}
			refs = append(refs, ref{i, j})
		}
	}
	flat := make([][]int, len(refs))
	for k, r := range refs {
		flat[k] = branches[r.field][r.cand]
	}
	scores, err := Continuations(ctx, m, shared, last, flat)
	if err != nil {
		return nil, err
	}
	a := &Answer{Scores: make([][]float64, len(s.Fields)), Chosen: make([]int, len(s.Fields))}
	for i, f := range s.Fields {
		a.Scores[i] = make([]float64, len(f.Candidates))
	}
	for k, r := range refs {
		a.Scores[r.field][r.cand] = scores[k]
		a.BranchTokens += len(flat[k])
	}
	for i, sc := range a.Scores {
		a.Chosen[i] = pick(sc)
	}
	a.Text = s.Render(a.Chosen)
	return a, nil
}

// pick returns the index of the highest score, the first on ties.
func pick(scores []float64) int {
	best := 0
	for j, x := range scores {
		if x > scores[best] {
			best = j
		}
	}
	return best
}

// Continuations returns the log-likelihood of each continuation after a
// prefilled shared sequence whose last position's logits are last: the
// log-prob of its first token under last plus those of the rest under its
// own rows, summed in token order in float64. Each continuation runs on
// its own clone of the shared state (KV and conv state copied, never
// aliased), in batched Forwards of up to branchBatch clones; shared is
// left as it was. Because the engine's logits do not depend on the batch
// or on how tokens arrive, the scores equal those of the whole sequence
// prefilled at once (what /v1/completions with echo and logprobs returns).
func Continuations(ctx context.Context, m *model.Model, shared *model.Sequence, last []float32, conts [][]int) ([]float64, error) {
	for k, b := range conts {
		if len(b) == 0 {
			return nil, fmt.Errorf("choice: continuation %d is empty", k)
		}
	}
	first := sample.LogProbs(nil, last)
	scores := make([]float64, len(conts))
	V := m.Config.VocabSize
	var lp []float32
	for g := 0; g < len(conts); g += branchBatch {
		group := conts[g:min(g+branchBatch, len(conts))]
		seqs := make([]*model.Sequence, len(group))
		for k := range group {
			seqs[k] = shared.Clone()
		}
		rows, err := m.Forward(ctx, seqs, group, model.ForwardOptions{Logits: model.AllLogits})
		// The clones' own pages go back to their pool now: a bounded
		// pool holds one group's at a time (Reservation).
		for _, q := range seqs {
			q.Free()
		}
		if err != nil {
			return nil, err
		}
		for k, b := range group {
			score := float64(first[b[0]])
			for t := 1; t < len(b); t++ {
				lp = sample.LogProbs(lp, rows[k][(t-1)*V:t*V])
				score += float64(lp[b[t]])
			}
			scores[g+k] = score
		}
	}
	return scores, nil
}

// Reservation is what ScoreOn holds at once for a prompt of prompt tokens
// and these branches: the tokens of the prompt and of one group of
// branchBatch clones at their longest, and the KV pages (kv.PageTokens
// each) of the prompt plus, per clone, its copy of the prompt's last page
// and its branch's pages (a clone shares the prompt's whole pages).
func Reservation(prompt int, branches [][][]int) (tokens, pages int) {
	n, longest := 0, 0
	for _, f := range branches {
		for _, b := range f {
			n++
			longest = max(longest, len(b))
		}
	}
	group := min(n, branchBatch)
	pagesFor := func(t int) int { return (t + kv.PageTokens - 1) / kv.PageTokens }
	own := pagesFor(prompt+longest) - prompt/kv.PageTokens
	return prompt + group*longest, pagesFor(prompt) + group*own
}

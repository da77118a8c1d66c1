package draft

import (
	"context"
	"fmt"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
)

// Step is one greedy speculative step (docs/drafting.md §4): the block
// drafted, the target's greedy token at each verified row, and how many
// drafts agreed with them.
type Step struct {
	Block *Block
	// Target holds the target's argmax at each row of the verify: after
	// the pending token, then after each draft (B+1 ids).
	Target []int
	// Accepted is the length of the longest prefix of the drafts equal to
	// Target's.
	Accepted int
}

// Next is the step's new pending token: the target's own after the
// accepted drafts (its correction, or the bonus token when all agree).
func (s *Step) Next() int { return s.Target[s.Accepted] }

// GreedyStep runs one greedy speculative step on seq, whose pending token
// is pending: a block drafted (its hidden rows and logits kept when keep),
// every draft verified by one forward of the target, and seq rewound to
// hold the pending token and the accepted drafts, so that Next is pending
// for the following step. It is the loop of the fixture's reference and
// of quantize's acceptance measurement; a server verifies with sampling
// instead (engine/sched).
func (d *Drafter) GreedyStep(ctx context.Context, seq *model.Sequence, pending int, keep bool) (*Step, error) {
	blk, err := d.Propose([]*model.Sequence{seq}, []int{pending}, keep)
	if err != nil {
		return nil, err
	}
	drafts := blk.Draft(0)
	toks := append([]int{pending}, drafts...)
	l0 := seq.Len()
	snaps := make([]int, len(toks))
	for i := range snaps {
		snaps[i] = l0 + 1 + i
	}
	m := d.target
	out, err := m.Forward(ctx, []*model.Sequence{seq}, [][]int{toks}, model.ForwardOptions{Logits: model.AllLogits, ConvSnapshots: [][]int{snaps}})
	if err != nil {
		return nil, err
	}
	V := m.Config.VocabSize
	st := &Step{Block: blk, Target: make([]int, len(toks))}
	for i := range st.Target {
		st.Target[i] = kernels.Argmax(out[0][i*V : (i+1)*V])
	}
	for st.Accepted < len(drafts) && drafts[st.Accepted] == st.Target[st.Accepted] {
		st.Accepted++
	}
	keepLen := l0 + st.Accepted + 1
	conv, ok := seq.ConvAt(keepLen)
	if !ok {
		return nil, fmt.Errorf("drafter: no conv state kept after %d tokens", keepLen)
	}
	if err := seq.Rewind(keepLen, conv); err != nil {
		return nil, err
	}
	return st, nil
}

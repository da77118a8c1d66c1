package draft_test

import (
	"math"
	"testing"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// TestLazyContext: the drafter's context is computed when it is needed,
// many rows at a time (model.Drafter), and that changes no bit. Three
// sequences take the same prompt and the same 150 greedy tokens one at a
// time; one has its context computed after every step (as an eager engine
// would), one only when a pass reads it (every seventh step) and one never
// asked (computed 64 rows at a time); at the end the last two are computed
// together, in one product. Then every drafter layer's keys
// and values at every position are the same bits in all three, and so is
// the block each drafts; and no sequence ever holds more than 64 pending
// rows.
func TestLazyContext(t *testing.T) {
	m, d := loadPair(t, kv.F32)
	prompt := readSpec(t).Prompts[5].InputIDs
	const steps = 150
	eager, passes, never := m.NewSequence(), m.NewSequence(), m.NewSequence()
	seqs := []*model.Sequence{eager, passes, never}
	var next [3]int
	for i, s := range seqs {
		next[i] = feed(t, m, s, prompt)
	}
	if p := never.DraftPending(); p > 64 {
		t.Fatalf("%d rows pending after a %d-token prompt, want at most 64", p, len(prompt))
	}
	m.FlushDraft([]*model.Sequence{eager})
	for step := range steps {
		for i, s := range seqs {
			next[i] = feed(t, m, s, []int{next[i]})
			if p := s.DraftPending(); p > 64 {
				t.Fatalf("step %d: %d rows pending, want at most 64", step, p)
			}
		}
		if next[1] != next[0] || next[2] != next[0] {
			t.Fatalf("step %d: the target's greedy tokens differ: %v", step, next)
		}
		m.FlushDraft([]*model.Sequence{eager})
		if eager.DraftPending() != 0 {
			t.Fatalf("step %d: %d rows pending after FlushDraft", step, eager.DraftPending())
		}
		if step%7 == 6 {
			if _, err := d.Propose([]*model.Sequence{passes}, []int{next[1]}, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if never.DraftPending() == 0 {
		t.Fatal("the sequence never read has no pending rows: the context is not lazy")
	}
	// What is pending in the two lazy sequences (a different count of
	// rows in each) is computed in one product, a sequence listed twice
	// once.
	m.FlushDraft([]*model.Sequence{never, passes, never})
	if never.DraftPending() != 0 || passes.DraftPending() != 0 {
		t.Fatalf("%d and %d rows pending after FlushDraft", never.DraftPending(), passes.DraftPending())
	}
	var blocks [3]string
	want, err := d.Propose([]*model.Sequence{eager}, []int{next[0]}, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs[1:] {
		got, err := d.Propose([]*model.Sequence{s}, []int{next[i+1]}, true)
		if err != nil {
			t.Fatal(err)
		}
		blocks[i+1] = sameBlock(got, want)
	}
	if blocks[1] != "" || blocks[2] != "" {
		t.Errorf("blocks differ from the eager sequence's: read every 7th step: %q; never read: %q", blocks[1], blocks[2])
	}
	layers, dim := d.ContextShape()
	dt := eager.Shape().DType
	rows := func(s *model.Sequence, j, pos int) ([]float32, []float32) {
		k, v, at := s.DraftRows(j, pos)
		kb, _ := k.Block(dt, dim, 0, dim, at, 1, make([]float32, dim))
		vb, _ := v.Block(dt, dim, 0, dim, at, 1, make([]float32, dim))
		return kb, vb
	}
	for j := range layers {
		for pos := range eager.Len() {
			wk, wv := rows(eager, j, pos)
			for i, s := range seqs[1:] {
				gk, gv := rows(s, j, pos)
				for e := range dim {
					if math.Float32bits(gk[e]) != math.Float32bits(wk[e]) || math.Float32bits(gv[e]) != math.Float32bits(wv[e]) {
						t.Fatalf("sequence %d, drafter layer %d, position %d, value %d: key %v value %v, the eager sequence's %v %v",
							i+1, j, pos, e, gk[e], gv[e], wk[e], wv[e])
					}
				}
			}
		}
	}
}

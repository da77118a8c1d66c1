package draft_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kernels"
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

// TestDropDraft: a sequence that gives up its drafter context
// (model.ForwardOptions.DropDraft) keeps the target's own state whole: its
// greedy tokens are those of a sequence that keeps the context. It holds
// the context until 64 rows are pending, then none (DraftWhole false) and
// keeps no taps; Propose refuses it, and so does it refuse its clone and a
// sequence extended with a span of its positions from the first given up,
// a span that is not encoded either; a span before them is whole. Rewound
// to before the rows given up, and fed the same tokens as a sequence that
// never gave any up, it drafts that sequence's block bit for bit.
func TestDropDraft(t *testing.T) {
	m, d := loadPair(t, kv.F32)
	prompt := readSpec(t).Prompts[5].InputIDs
	keep, drop := m.NewSequence(), m.NewSequence()
	next := [2]int{feed(t, m, keep, prompt), feed(t, m, drop, prompt)}
	P := drop.Len()
	before, pending := m.DraftContextTime(), drop.DraftPending()
	m.FlushDraft([]*model.Sequence{drop})
	if after := m.DraftContextTime(); drop.DraftPending() != 0 || (after > before) != (pending > 0) {
		t.Fatalf("FlushDraft of %d pending rows: %d left, context time %v then %v", pending, drop.DraftPending(), before, after)
	}
	convP, ok := drop.ConvAt(P)
	if !ok {
		t.Fatal("no conv state at the prompt's end")
	}
	ctx := context.Background()
	keepFlushes := 0
	for step := range 80 {
		before := m.DraftContextTime()
		next[0] = feed(t, m, keep, []int{next[0]})
		if m.DraftContextTime() > before {
			keepFlushes++ // the kept sequence's 64 pending rows
		}
		before = m.DraftContextTime()
		out, err := m.Forward(ctx, []*model.Sequence{drop}, [][]int{{next[1]}}, model.ForwardOptions{DropDraft: true})
		if m.DraftContextTime() != before {
			t.Fatalf("step %d: the context was computed in a step that gives it up", step)
		}
		if err != nil {
			t.Fatal(err)
		}
		next[1] = kernels.Argmax(out[0])
		if next[1] != next[0] {
			t.Fatalf("step %d: greedy token %d, the sequence keeping its context %d", step, next[1], next[0])
		}
		if whole, want := drop.DraftWhole(), step < 63; whole != want {
			t.Fatalf("step %d (%d rows since the flush): DraftWhole %v, want %v", step, step+1, whole, want)
		}
		if p := drop.DraftPending(); p > 64 || (step >= 63 && p != 0) {
			t.Fatalf("step %d: %d rows pending", step, p)
		}
	}
	if keepFlushes == 0 {
		t.Error("in 80 steps the sequence keeping its context never computed it: DraftContextTime did not grow")
	}
	var ie *draft.InputError
	if _, err := d.Propose([]*model.Sequence{drop}, []int{next[1]}, false); !errors.As(err, &ie) {
		t.Fatalf("Propose of a sequence that gave up its context: %v, want a *draft.InputError", err)
	}
	if c := drop.Clone(); c.DraftWhole() {
		t.Error("the clone of a sequence that gave up its context holds it whole")
	}
	conv, _ := drop.ConvAt(drop.Len())
	gone, err := drop.CopySpan(P, drop.Len(), conv)
	if err != nil {
		t.Fatal(err)
	}
	var ge *kv.DraftGoneError
	if _, err := gone.MarshalBinary(); !gone.DraftGone() || !errors.As(err, &ge) {
		t.Errorf("span of the given-up rows: DraftGone %v, MarshalBinary %v", gone.DraftGone(), err)
	}
	whole, err := keep.CopySpan(0, P, convP.Clone())
	if err != nil {
		t.Fatal(err)
	}
	ext := m.NewSequence()
	if err := ext.Extend(whole); err != nil || !ext.DraftWhole() {
		t.Fatalf("extended with the span before the given-up rows: %v, DraftWhole %v", err, ext.DraftWhole())
	}
	if err := ext.Extend(gone); err != nil || ext.DraftWhole() {
		t.Fatalf("extended with the span of the given-up rows: %v, DraftWhole %v", err, ext.DraftWhole())
	}
	for _, s := range []*model.Sequence{keep, drop} {
		if err := s.Rewind(P, convP.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	if !drop.DraftWhole() {
		t.Fatal("rewound to before the rows given up, the context is not whole")
	}
	tok := prompt[len(prompt)-1]
	for range 10 {
		a, b := feed(t, m, keep, []int{tok}), feed(t, m, drop, []int{tok})
		if a != b {
			t.Fatalf("after the rewind: greedy %d and %d", a, b)
		}
		tok = a
	}
	want, err := d.Propose([]*model.Sequence{keep}, []int{tok}, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Propose([]*model.Sequence{drop}, []int{tok}, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := sameBlock(got, want); diff != "" {
		t.Errorf("after the rewind the block's %s differ from the sequence that kept its context", diff)
	}
}

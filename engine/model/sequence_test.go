package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// TestCloneDoesNotAlias: a clone and its original continue independently,
// each exactly like a fresh run of its own tokens, and later work on the
// original leaves an earlier clone unchanged.
func TestCloneDoesNotAlias(t *testing.T) {
	m := tiny(t)
	V := m.Config.VocabSize
	prefix := prompts(t)[4].InputIDs // conv and attention layers all hold state
	x, y := 500, 777
	_, fullX := forward(t, m, append(append([]int(nil), prefix...), x, y, x), model.ForwardOptions{Logits: model.AllLogits})
	_, fullY := forward(t, m, append(append([]int(nil), prefix...), y, x), model.ForwardOptions{Logits: model.AllLogits})
	n := len(prefix)
	row := func(full []float32, i int) []float32 { return full[i*V : (i+1)*V] }

	s, _ := forward(t, m, prefix, model.ForwardOptions{})
	bytes := s.StateBytes()
	c := s.Clone()
	if c.Len() != s.Len() || c.StateBytes() != bytes || c.MaxContext() != s.MaxContext() {
		t.Fatalf("clone: Len %d, StateBytes %d; original %d, %d", c.Len(), c.StateBytes(), s.Len(), bytes)
	}
	requireSame(t, "original +x", step(t, m, s, x), row(fullX, n))
	requireSame(t, "clone +y", step(t, m, c, y), row(fullY, n))
	c2 := s.Clone() // prefix + x
	requireSame(t, "original +x +y", step(t, m, s, y), row(fullX, n+1))
	requireSame(t, "original +x +y +x", step(t, m, s, x), row(fullX, n+2))
	requireSame(t, "clone +y +x", step(t, m, c, x), row(fullY, n+1))
	requireSame(t, "second clone +y after the original moved on", step(t, m, c2, y), row(fullX, n+1))
	if s.Len() != n+3 || c.Len() != n+2 || c2.Len() != n+2 {
		t.Errorf("Len: original %d, clones %d and %d", s.Len(), c.Len(), c2.Len())
	}
}

// TestContextLimit: a call that would exceed a sequence's maximum context is
// refused with a *ContextError before anything runs.
func TestContextLimit(t *testing.T) {
	m, err := load.Load(tinyDir, load.Options{MaxContext: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.MaxContext() != 20 {
		t.Fatalf("MaxContext %d", m.MaxContext())
	}
	long := prompts(t)[1].InputIDs // 42 tokens
	s := m.NewSequence()
	_, err = m.Forward(context.Background(), []*model.Sequence{s}, [][]int{long[:21]}, model.ForwardOptions{})
	var ce *model.ContextError
	if !errors.As(err, &ce) || ce.Len != 0 || ce.Add != 21 || ce.MaxContext != 20 {
		t.Fatalf("21 tokens into a context of 20: %v", err)
	}
	t.Log(err)
	if s.Len() != 0 {
		t.Fatalf("refused call changed the sequence: Len %d", s.Len())
	}
	step(t, m, s, long[:20]...)
	_, err = m.Forward(context.Background(), []*model.Sequence{s}, [][]int{{5}}, model.ForwardOptions{})
	if !errors.As(err, &ce) || ce.Len != 20 || ce.Add != 1 {
		t.Fatalf("decode past the context: %v", err)
	}
	// A per-sequence limit below the model's, and the bounds of SetMaxContext.
	s2 := m.NewSequence()
	if err := s2.SetMaxContext(10); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Forward(context.Background(), []*model.Sequence{s2}, [][]int{long[:11]}, model.ForwardOptions{}); !errors.As(err, &ce) || ce.MaxContext != 10 {
		t.Fatalf("per-sequence limit: %v", err)
	}
	var ie *model.InputError
	if err := s2.SetMaxContext(21); !errors.As(err, &ie) {
		t.Errorf("SetMaxContext above the model's limit: %v", err)
	}
	if err := s.SetMaxContext(19); !errors.As(err, &ie) {
		t.Errorf("SetMaxContext below Len: %v", err)
	}
	if _, err := load.Load(tinyDir, load.Options{MaxContext: 4097}); !errors.As(err, &ie) {
		t.Errorf("MaxContext above max_position_embeddings: %v", err)
	}
}

// TestForwardInputErrors: bad calls are refused before anything runs.
func TestForwardInputErrors(t *testing.T) {
	m := tiny(t)
	s := m.NewSequence()
	bg := context.Background()
	var te *model.TokenError
	if _, err := m.Forward(bg, []*model.Sequence{s}, [][]int{{1, 8192}}, model.ForwardOptions{}); !errors.As(err, &te) || te.Index != 1 || te.ID != 8192 {
		t.Errorf("token 8192: %v", err)
	}
	if _, err := m.Forward(bg, []*model.Sequence{s}, [][]int{{-1}}, model.ForwardOptions{}); !errors.As(err, &te) {
		t.Errorf("token -1: %v", err)
	}
	var ie *model.InputError
	for _, c := range []struct {
		name   string
		seqs   []*model.Sequence
		tokens [][]int
		opts   model.ForwardOptions
	}{
		{"lengths", []*model.Sequence{s}, nil, model.ForwardOptions{}},
		{"duplicate", []*model.Sequence{s, s}, [][]int{{1}, {1}}, model.ForwardOptions{}},
		{"nil", []*model.Sequence{nil}, [][]int{{1}}, model.ForwardOptions{}},
		{"mode", []*model.Sequence{s}, [][]int{{1}}, model.ForwardOptions{Logits: 7}},
		{"layers with logits", []*model.Sequence{s}, [][]int{{1}}, model.ForwardOptions{Layers: 3}},
		{"layers", []*model.Sequence{s}, [][]int{{1}}, model.ForwardOptions{Layers: 9, Logits: model.NoLogits}},
	} {
		if _, err := m.Forward(bg, c.seqs, c.tokens, c.opts); !errors.As(err, &ie) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if s.Len() != 0 {
		t.Errorf("refused calls changed the sequence: Len %d", s.Len())
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := m.Forward(ctx, []*model.Sequence{s}, [][]int{{1}}, model.ForwardOptions{}); !errors.Is(err, context.Canceled) || s.Len() != 0 {
		t.Errorf("cancelled context: %v, Len %d", err, s.Len())
	}
}

// TestPartialForward: Layers runs a prefix of the model and marks the
// sequence, which then refuses full calls.
func TestPartialForward(t *testing.T) {
	m := tiny(t)
	ids := prompts(t)[2].InputIDs
	full := newRecorder()
	forward(t, m, ids, model.ForwardOptions{Observer: full, Logits: model.NoLogits})
	part := newRecorder()
	s, logits := forward(t, m, ids, model.ForwardOptions{Observer: part, Logits: model.NoLogits, Layers: 3})
	if logits != nil {
		t.Fatal("NoLogits returned logits")
	}
	if len(part.hidden) != 4 {
		t.Fatalf("Layers 3 reported %d hidden states, want 4", len(part.hidden))
	}
	for i := range 4 {
		requireSame(t, "partial hidden state", part.hidden[i], full.hidden[i])
	}
	var ie *model.InputError
	if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{{1}}, model.ForwardOptions{}); !errors.As(err, &ie) {
		t.Errorf("full call on a partial sequence: %v", err)
	}
}

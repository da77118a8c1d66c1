package model

import (
	"errors"
	"fmt"

	"github.com/lfmq/lfmq/engine/kv"
)

// Sequence is the complete state of one token stream (docs/model.md §4.4,
// §4.5): for every attention layer the KV cache (k after its norm and
// RoPE, and v, in the model's kv.DType), for every short-conv layer the
// last K−1 values of B⊙x per channel. The state lives on the runner of the
// model that made the sequence (SeqState); the sequence keeps its length
// and how it was built. A Sequence is used by one Forward call at a time.
type Sequence struct {
	shape      kv.Shape
	n          int // tokens consumed
	maxContext int
	limit      int             // the creating model's MaxContext
	partial    int             // ForwardOptions.Layers of the calls that built it (0: all)
	start      int             // ForwardOptions.StartLayer of the calls that built it
	snaps      []*kv.ConvState // asked for by the last Forward (ConvSnapshots)
	state      SeqState        // KV cache and conv state, on the model's runner
	pend       draftPend       // rows whose drafter context is not yet computed
}

// seqShape is what a sequence's state depends on; a Sequence may be used
// with any Model of the same shape.
func (m *Model) seqShape() kv.Shape {
	c := m.Config
	kinds := make([]byte, c.NumLayers)
	window := 0
	for i, k := range c.LayerKinds {
		kinds[i] = byte('0' + k)
		if w := c.LayerWindow(i); w > 0 {
			// Its keys and values live in window pages, given back
			// as the window moves on (kv.Table.Grow).
			kinds[i], window = kv.SlidingKind, w
		}
	}
	sh := kv.Shape{Layers: c.NumLayers, Hidden: c.HiddenSize, ConvK: c.ConvLCache, KVDim: c.NumKVHeads * c.HeadDim, Kinds: string(kinds), Window: window, DType: m.kvDType}
	if m.drafter != nil {
		sh.DraftLayers, sh.DraftKVDim = m.drafter.ContextShape()
	}
	return sh
}

// NewSequence returns an empty sequence (zero conv state, empty KV caches)
// limited to the model's MaxContext, whose pages come from the model's own
// unbounded pool (KVPool).
func (m *Model) NewSequence() *Sequence { return m.newSequence(m.kvPool) }

// NewSequence returns an empty sequence of the pool's model whose pages
// come from p. On a device the sequence keeps its state there instead.
func (p *KVPool) NewSequence() *Sequence { return p.m.newSequence(p) }

func (m *Model) newSequence(p *KVPool) *Sequence {
	s := &Sequence{shape: m.seqShape(), maxContext: m.maxContext, limit: m.maxContext}
	s.state = m.run.NewState(p)
	s.state.Attach(s)
	if m.drafter != nil {
		s.pend.m = m
	}
	return s
}

// Len returns the number of tokens the sequence holds.
func (s *Sequence) Len() int { return s.n }

// MaxContext returns the most tokens the sequence may hold.
func (s *Sequence) MaxContext() int { return s.maxContext }

// SetMaxContext sets the most tokens the sequence may hold, such as a
// server's per-request limit. n must be at least Len and 1, and at most the
// MaxContext of the model that made the sequence.
func (s *Sequence) SetMaxContext(n int) error {
	if n < max(s.n, 1) || n > s.limit {
		return &InputError{What: "SetMaxContext", Msg: fmt.Sprintf("%d is outside [%d, %d]", n, max(s.n, 1), s.limit)}
	}
	s.maxContext = n
	return nil
}

// Clone returns a copy of the sequence that may be continued differently
// from the original (prefix caching, speculation, candidate branches). The
// two share their KV pages by reference; the first to write into a shared
// page copies it (copy on write), so neither ever sees the other's later
// tokens. The conv state is copied.
//
// On a device the copy is made there; a device fault there panics with the
// device runner's error (a *devrun.DeviceError), as the CPU engine panics
// when memory runs out.
func (s *Sequence) Clone() *Sequence {
	// Pending drafter context is written into the pages before they are
	// shared: a write after would reach the copy's pages too.
	flushDraft([]*Sequence{s})
	st, err := s.state.Clone(s.n)
	if err != nil {
		panic(err)
	}
	c := &Sequence{shape: s.shape, n: s.n, maxContext: s.maxContext, limit: s.limit, partial: s.partial, start: s.start, state: st, pend: draftPend{m: s.pend.m, gone: s.pend.gone, goneFrom: s.pend.goneFrom}}
	st.Attach(c)
	return c
}

// StateBytes returns the bytes of state the sequence's tokens take (KV
// caches in their format, float32 conv states). Its last page may have
// room for more tokens, and pages it shares are counted here in full.
func (s *Sequence) StateBytes() int { return s.state.Bytes(s.n) }

// snapsWithin reports whether a snapshot was asked for after a token in
// positions [from, to).
func (s *Sequence) snapsWithin(from, to int) bool {
	for _, c := range s.snaps {
		if c.Len() > from && c.Len() <= to {
			return true
		}
	}
	return false
}

// fillSnaps writes layer l's part of the snapshots that fall inside a
// segment of n tokens starting at position start: the state after token t
// is the last h u vectors up to t, reaching back into before (the state
// at the segment's start, [H][h] oldest first) when t < h−1.
func (s *Sequence) fillSnaps(l, start, n int, before, u []float32, H, h int) {
	for _, c := range s.snaps {
		t := c.Len() - start - 1 // index of the snapshot's last token in the segment
		if t < 0 || t >= n {
			continue
		}
		dst := c.Layer(l)
		for ch := range H {
			for j := range h {
				if i := t - h + 1 + j; i >= 0 {
					dst[ch*h+j] = u[i*H+ch]
				} else {
					dst[ch*h+j] = before[ch*h+h+i]
				}
			}
		}
	}
}

// ConvAt returns the conv state after the first n tokens, taken by the
// last Forward call that involved the sequence (ForwardOptions.
// ConvSnapshots), or its current state when n is its length.
func (s *Sequence) ConvAt(n int) (*kv.ConvState, bool) {
	if n == s.n {
		c := kv.NewConvState(s.shape, n)
		if err := s.state.ReadConv(c); err != nil {
			return nil, false
		}
		return c, true
	}
	for _, c := range s.snaps {
		if c.Len() == n {
			return c, true
		}
	}
	return nil, false
}

// Rewind shortens the sequence to its first n tokens: the KV caches drop
// the later positions, and the conv state becomes conv, which must be the
// state after n tokens (from ConvAt). Speculation rewinds past the draft
// tokens it rejected; what follows is bit-identical to a sequence that
// never saw them. A sequence with sliding layers gives back their keys and
// values before its window as it grows (kv.Table.Grow): a rewind to more
// than kv.WindowSlack positions before the length its last Forward started
// from may need them, and fails with a *kv.WindowError, the sequence
// unchanged.
func (s *Sequence) Rewind(n int, conv *kv.ConvState) error {
	switch {
	case n < 0 || n > s.n:
		return &InputError{What: "Rewind", Msg: fmt.Sprintf("length %d is outside [0, %d]", n, s.n)}
	case conv == nil || conv.Len() != n || conv.Layers() != s.shape.Layers:
		return &InputError{What: "Rewind", Msg: fmt.Sprintf("needs the conv state after %d tokens", n)}
	case s.partial != 0 || s.start != 0:
		return &InputError{What: "Rewind", Msg: "a partial sequence (Layers or StartLayer) cannot be rewound"}
	}
	if err := s.state.Rewind(n, conv); err != nil {
		return err
	}
	s.cutDraft(n)
	s.n = n
	s.snaps = s.snaps[:0]
	return nil
}

// CopySpan returns positions [start, end) with conv, the state after end
// tokens (from ConvAt). On the CPU the span shares the sequence's pages;
// positions whose sliding-layer pages the sequence gave back (before the
// window of the length its last Forward started from, less
// kv.WindowSlack) are refused with a *kv.WindowError.
func (s *Sequence) CopySpan(start, end int, conv *kv.ConvState) (*kv.Span, error) {
	switch {
	case start < 0 || end <= start || end > s.n:
		return nil, &InputError{What: "CopySpan", Msg: fmt.Sprintf("[%d, %d) is not a span of a %d-token sequence", start, end, s.n)}
	case conv == nil || conv.Len() != end || conv.Layers() != s.shape.Layers:
		return nil, &InputError{What: "CopySpan", Msg: fmt.Sprintf("needs the conv state after %d tokens", end)}
	case s.partial != 0 || s.start != 0:
		return nil, &InputError{What: "CopySpan", Msg: "a partial sequence (Layers or StartLayer) has no whole state"}
	}
	flushDraft([]*Sequence{s})
	sp, err := s.state.Span(start, end, conv.Clone())
	if err == nil && s.pend.gone && s.pend.goneFrom < end {
		sp.MarkDraftGone()
	}
	return sp, err
}

// Extend appends a span to a sequence whose length is the span's start
// (a new sequence for the first span of a prefix). A span of the same
// pool starting at a multiple of kv.PageTokens is shared by reference;
// otherwise its rows are copied into the sequence's own pages.
func (s *Sequence) Extend(sp *kv.Span) error {
	switch {
	case sp.Shape() != s.shape:
		return &InputError{What: "Extend", Msg: "the span was copied from a model of another shape"}
	case sp.Start() != s.n:
		return &InputError{What: "Extend", Msg: fmt.Sprintf("the span starts at %d; the sequence holds %d tokens", sp.Start(), s.n)}
	case sp.End() > s.maxContext:
		return &ContextError{Len: s.n, Add: sp.End() - sp.Start(), MaxContext: s.maxContext}
	case s.partial != 0 || s.start != 0:
		return &InputError{What: "Extend", Msg: "a partial sequence (Layers or StartLayer) cannot be extended"}
	}
	flushDraft([]*Sequence{s})
	if err := s.state.Extend(s.n, sp); err != nil {
		return err
	}
	if sp.DraftGone() && !s.pend.gone {
		s.pend.gone, s.pend.goneFrom = true, sp.Start()
	}
	s.n = sp.End()
	return nil
}

// Free gives the sequence's pages back to its pool (those it alone held
// go to the free list) and leaves it empty: length 0, zero conv state. A
// server frees every sequence it ends so that its bounded pool does not
// run dry; elsewhere dropping a sequence is enough (see KVPool). A
// sequence on a device keeps its own storage there: Free does nothing.
func (s *Sequence) Free() {
	if !s.state.Free() {
		return
	}
	s.pend.rows, s.pend.gone = 0, false
	s.n = 0
	s.snaps = s.snaps[:0]
}

// UnmarshalSpan decodes a span made by kv.Span.MarshalBinary for a model
// of m's shape and KV format, into pages of the model's own pool; anything
// else is an *InputError, never a panic.
func (m *Model) UnmarshalSpan(data []byte) (*kv.Span, error) { return m.kvPool.UnmarshalSpan(data) }

// UnmarshalSpan decodes a span made by kv.Span.MarshalBinary for a model
// of the pool's model's shape and KV format into pages of p (on a device,
// into rows of its own); anything else is an *InputError, never a panic,
// and a *kv.PoolError when p has no room for it.
func (p *KVPool) UnmarshalSpan(data []byte) (*kv.Span, error) {
	m := p.m
	sp, err := kv.DecodeSpan(data, m.seqShape(), m.maxContext, m.run.SpanStore(p))
	var de *kv.DecodeError
	if errors.As(err, &de) {
		return nil, &InputError{What: "UnmarshalSpan", Msg: de.Msg}
	}
	return sp, err
}

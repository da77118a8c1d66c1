package model

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// draftPendMax is the most rows whose drafter context a sequence keeps
// pending (docs/drafting.md §3): at 64 rows a decode-only sequence's context
// is computed once a page, one product reading the context's weights for
// 64 rows instead of one, and its pending taps stay a few megabytes (64 rows
// of the released drafter's five taps of 2,048 floats are 2.6 MB).
const draftPendMax = 64

// draftPend is a sequence's rows whose drafter context is not yet computed:
// their taps, [rows, len(Taps)·hidden_size], at positions from, from+1, ….
// A sequence's pending rows are always its last ones.
type draftPend struct {
	m    *Model // the model whose drafter computes them (nil: none attached)
	from int
	rows int
	taps []float32
	// gone: the context of the positions from goneFrom on was given up
	// (ForwardOptions.DropDraft), and no more taps are kept.
	gone     bool
	goneFrom int
}

// QueueDraft keeps the drafter's taps of the segment's rows, [len(Toks),
// len(Taps)·hidden_size], with its sequence until its context is computed;
// a runner calls it once a step's layers have run, before Advance.
func (sg *Segment) QueueDraft(taps []float32) {
	s := sg.s
	if s.pend.gone {
		return
	}
	m := s.pend.m
	W := len(m.drafter.Taps()) * m.Config.HiddenSize
	n := len(sg.Toks)
	if len(taps) != n*W {
		panic(fmt.Sprintf("model: QueueDraft: %d taps for %d rows of %d", len(taps), n, W))
	}
	p := &s.pend
	if p.rows > 0 && p.from+p.rows != sg.Start {
		// Positions only grow between flushes (Rewind cuts the pending
		// rows, Extend flushes them first): anything else is a bug that
		// would give rows the wrong context.
		panic(fmt.Sprintf("model: QueueDraft: the segment starts at %d but %d rows are pending from %d", sg.Start, p.rows, p.from))
	}
	if p.rows == 0 {
		p.from = sg.Start
	}
	p.taps = append(p.taps[:p.rows*W], taps...)
	p.rows += n
}

// DraftPending returns how many of the sequence's last rows have no
// drafter context computed yet: at most draftPendMax (64) after any Forward
// call, 0 after FlushDraft.
func (s *Sequence) DraftPending() int { return s.pend.rows }

// FlushDraft computes the drafter's context of every row pending in seqs,
// all of them in one product (each row's bits are its own: Drafter.Context
// computes rows independently), and writes it into their states. A
// drafter's pass calls it on the sequences it reads before reading any.
func (m *Model) FlushDraft(seqs []*Sequence) { flushDraft(seqs) }

// DraftWhole reports whether the sequence holds the attached drafter's
// context of every position, so that the drafter may read it: false with
// no drafter attached, and once a Forward with DropDraft gave up rows of
// it (until a Rewind to before them), or when the sequence was cloned or
// extended from one that had.
func (s *Sequence) DraftWhole() bool { return s.pend.m != nil && !s.pend.gone }

// giveUpDraft drops the sequence's pending taps: the drafter's context of
// their positions is never computed, and the sequence keeps no more taps.
func (s *Sequence) giveUpDraft() {
	p := &s.pend
	if !p.gone {
		p.gone, p.goneFrom = true, p.from
	}
	p.rows, p.taps = 0, nil
}

// DraftContextTime returns the time spent so far computing the attached
// drafter's context, in every call on the model that computed it
// (Forward, FlushDraft, Clone, …, whoever made it): a scheduler takes it
// out of a step's time, so that its cost table holds what a step of the
// model costs, not the drafter's context it happened to compute.
func (m *Model) DraftContextTime() time.Duration { return time.Duration(m.draftNanos.Load()) }

// flushFull flushes the sequences of segs holding draftPendMax rows or
// more; with drop it gives their rows up instead (ForwardOptions.DropDraft).
func flushFull(segs []Segment, drop bool) {
	var full []*Sequence
	for i := range segs {
		if s := segs[i].s; s.pend.rows >= draftPendMax {
			if drop {
				s.giveUpDraft()
				continue
			}
			full = append(full, s)
		}
	}
	if len(full) > 0 {
		flushDraft(full)
	}
}

// draftScratch is a flush's buffers, kept between flushes.
type draftScratch struct {
	taps, k, v []float32
	pos        []int
}

var draftScratches sync.Pool

// flushDraft computes and writes the pending context of seqs (a sequence
// listed twice is computed once), one product per model among them.
func flushDraft(seqs []*Sequence) {
	for len(seqs) > 0 {
		var m *Model
		var rest []*Sequence // pending rows of another model: the next round
		for _, s := range seqs {
			switch {
			case s.pend.rows == 0:
			case m == nil || s.pend.m == m:
				m = s.pend.m
			default:
				rest = append(rest, s)
			}
		}
		if m == nil {
			return
		}
		m.flushDraft(seqs)
		seqs = rest
	}
}

// flushDraft computes the pending context of the sequences of seqs that
// are m's in one product and writes it into their states.
func (m *Model) flushDraft(seqs []*Sequence) {
	type part struct {
		s    *Sequence
		row0 int
	}
	var parts []part
	R := 0
	for _, s := range seqs {
		if s.pend.rows == 0 || s.pend.m != m || slices.ContainsFunc(parts, func(p part) bool { return p.s == s }) {
			continue
		}
		parts = append(parts, part{s, R})
		R += s.pend.rows
	}
	t0 := time.Now()
	defer func() { m.draftNanos.Add(int64(time.Since(t0))) }()
	d := m.drafter
	n, dim := d.ContextShape()
	W := len(d.Taps()) * m.Config.HiddenSize
	sc, _ := draftScratches.Get().(*draftScratch)
	if sc == nil {
		sc = &draftScratch{}
	}
	defer draftScratches.Put(sc)
	sc.taps, sc.pos = sc.taps[:0], sc.pos[:0]
	for _, pt := range parts {
		p := &pt.s.pend
		sc.taps = append(sc.taps, p.taps[:p.rows*W]...)
		for i := range p.rows {
			sc.pos = append(sc.pos, p.from+i)
		}
	}
	if cap(sc.k) < n*R*dim {
		sc.k, sc.v = make([]float32, n*R*dim), make([]float32, n*R*dim)
	}
	k, v := make([][]float32, n), make([][]float32, n)
	for j := range n {
		k[j], v[j] = sc.k[j*R*dim:(j+1)*R*dim], sc.v[j*R*dim:(j+1)*R*dim]
	}
	d.Context(m.pool, sc.taps, sc.pos, k, v)
	for _, pt := range parts {
		p := &pt.s.pend
		r0, r1 := pt.row0*dim, (pt.row0+p.rows)*dim
		for j := range n {
			pt.s.state.WriteDraft(j, p.from, k[j][r0:r1], v[j][r0:r1])
		}
		p.rows = 0
		if cap(p.taps) > draftPendMax*W {
			// A prompt chunk's rows: do not keep its buffer.
			p.taps = nil
		}
	}
}

// cutDraft drops the pending rows at positions n and after (Rewind). A
// rewind to before the first position whose context was given up makes
// the context whole again.
func (s *Sequence) cutDraft(n int) {
	p := &s.pend
	if p.gone && n <= p.goneFrom {
		p.gone = false
	}
	if p.rows == 0 {
		return
	}
	if n <= p.from {
		p.rows = 0
		return
	}
	p.rows = min(p.rows, n-p.from)
}

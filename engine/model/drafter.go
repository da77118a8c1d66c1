package model

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
)

// Drafter is a draft model attached to a Model (SetDrafter) that reads the
// model's residual stream (docs/drafting.md §3): after the decoder layers
// it taps, every row a forward processes (prompt chunks, decode and verify
// rows alike) is turned into the drafter's context keys and values at that
// row's position, which the sequence keeps in its KV pages beside its own.
// So Clone, spans, the prefix cache and Rewind carry the drafter's context
// with the model's, and a resumed prefix drafts at once.
//
// The context is computed lazily: a step keeps its rows' taps with their
// sequence, and they become keys and values, many rows in one product,
// when the drafter next reads the sequence (FlushDraft, DraftRows), when
// the sequence is copied (Clone, CopySpan, Extend), or when it holds
// draftPendMax rows. A decode step of one sequence would otherwise read
// every weight of the context's products for one row; and the rows a
// verification rejects are rewound before they are ever computed.
type Drafter interface {
	// Taps lists the decoder layers i whose output stream (after layer
	// i, Observer.Hidden(i+1)) the drafter reads, in the order it
	// concatenates them.
	Taps() []int
	// ContextShape is the drafter's KV layers and the values one
	// position's keys (or values) take in each.
	ContextShape() (layers, dim int)
	// Context turns the taps of R rows, [R, len(Taps)·hidden_size], at
	// absolute positions pos, into each drafter layer j's keys k[j] and
	// values v[j], [R, dim]. Each row must be computed on its own, so
	// that its bits do not depend on R; pool runs the products.
	Context(pool *kernels.Pool, taps []float32, pos []int, k, v [][]float32)
}

// SetDrafter attaches d: from then on every full forward hands the tapped
// rows to d and keeps its context in the sequences' pages. Call it before
// any sequence or pool is made (the sequences' shape grows by the
// drafter's layers; older ones are refused by Forward). On a device the
// step downloads the tapped rows, the drafter's context is computed on
// the CPU by the same code, and each sequence keeps it in host memory
// beside its device state (docs/drafting.md §3), so it has the CPU's bits.
func (m *Model) SetDrafter(d Drafter) error {
	for _, t := range d.Taps() {
		if t < 0 || t >= m.Config.NumLayers {
			return &InputError{What: "SetDrafter", Msg: fmt.Sprintf("tap layer %d is outside the model's %d layers", t, m.Config.NumLayers)}
		}
	}
	if n, dim := d.ContextShape(); n < 1 || dim < 1 || (m.kvDType == kv.BFP8 && dim%16 != 0) {
		return &InputError{What: "SetDrafter", Msg: fmt.Sprintf("%d context layers of %d values cannot be kept in a %s KV cache", n, dim, m.kvDType)}
	}
	prev := m.drafter
	m.drafter = d
	if err := m.run.SetDrafter(d, m.pool, m.seqShape()); err != nil {
		m.drafter = prev
		return err
	}
	m.kvPool = m.NewKVPool(0)
	return nil
}

// Drafter returns the attached drafter, or nil.
func (m *Model) Drafter() Drafter { return m.drafter }

// EmbedRows writes the embedding of each id into rows of x, [len(ids),
// hidden_size]: a drafter's block inputs are the model's embeddings.
func (m *Model) EmbedRows(ids []int, x []float32) {
	H := m.Config.HiddenSize
	for i, id := range ids {
		m.embed.Row(id, x[i*H:(i+1)*H])
	}
}

// HeadRows writes the logits of rows rows of x, [rows, hidden_size], into
// y, [rows, vocab_size], with the model's LM head in its stored format (no
// final norm: a drafter normalises with its own). Each row's bits are
// independent of rows.
func (m *Model) HeadRows(y, x []float32, rows int) { m.pool.MatMul(m.head, y, x, rows) }

// Pool returns the worker pool the model's products run on.
func (m *Model) Pool() *kernels.Pool { return m.pool }

// DraftRows returns the rows holding the attached drafter's layer j keys
// and values at position pos (< Len) of the sequence, in its KV format
// (Shape().DType, Shape().DraftKVDim values a row), and pos's row in
// them; the rows hold at least the positions from pos to the end of its
// block of kv.PageTokens (a CPU sequence's page, a device sequence's host
// rows), so a reader takes a block at a time, as the CPU attention does.
// Only for a sequence whose Shape has DraftLayers > j.
//
// Rows whose context is still pending are computed first; a caller that
// reads several sequences calls Model.FlushDraft on them all beforehand,
// which computes their rows in one product (and DraftRows then writes
// nothing, so concurrent readers are safe).
func (s *Sequence) DraftRows(j, pos int) (k, v *kv.Rows, at int) {
	if s.pend.rows > 0 {
		flushDraft([]*Sequence{s})
	}
	return s.state.DraftRows(j, pos)
}

// Shape returns the shape of the sequence's state.
func (s *Sequence) Shape() kv.Shape { return s.shape }

// tapRows copies the stream after layer l into the taps of the rows, when
// the drafter taps l.
func (m *Model) tapRows(ws *workspace, l, R int, h []float32) {
	H := m.Config.HiddenSize
	taps := m.drafter.Taps()
	W := len(taps) * H
	if cap(ws.taps) < R*W {
		ws.taps = make([]float32, R*W)
	}
	for i, t := range taps {
		if t != l {
			continue
		}
		for r := range R {
			copy(ws.taps[r*W+i*H:r*W+(i+1)*H], h[r*H:(r+1)*H])
		}
	}
}

package model

import (
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
)

// Runner is where a Model's steps run and its sequences' state lives: the
// CPU (the Model's own runner, beside the forward) or a device
// (engine/model/devrun). Forward and Sequence call it without asking which
// one it is, as ggml calls its backends; what one runner cannot do it
// refuses with an error (Check, ReplaceLinear).
type Runner interface {
	// NewState returns an empty sequence's state; a runner that pages
	// its KV takes the pages from p.
	NewState(p *KVPool) SeqState
	// Owns reports whether st was made by this runner, so that a
	// sequence stays with the runner (and device) that holds its state.
	Owns(st SeqState) bool
	// Check refuses the options the runner cannot run.
	Check(opts *ForwardOptions) error
	// Reserve makes every sequence ready for its tokens before anything
	// runs; on an error every sequence is as it was.
	Reserve(seqs []*Sequence, tokens [][]int) error
	// Begin returns the stepper of one Forward call whose steps have at
	// most rows rows; Forward calls its End when the call ends.
	Begin(rows int) Stepper
	// SpanStore says where a span decoded for sequences of pool p keeps
	// its keys and values.
	SpanStore(p *KVPool) kv.Store
	// ReplaceLinear refuses weight replacement when the weights it runs
	// are not the Model's own (they were uploaded at load).
	ReplaceLinear() error
	// SetDrafter makes the runner's steps hand the rows tapped after d's
	// tap layers to d (Drafter.Context, its products on pool) and keep
	// its context keys and values in the state of sequences of shape sh
	// (the model's shape with d's layers) made from then on.
	SetDrafter(d Drafter, pool *kernels.Pool, sh kv.Shape) error
	// DeviceInfo describes the device; ok is false for the CPU.
	DeviceInfo() (info device.Info, ok bool)
	// Close frees what the runner holds.
	Close()
}

// Stepper runs the steps of one Forward call.
type Stepper interface {
	// Step runs every layer over the rows of segs (rows in all), adds
	// each segment's tokens to its sequence (Segment.Advance), and writes
	// the logits of heads' rows into out.
	Step(segs []Segment, rows int, opts *ForwardOptions, heads []HeadSpan, out [][]float32) error
	// End releases what the call used.
	End()
}

// SeqState is one sequence's state on its runner (its KV cache and conv
// state); Sequence keeps the length and the options that built it, and
// calls these for the rest.
type SeqState interface {
	// Attach ties the state's lifetime to s (a device frees its buffers
	// once s is collected).
	Attach(s *Sequence)
	// Clone returns a copy of the state's first n positions.
	Clone(n int) (SeqState, error)
	// Bytes is the state's size for n positions.
	Bytes(n int) int
	// ReadConv copies the current conv state into c.
	ReadConv(c *kv.ConvState) error
	// Rewind shortens the state to its first n positions, its conv
	// state becoming conv; a *kv.WindowError, the state unchanged, where
	// a sliding layer's positions a query at n reads were given back.
	Rewind(n int, conv *kv.ConvState) error
	// Span returns positions [start, end) of the state with conv, the
	// conv state after end tokens (the span keeps it); a
	// *kv.WindowError where a sliding layer's were given back.
	Span(start, end int, conv *kv.ConvState) (*kv.Span, error)
	// Extend appends sp to the state of n positions, sp's start.
	Extend(n int, sp *kv.Span) error
	// Trim gives back storage taken for positions past n (a Forward
	// cancelled after Reserve).
	Trim(n int)
	// Free empties the state and reports true, or keeps it and reports
	// false where its storage stays with the sequence (a device's).
	Free() bool
	// DraftRows returns the rows holding an attached drafter's layer j
	// keys and values at position pos, and pos's row in them; the rows
	// hold positions up to the end of pos's block of kv.PageTokens
	// (docs/drafting.md §3).
	DraftRows(j, pos int) (k, v *kv.Rows, at int)
	// WriteDraft writes an attached drafter's layer j keys k and values
	// v, rows of Shape().DraftKVDim values, at positions start on, which
	// the state holds (the sequence's pending rows, Model.FlushDraft).
	WriteDraft(j, start int, k, v []float32)
}

// Segment is the part of one sequence's tokens that a step processes.
type Segment struct {
	Index int   // index of the sequence in Forward's seqs
	Toks  []int // the tokens
	Tok0  int   // index of Toks[0] in Forward's tokens[Index]
	Start int   // absolute position of Toks[0]
	Row0  int   // row of Toks[0] in the step
	Last  bool  // Toks ends the sequence's tokens of this call
	s     *Sequence
}

// State returns the segment's sequence's state.
func (sg *Segment) State() SeqState { return sg.s.state }

// Snapshots returns the conv states the Forward call was asked for
// (ForwardOptions.ConvSnapshots) of the segment's sequence; a step fills
// those that fall inside the segment.
func (sg *Segment) Snapshots() []*kv.ConvState { return sg.s.snaps }

// SnapshotsWithin reports whether a snapshot falls inside the segment: a
// state asked for after one of its tokens.
func (sg *Segment) SnapshotsWithin() bool {
	return sg.s.snapsWithin(sg.Start, sg.Start+len(sg.Toks))
}

// Advance adds the segment's tokens to its sequence; a runner calls it
// once the step's layers have run.
func (sg *Segment) Advance() { sg.s.n += len(sg.Toks) }

// HeadSpan is a run of one sequence's rows in a step whose logits are
// returned: step rows [Row0, Row0+N), which are rows [Fin0, Fin0+N) of
// the rows the head runs on, written to logits row Dst on of sequence
// Index.
type HeadSpan struct{ Index, Row0, Fin0, N, Dst int }

package model

import (
	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
)

// cpuRunner runs a Model on the CPU: its steps are Model.step over a
// workspace, its sequences' keys and values live in the pages of a KVPool
// and their conv states in host memory (cpuState).
type cpuRunner struct{ m *Model }

func (r cpuRunner) NewState(p *KVPool) SeqState {
	c := r.m.Config
	st := &cpuState{table: kv.NewTable(p.Pool), conv: make([][]float32, c.NumLayers)}
	for i, k := range c.LayerKinds {
		if k == config.Conv {
			st.conv[i] = make([]float32, (c.ConvLCache-1)*c.HiddenSize)
		}
	}
	return st
}

// Owns accepts the state of any CPU sequence: one of a model of the same
// shape is as good.
func (cpuRunner) Owns(st SeqState) bool {
	_, ok := st.(*cpuState)
	return ok
}

func (cpuRunner) Check(*ForwardOptions) error { return nil }

// Reserve takes the pages of every sequence's tokens before anything runs:
// a pool with no room (*kv.PoolError) leaves every sequence as it was.
func (cpuRunner) Reserve(seqs []*Sequence, tokens [][]int) error {
	for i, s := range seqs {
		if len(tokens[i]) == 0 {
			continue
		}
		if err := s.state.(*cpuState).table.Grow(s.n, s.n+len(tokens[i])); err != nil {
			for _, t := range seqs[:i] {
				t.state.Trim(t.n)
			}
			return err
		}
	}
	return nil
}

func (r cpuRunner) Begin(rows int) Stepper {
	return &cpuCall{m: r.m, ws: r.m.getWorkspace(rows)}
}

func (cpuRunner) SpanStore(p *KVPool) kv.Store { return p.Store }

func (cpuRunner) ReplaceLinear() error { return nil }

// SetDrafter does nothing: the CPU step reads the model's drafter
// (Model.step) and its pages hold every layer slot of the pool's shape.
func (cpuRunner) SetDrafter(Drafter, *kernels.Pool, kv.Shape) error { return nil }

func (cpuRunner) DeviceInfo() (device.Info, bool) { return device.Info{}, false }

func (cpuRunner) Close() {}

// cpuCall is one Forward call on the CPU: its workspace, recycled at End.
type cpuCall struct {
	m  *Model
	ws *workspace
}

func (c *cpuCall) Step(segs []Segment, rows int, opts *ForwardOptions, heads []HeadSpan, out [][]float32) error {
	c.m.step(c.ws, segs, rows, opts, heads, out)
	return nil
}

func (c *cpuCall) End() { c.m.workspaces.Put(c.ws) }

// cpuState is a sequence's state on the CPU: its page table and, per conv
// layer, the last K−1 values of B⊙x per channel ([H][K−1], oldest first,
// kernels.CausalConv's layout; nil for attention layers).
type cpuState struct {
	table kv.Table
	conv  [][]float32
}

func (st *cpuState) Attach(*Sequence) {}

// Clone shares the pages by reference (copy on write) and copies the conv
// state.
func (st *cpuState) Clone(int) (SeqState, error) {
	c := &cpuState{table: st.table.Clone(), conv: make([][]float32, len(st.conv))}
	for i, l := range st.conv {
		c.conv[i] = kv.Clone32(l)
	}
	return c, nil
}

// Bytes counts the full pages' positions [0, n) and the window pages'
// positions the table still holds of them (a constant number, however
// long the sequence: kv.Table.Grow).
func (st *cpuState) Bytes(n int) int {
	sh := st.table.Pool().Shape()
	b := n * sh.FullBytesPerToken()
	for i, pg := range st.table.Window() {
		if pg != nil {
			b += max(0, min(n-i*kv.PageTokens, kv.PageTokens)) * sh.WindowBytesPerToken()
		}
	}
	for _, l := range st.conv {
		b += 4 * len(l)
	}
	return b
}

func (st *cpuState) ReadConv(c *kv.ConvState) error {
	for l, x := range st.conv {
		copy(c.Layer(l), x)
	}
	return nil
}

// Rewind fails with a *kv.WindowError, the state unchanged, when the
// table gave back window pages a query at n reads.
func (st *cpuState) Rewind(n int, conv *kv.ConvState) error {
	if err := st.table.Rewind(n); err != nil {
		return err
	}
	st.setConv(conv)
	return nil
}

func (st *cpuState) setConv(conv *kv.ConvState) {
	for i, c := range st.conv {
		if c != nil {
			copy(c, conv.Layer(i))
		}
	}
}

func (st *cpuState) Span(start, end int, conv *kv.ConvState) (*kv.Span, error) {
	return st.table.Span(start, end, conv)
}

func (st *cpuState) Extend(n int, sp *kv.Span) error {
	if err := st.table.Extend(n, sp); err != nil {
		return err
	}
	st.setConv(sp.Conv())
	return nil
}

func (st *cpuState) Trim(n int) { st.table.Trim(n) }

func (st *cpuState) Free() bool {
	st.table.Trim(0)
	for _, l := range st.conv {
		clear(l)
	}
	return true
}

// DraftRows returns the page holding pos: drafter layer j is the page's
// layer slot Layers+j.
func (st *cpuState) DraftRows(j, pos int) (k, v *kv.Rows, at int) {
	pg := st.table.Pages()[pos/kv.PageTokens]
	l := st.table.Pool().Shape().Layers + j
	return pg.K(l), pg.V(l), pos % kv.PageTokens
}

// WriteDraft writes drafter layer j's rows into the pages' layer slot
// Layers+j. The pages are the sequence's own: it flushes its pending rows
// before anything shares them (Sequence.Clone, CopySpan).
func (st *cpuState) WriteDraft(j, start int, k, v []float32) {
	st.table.Write(st.table.Pool().Shape().Layers+j, start, k, v)
}

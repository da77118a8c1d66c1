package devrun

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// A drafter attached to a model on a device (docs/drafting.md §3): the
// step copies the stream after each tap layer into a device buffer and
// downloads it once the layers have run; the drafter's context keys and
// values are computed on the host by Drafter.Context, the code the CPU
// runner calls on the same rows (the device's stream has the CPU's bits),
// and each sequence keeps them in host rows in the KV format beside its
// device buffers (devState.dk, dv). The drafter runs on the CPU and reads
// them there (Sequence.DraftRows), so they never go to the device.

// devDrafter is the attached drafter and the host memory of its step.
type devDrafter struct {
	d           model.Drafter
	pool        *kernels.Pool
	taps        []int
	layers, dim int
	// Host scratch of a step (under devModel.mu): the downloaded taps
	// [len(taps)][R, H] and the drafter's input [R, len(taps)·H].
	down, in []float32
}

// SetDrafter attaches d: from then on each step taps the stream for it
// and sequences made afterwards (of shape sh) keep its context.
func (dm *devModel) SetDrafter(d model.Drafter, pool *kernels.Pool, sh kv.Shape) error {
	n, dim := d.ContextShape()
	if sh.DraftLayers != n || sh.DraftKVDim != dim || sh.Layers != dm.cfg.NumLayers {
		return &model.InputError{What: "SetDrafter", Msg: fmt.Sprintf("the sequences' shape holds %d drafter layers of %d values; the drafter has %d of %d", sh.DraftLayers, sh.DraftKVDim, n, dim)}
	}
	dm.mu.Lock()
	defer dm.mu.Unlock()
	dm.draft = devDrafter{d: d, pool: pool, taps: append([]int(nil), d.Taps()...), layers: n, dim: dim}
	dm.shape = sh
	// The next step sizes the workspace again, with the taps' buffer.
	dm.ws.free(dm.d)
	return nil
}

// tapRows queues the copy of the stream after layer l (the step's R rows
// in ws.h) into the taps' buffer, once per tap that names l.
func (dm *devModel) tapRows(r *run, l, R int) {
	H := dm.cfg.HiddenSize
	for i, t := range dm.draft.taps {
		if t == l {
			r.copy(dm.ws.taps, 4*i*R*H, dm.ws.h, 0, 4*R*H)
		}
	}
}

// draftContext downloads the step's taps and hands each segment's rows to
// its sequence (model.Segment.QueueDraft): the drafter's context keys and
// values are computed from them later, many rows at a time, by the host
// code the CPU runner uses (model.Model.FlushDraft), and written into the
// sequence's host rows (WriteDraft), rounded to the KV format as the CPU's
// pages round them (kv.Rows.Set).
func (dm *devModel) draftContext(r *run, segs []model.Segment, R int) {
	dd := &dm.draft
	H, nt := dm.cfg.HiddenSize, len(dd.taps)
	W := nt * H
	dd.down = grow(dd.down, nt*R*H)
	r.read(dm.ws.taps, 0, f32Bytes(dd.down))
	if r.err != nil {
		return
	}
	// [tap][row] to [row][tap], the order the drafter concatenates.
	dd.in = grow(dd.in, R*W)
	for i := range nt {
		for row := range R {
			copy(dd.in[row*W+i*H:row*W+(i+1)*H], dd.down[(i*R+row)*H:(i*R+row+1)*H])
		}
	}
	for i := range segs {
		sg := &segs[i]
		sg.QueueDraft(dd.in[sg.Row0*W : (sg.Row0+len(sg.Toks))*W])
	}
}

// WriteDraft writes drafter layer j's keys and values at positions start
// on into the host rows, which have room for them (the sequence's pending
// rows, reserved by the step that queued them).
func (st *devState) WriteDraft(j, start int, k, v []float32) {
	dt, dim := st.dm.kv, st.dm.draft.dim
	st.dk[j].Set(dt, dim, start, k)
	st.dv[j].Set(dt, dim, start, v)
}

// grow returns x resliced to n, reallocated when its capacity is short.
func grow(x []float32, n int) []float32 {
	if cap(x) < n {
		return make([]float32, n)
	}
	return x[:n]
}

// growDraft gives st's drafter rows room for capTok positions, keeping
// the positions it holds (the caller holds dm.mu).
func (st *devState) growDraft(capTok int) {
	dt, dim := st.dm.kv, st.dm.draft.dim
	for j := range st.dk {
		for _, rows := range []*kv.Rows{&st.dk[j], &st.dv[j]} {
			nr := kv.MakeRows(dt, dim, capTok)
			if !rows.Empty() {
				nr.Copy(dt, dim, 0, rows, 0, st.capTok)
			}
			*rows = nr
		}
	}
}

// cloneDraft copies st's first n positions of drafter rows into c, which
// has room for them.
func (st *devState) cloneDraft(c *devState, n int) {
	dt, dim := st.dm.kv, st.dm.draft.dim
	for j := range min(len(st.dk), len(c.dk)) {
		if n > 0 {
			c.dk[j].Copy(dt, dim, 0, &st.dk[j], 0, n)
			c.dv[j].Copy(dt, dim, 0, &st.dv[j], 0, n)
		}
	}
}

// spanDraft fills a span's drafter layer slots, k and v (layer slots
// Layers+j), with copies of positions [start, end).
func (st *devState) spanDraft(start, end int, k, v []kv.Rows) {
	dt, dim := st.dm.kv, st.dm.draft.dim
	for j := range min(len(st.dk), len(k)) {
		k[j], v[j] = kv.MakeRows(dt, dim, end-start), kv.MakeRows(dt, dim, end-start)
		k[j].Copy(dt, dim, 0, &st.dk[j], start, end-start)
		v[j].Copy(dt, dim, 0, &st.dv[j], start, end-start)
	}
}

// extendDraft writes a span's drafter layer slots (k and v, n contiguous
// rows of its positions) at start; st has room for them.
func (st *devState) extendDraft(start, n int, k, v []kv.Rows) {
	dt, dim := st.dm.kv, st.dm.draft.dim
	for j := range min(len(st.dk), len(k)) {
		if k[j].Empty() {
			continue
		}
		st.dk[j].Copy(dt, dim, start, &k[j], 0, n)
		st.dv[j].Copy(dt, dim, start, &v[j], 0, n)
	}
}

// DraftRows returns the host rows of drafter layer j: they hold every
// position of the sequence, pos at row pos.
func (st *devState) DraftRows(j, pos int) (k, v *kv.Rows, at int) {
	return &st.dk[j], &st.dv[j], pos
}

package devrun

import (
	"fmt"
	"math"
	"runtime"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// The device step: the same layers as the CPU runner's step
// (engine/model's forward.go), in the same order, as kernel launches on one
// queue. Nothing comes back to the host but the logits asked for (and conv
// snapshots, for speculation).

// attnBlock and attnSplit are the CPU attention's block and split
// (engine/model's attention.go), which the kernels hard-code: the device
// sums in the same order.
const (
	attnBlock = kv.PageTokens
	attnSplit = 1024
)

// run queues kernels and keeps the first error, so a step reads as a
// list of launches and is checked once.
type run struct {
	d   device.Device
	err error
}

func (r *run) launch(name string, n, local int, args ...any) {
	if r.err == nil {
		r.err = r.d.Launch(name, n, local, args...)
	}
}

func (r *run) write(b device.Buffer, off int, src []byte) {
	if r.err == nil {
		r.err = r.d.Write(b, off, src)
	}
}

func (r *run) copy(dst device.Buffer, doff int, src device.Buffer, soff, n int) {
	if r.err == nil && n > 0 {
		r.err = r.d.Copy(dst, doff, src, soff, n)
	}
}

func (r *run) read(b device.Buffer, off int, dst []byte) {
	if r.err == nil {
		r.err = r.d.Read(b, off, dst)
	}
}

func i32(n int) int32 { return int32(n) }

func b32(v bool) int32 {
	if v {
		return 1
	}
	return 0
}

// rowsPerItem is ROWS of kernels.cl: the rows one item of mm_bfp_rows
// computes.
const rowsPerItem = 8

// mm queues y = W·x for B rows; with sel set, row b uses expert sel[b]'s
// matrix and input row b/xdiv.
func (dm *devModel) mm(r *run, w devMat, y, x device.Buffer, B int, sel device.Buffer, xdiv int) {
	if B == 0 {
		return
	}
	usesel := sel != nil
	if sel == nil {
		sel, xdiv = dm.dummy, 1
	}
	args := []any{y, w.b, x, i32(w.in), i32(w.out), i32(B), sel, b32(usesel), i32(w.stride), i32(xdiv)}
	switch w.f {
	case kernels.F32:
		r.launch("mm_f32", 16*B*w.out, 64, args...)
	case kernels.BF16:
		r.launch("mm_bf16", 16*B*w.out, 64, args...)
	case kernels.BFP8, kernels.BFP4:
		scale, bits := dm.scales[0], int32(8)
		if w.f == kernels.BFP4 {
			scale, bits = dm.scales[1], 4
		}
		if usesel || B == 1 {
			r.launch("mm_bfp", B*w.out, 0, append(args, scale, bits)...)
			return
		}
		// Without expert selection, blocks of rows share each decoded
		// weight (ROWS in kernels.cl).
		r.launch("mm_bfp_rows", (B+rowsPerItem-1)/rowsPerItem*w.out, 0, y, w.b, x, i32(w.in), i32(w.out), i32(B), scale, bits)
	default:
		if r.err == nil {
			r.err = fmt.Errorf("model: no device product for %s weights", w.f)
		}
	}
}

func (dm *devModel) rmsnorm(r *run, y, x, w device.Buffer, n, nvec int) {
	r.launch("rmsnorm", 16*nvec, 16, y, x, w, i32(n), i32(nvec), dm.cfg.NormEps)
}

func (dm *devModel) addBias(r *run, x, b device.Buffer, m, rows int) {
	if b != nil {
		r.launch("add_bias", m*rows, 0, x, b, i32(m), i32(m*rows))
	}
}

// Step runs every layer over the rows of segs on the device and writes the
// logits of heads' rows into out.
func (dm *devModel) Step(segs []model.Segment, R int, _ *model.ForwardOptions, heads []model.HeadSpan, out [][]float32) error {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	if dm.err != nil {
		return dm.err
	}
	dm.flushFrees()
	if err := dm.ensure(R); err != nil {
		return dm.fault(err)
	}
	// Per-sequence state must hold the new rows before the step queues.
	for _, sg := range segs {
		if err := dm.reserve(sg.State().(*devState), sg.Start+len(sg.Toks)); err != nil {
			return dm.fault(err)
		}
	}
	c, w := dm.cfg, &dm.ws
	r := &run{d: dm.d}
	H := c.HiddenSize
	ids := make([]int32, 0, R)
	pos := make([]int32, 0, R)
	for _, sg := range segs {
		for t, id := range sg.Toks {
			ids = append(ids, int32(id))
			pos = append(pos, int32(sg.Start+t))
		}
	}
	r.write(w.ids, 0, i32Bytes(ids))
	r.write(w.pos, 0, i32Bytes(pos))
	if dm.embed.f == kernels.BF16 {
		r.launch("embed_bf16", R*H, 0, w.h, dm.embed.b, w.ids, i32(H), i32(R))
	} else {
		r.launch("embed_f32", R*H, 0, w.h, dm.embed.b, w.ids, i32(H), i32(R))
	}
	for l := range dm.layers {
		ly := &dm.layers[l]
		dm.rmsnorm(r, w.a, w.h, ly.opNorm, H, R)
		if ly.kind == config.Conv {
			dm.conv(r, l, ly, segs, R)
		} else {
			dm.attention(r, l, ly, segs, R)
		}
		if ly.postOpNorm != nil {
			// LFM3 normalises each branch's output before its residual
			// add (docs/lfm3.md), in place as the CPU step does.
			dm.rmsnorm(r, w.o, w.o, ly.postOpNorm, H, R)
		}
		r.launch("add_into", R*H, 0, w.h, w.o, i32(R*H))
		dm.rmsnorm(r, w.a, w.h, ly.ffnNorm, H, R)
		if ly.moe {
			dm.moe(r, ly, R)
		} else {
			dm.dense(r, ly, R)
		}
		if ly.postFFNNorm != nil {
			dm.rmsnorm(r, w.o, w.o, ly.postFFNNorm, H, R)
		}
		r.launch("add_into", R*H, 0, w.h, w.o, i32(R*H))
		if dm.draft.d != nil {
			dm.tapRows(r, l, R)
		}
	}
	if dm.draft.d != nil {
		dm.draftContext(r, segs, R)
	}
	for i := range segs {
		segs[i].Advance()
	}
	if len(heads) > 0 {
		dm.logits(r, heads, out)
	} else if r.err == nil {
		r.err = dm.d.Finish()
	}
	if r.err != nil {
		return dm.fault(r.err)
	}
	return nil
}

// fault fails the model: a device that faulted mid-run holds state that
// cannot be trusted, and the engine never switches device silently.
func (dm *devModel) fault(err error) error {
	dm.err = &DeviceError{Device: dm.d.Info(), Err: err}
	return dm.err
}

// conv is the gated short convolution (Model.convBlock).
func (dm *devModel) conv(r *run, l int, ly *devLayer, segs []model.Segment, R int) {
	c, w := dm.cfg, &dm.ws
	H, K := c.HiddenSize, c.ConvLCache
	dm.mm(r, ly.inProj, w.proj, w.a, R, nil, 1)
	dm.addBias(r, w.proj, ly.inBias, 3*H, R)
	r.launch("conv_bx", R*H, 0, w.u, w.proj, i32(H), i32(R))
	for _, sg := range segs {
		n := len(sg.Toks)
		st := sg.State().(*devState).conv[l]
		snaps := sg.SnapshotsWithin()
		if snaps {
			r.copy(w.before, 0, st, 0, 4*(K-1)*H)
		}
		bias, hasBias := dm.dummy, ly.convBias != nil
		if hasBias {
			bias = ly.convBias
		}
		r.launch("causal_conv", H, 0, w.cv, w.u, st, ly.convW, bias, b32(hasBias), i32(n), i32(H), i32(K), i32(sg.Row0))
		if snaps {
			dm.convSnaps(r, l, sg, n)
		}
	}
	r.launch("conv_cy", R*H, 0, w.y, w.proj, w.cv, i32(H), i32(R))
	dm.mm(r, ly.outProj, w.o, w.y, R, nil, 1)
	dm.addBias(r, w.o, ly.outBias, H, R)
}

// convSnaps reads back layer l's conv state after each snapshot length
// that falls inside the segment (Sequence.fillSnaps on the device).
func (dm *devModel) convSnaps(r *run, l int, sg model.Segment, n int) {
	c, w := dm.cfg, &dm.ws
	H, h := c.HiddenSize, c.ConvLCache-1
	for _, cs := range sg.Snapshots() {
		t := cs.Len() - sg.Start - 1
		if t < 0 || t >= n || h == 0 {
			continue
		}
		r.launch("conv_snap", H*h, 0, w.snap, w.before, w.u, i32(H), i32(h), i32(t), i32(sg.Row0))
		r.read(w.snap, 0, f32Bytes(cs.Layer(l)))
	}
}

// maxScoreFloats bounds the attention scratch; longer prefills run their
// scores in groups of tokens.
const maxScoreFloats = 1 << 26

// attention is grouped-query attention (Model.attentionBlock), in the CPU
// engine's blocked order (attention.go): the scores, then each split's
// running block maxima and exponentials, then per output value the splits'
// online softmax and their merge. The kernels hard-code attnBlock = 64 and
// attnSplit = 1024. LFM3 adds (docs/lfm3.md) the layer's own RoPE tables,
// a sliding window (the kernels' W: a query reads only the last W
// positions, on the same grid of blocks and splits) and the output gate,
// sigmoid(gate_proj·a) per head onto that head's output before o_proj. The
// device keeps every position of a sliding layer; the window only masks
// what attention reads.
func (dm *devModel) attention(r *run, l int, ly *devLayer, segs []model.Segment, R int) {
	c, w := dm.cfg, &dm.ws
	d, Hq, Hkv := c.HeadDim, c.NumHeads, c.NumKVHeads
	kvd := Hkv * d
	dm.mm(r, ly.q, w.q, w.a, R, nil, 1)
	dm.mm(r, ly.k, w.k, w.a, R, nil, 1)
	dm.mm(r, ly.v, w.v, w.a, R, nil, 1)
	if ly.attnGate.b != nil {
		dm.mm(r, ly.attnGate, w.gate, w.a, R, nil, 1)
	}
	dm.rmsnorm(r, w.q, w.q, ly.qNorm, d, R*Hq)
	dm.rmsnorm(r, w.k, w.k, ly.kNorm, d, R*Hkv)
	r.launch("rope", R*Hq*d/2, 0, w.q, ly.cos, ly.sin, w.pos, i32(d), i32(Hq), i32(R*Hq))
	r.launch("rope", R*Hkv*d/2, 0, w.k, ly.cos, ly.sin, w.pos, i32(d), i32(Hkv), i32(R*Hkv))
	scale := float32(1 / math.Sqrt(float64(d)))
	group := c.KVGroup()
	W := ly.window
	for _, sg := range segs {
		st := sg.State().(*devState)
		n := len(sg.Toks)
		dm.storeKV(r, st.k[l], w.k, sg.Row0, sg.Start, n)
		dm.storeKV(r, st.v[l], w.v, sg.Row0, sg.Start, n)
		for t0 := 0; t0 < n; {
			nt := n - t0
			for nt > 1 && nt*Hq*(sg.Start+t0+nt) > maxScoreFloats {
				nt /= 2
			}
			L := sg.Start + t0 + nt
			need := nt * Hq * L
			if w.scoreFloats < need {
				if w.scores != nil {
					dm.d.Free(w.scores)
					w.scores, w.scoreFloats = nil, 0
				}
				b, err := dm.alloc(4 * need)
				if err != nil {
					if r.err == nil {
						r.err = err
					}
					return
				}
				w.scores, w.scoreFloats = b, need
			}
			// The running block maxima: one per 64 positions of each row.
			blocks := nt * Hq * ((L + attnBlock - 1) / attnBlock)
			if w.bmaxFloats < blocks {
				if w.bmax != nil {
					dm.d.Free(w.bmax)
					w.bmax, w.bmaxFloats = nil, 0
				}
				b, err := dm.alloc(4 * blocks)
				if err != nil {
					if r.err == nil {
						r.err = err
					}
					return
				}
				w.bmax, w.bmaxFloats = b, blocks
			}
			nsplit := (L + attnSplit - 1) / attnSplit
			r.launch("attn_scores", need, 0, w.scores, w.q, st.k[l], i32(int(dm.kv)), i32(d), i32(Hq), i32(group), i32(kvd), i32(sg.Row0), i32(sg.Start), i32(t0), i32(nt), scale, i32(W))
			r.launch("attn_block_max", nt*Hq*nsplit, 0, w.scores, w.bmax, i32(Hq), i32(sg.Start), i32(t0), i32(nt), i32(W))
			r.launch("attn_split_out", nt*Hq*d, 0, w.ao, w.scores, w.bmax, st.v[l], i32(int(dm.kv)), i32(d), i32(Hq), i32(group), i32(kvd), i32(sg.Row0), i32(sg.Start), i32(t0), i32(nt), i32(W))
			t0 += nt
		}
	}
	if ly.attnGate.b != nil {
		r.launch("attn_gate", R*Hq*d, 0, w.ao, w.gate, i32(d), i32(R*Hq*d))
	}
	dm.mm(r, ly.o, w.o, w.ao, R, nil, 1)
}

// storeKV writes n rows of keys or values (step rows row0…, kvd floats
// each) into a sequence's cache at positions start…, rounded to the
// cache's format as the CPU's kv.Rows.Set rounds them.
func (dm *devModel) storeKV(r *run, cache, x device.Buffer, row0, start, n int) {
	kvd := dm.cfg.NumKVHeads * dm.cfg.HeadDim
	switch dm.kv {
	case kv.BF16:
		r.launch("kv_store_bf16", n*kvd, 0, cache, x, i32(kvd), i32(row0), i32(start), i32(n))
	case kv.BFP8:
		r.launch("kv_store_bfp8", n*kvd/16, 0, cache, x, i32(kvd), i32(row0), i32(start), i32(n))
	default:
		r.copy(cache, 4*start*kvd, x, 4*row0*kvd, 4*n*kvd)
	}
}

// dense is the SwiGLU feed-forward (Model.denseBlock).
func (dm *devModel) dense(r *run, ly *devLayer, R int) {
	w := &dm.ws
	F := ly.w1.out
	dm.mm(r, ly.w1, w.ffG, w.a, R, nil, 1)
	dm.mm(r, ly.w3, w.ffU, w.a, R, nil, 1)
	r.launch("swiglu", R*F, 0, w.ffG, w.ffG, w.ffU, i32(R*F))
	dm.mm(r, ly.w2, w.o, w.ffG, R, nil, 1)
}

// moe is the routed-expert feed-forward (Model.moeBlock): every (row,
// slot) pair runs its expert's SwiGLU, selected on the device, and each
// row sums its experts' outputs in ascending expert id.
func (dm *devModel) moe(r *run, ly *devLayer, R int) {
	c, w := dm.cfg, &dm.ws
	H, E, K, Fe := c.HiddenSize, c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize
	dm.mm(r, ly.gate, w.router, w.a, R, nil, 1)
	bias, hasBias := dm.dummy, ly.expertBias != nil
	if hasBias {
		bias = ly.expertBias
	}
	r.launch("route", R, 0, w.sel, w.wts, w.router, bias, b32(hasBias), i32(E), i32(K), b32(c.NormTopKProb), c.RoutedScalingFactor, i32(R))
	P := R * K
	dm.mm(r, ly.ew1, w.eg, w.a, P, w.sel, K)
	dm.mm(r, ly.ew3, w.eu, w.a, P, w.sel, K)
	r.launch("swiglu", P*Fe, 0, w.eg, w.eg, w.eu, i32(P*Fe))
	dm.mm(r, ly.ew2, w.ey, w.eg, P, w.sel, 1)
	r.launch("moe_combine", R*H, 0, w.o, w.ey, w.sel, w.wts, i32(K), i32(H), i32(R))
}

// logits runs the final norm and the head on the rows whose logits are
// returned and copies them out (the CPU step's tail).
func (dm *devModel) logits(r *run, spans []model.HeadSpan, out [][]float32) {
	c, w := dm.cfg, &dm.ws
	H, V := c.HiddenSize, c.VocabSize
	var idx []int32
	for _, sp := range spans {
		for i := range sp.N {
			idx = append(idx, int32(sp.Row0+i))
		}
	}
	if len(idx) == 0 {
		if r.err == nil {
			r.err = dm.d.Finish()
		}
		return
	}
	nf := len(idx)
	if w.logitsRows < nf {
		if w.logits != nil {
			dm.d.Free(w.logits)
			w.logits, w.logitsRows = nil, 0
		}
		b, err := dm.alloc(4 * nf * V)
		if err != nil {
			if r.err == nil {
				r.err = err
			}
			return
		}
		w.logits, w.logitsRows = b, nf
	}
	r.write(w.finIdx, 0, i32Bytes(idx))
	r.launch("gather_rows", nf*H, 0, w.a, w.h, w.finIdx, i32(H), i32(nf))
	dm.rmsnorm(r, w.fin, w.a, dm.final, H, nf)
	dm.mm(r, dm.head, w.logits, w.fin, nf, nil, 1)
	for _, sp := range spans {
		r.read(w.logits, 4*sp.Fin0*V, f32Bytes(out[sp.Index][sp.Dst*V:(sp.Dst+sp.N)*V]))
	}
}

// devState is a sequence's state on a device: per conv layer its conv
// state, per attention layer its keys and values in the model's KV format
// with room for capTok positions. It is freed when its Sequence is
// collected.
type devState struct {
	dm     *devModel
	conv   []device.Buffer // [layer] (K−1)·H floats
	k, v   []device.Buffer // [layer] capTok rows of kvRowBytes
	dk, dv []kv.Rows       // [drafter layer] capTok rows in host memory (drafter.go)
	capTok int
}

func (st *devState) buffers() []device.Buffer {
	var bs []device.Buffer
	for _, list := range [][]device.Buffer{st.conv, st.k, st.v} {
		for _, b := range list {
			if b != nil {
				bs = append(bs, b)
			}
		}
	}
	return bs
}

// newState returns an empty sequence's state; its buffers are allocated
// by the first step that needs them (reserve), so making a sequence never
// fails.
func (dm *devModel) newState() *devState {
	n, nd := dm.cfg.NumLayers, dm.draft.layers
	return &devState{dm: dm, conv: make([]device.Buffer, n), k: make([]device.Buffer, n), v: make([]device.Buffer, n),
		dk: make([]kv.Rows, nd), dv: make([]kv.Rows, nd)}
}

// release frees the state now (the caller holds dm.mu).
func (st *devState) release() {
	for _, b := range st.buffers() {
		st.dm.d.Free(b)
	}
	st.conv, st.k, st.v = nil, nil, nil
}

// Attach ties st's lifetime to s.
func (st *devState) Attach(s *model.Sequence) {
	runtime.AddCleanup(s, func(st *devState) { st.dm.deferFree(st.buffers()) }, st)
}

// reserve allocates st's conv state (zero) if it has none yet and grows
// its key and value buffers to hold n positions (the caller holds dm.mu),
// doubling so that decoding reallocates rarely.
func (dm *devModel) reserve(st *devState, n int) error {
	c := dm.cfg
	for l, kind := range c.LayerKinds {
		if kind == config.Conv && c.ConvLCache > 1 && st.conv[l] == nil {
			b, err := dm.alloc(4 * (c.ConvLCache - 1) * c.HiddenSize)
			if err != nil {
				return err
			}
			st.conv[l] = b
		}
	}
	if n <= st.capTok {
		return nil
	}
	rb := dm.kvRowBytes()
	newCap := max(n, 2*st.capTok, 64)
	for l, kind := range c.LayerKinds {
		if kind != config.Attention {
			continue
		}
		for _, list := range [][]device.Buffer{st.k, st.v} {
			b, err := dm.alloc(newCap * rb)
			if err != nil {
				return err
			}
			if old := list[l]; old != nil {
				if err := dm.d.Copy(b, 0, old, 0, st.capTok*rb); err != nil {
					dm.d.Free(b)
					return err
				}
				dm.d.Free(old)
			}
			list[l] = b
		}
	}
	st.growDraft(newCap)
	st.capTok = newCap
	return nil
}

// Clone copies the first n positions of st into a new state.
func (st *devState) Clone(n int) (model.SeqState, error) {
	dm := st.dm
	dm.mu.Lock()
	defer dm.mu.Unlock()
	if dm.err != nil {
		return nil, dm.err
	}
	c := dm.newState()
	if err := dm.reserve(c, n); err != nil {
		c.release()
		return nil, err
	}
	rb := dm.kvRowBytes()
	r := &run{d: dm.d}
	for l := range st.conv {
		if st.conv[l] != nil {
			r.copy(c.conv[l], 0, st.conv[l], 0, st.conv[l].Bytes())
		}
		if st.k[l] != nil && n > 0 {
			r.copy(c.k[l], 0, st.k[l], 0, n*rb)
			r.copy(c.v[l], 0, st.v[l], 0, n*rb)
		}
	}
	if r.err != nil {
		c.release()
		return nil, dm.fault(r.err)
	}
	st.cloneDraft(c, n)
	return c, nil
}

// ReadConv copies the current conv state into cs.
func (st *devState) ReadConv(cs *kv.ConvState) error {
	dm := st.dm
	dm.mu.Lock()
	defer dm.mu.Unlock()
	r := &run{d: dm.d}
	for l, b := range st.conv {
		if b != nil {
			r.read(b, 0, f32Bytes(cs.Layer(l)))
		}
	}
	if r.err != nil {
		return dm.fault(r.err)
	}
	return nil
}

// Rewind sets the conv state from cs; the keys and values past n stay
// where they are, to be written over.
func (st *devState) Rewind(_ int, cs *kv.ConvState) error {
	dm := st.dm
	dm.mu.Lock()
	defer dm.mu.Unlock()
	return st.writeConvLocked(cs)
}

func (st *devState) writeConvLocked(cs *kv.ConvState) error {
	if err := st.dm.reserve(st, 0); err != nil {
		return st.dm.fault(err)
	}
	r := &run{d: st.dm.d}
	for l, b := range st.conv {
		if b != nil {
			r.write(b, 0, f32Bytes(cs.Layer(l)))
		}
	}
	if r.err != nil {
		return st.dm.fault(r.err)
	}
	return nil
}

// Span copies positions [start, end) of every attention layer's keys and
// values to the host, in the cache's format: a span of rows.
func (st *devState) Span(start, end int, conv *kv.ConvState) (*kv.Span, error) {
	dm := st.dm
	dm.mu.Lock()
	defer dm.mu.Unlock()
	rb := dm.kvRowBytes()
	k, v := make([]kv.Rows, dm.shape.KVLayers()), make([]kv.Rows, dm.shape.KVLayers())
	r := &run{d: dm.d}
	for l, kind := range dm.cfg.LayerKinds {
		if kind != config.Attention {
			continue
		}
		k[l], v[l] = dm.newKVRows(end-start), dm.newKVRows(end-start)
		r.read(st.k[l], start*rb, k[l].Bytes())
		r.read(st.v[l], start*rb, v[l].Bytes())
	}
	if r.err != nil {
		return nil, dm.fault(r.err)
	}
	st.spanDraft(start, end, k[len(st.k):], v[len(st.k):])
	return kv.NewRowSpan(dm.shape, start, end, k, v, conv), nil
}

// kvRowBytes is one position's keys (or values) in the cache's format.
func (dm *devModel) kvRowBytes() int {
	return dm.kv.RowBytes(dm.cfg.NumKVHeads * dm.cfg.HeadDim)
}

// newKVRows returns n zero positions of rows in the cache's format.
func (dm *devModel) newKVRows(n int) kv.Rows {
	return kv.MakeRows(dm.kv, dm.cfg.NumKVHeads*dm.cfg.HeadDim, n)
}

// Extend writes a span's keys and values at its positions (a CPU span's
// pages copied to rows first) and its conv state.
func (st *devState) Extend(_ int, sp *kv.Span) error {
	k, v := sp.ContiguousRows()
	dm := st.dm
	dm.mu.Lock()
	defer dm.mu.Unlock()
	if err := dm.reserve(st, sp.End()); err != nil {
		return dm.fault(err)
	}
	rb := dm.kvRowBytes()
	r := &run{d: dm.d}
	for l := range st.k {
		if st.k[l] != nil && !k[l].Empty() {
			r.write(st.k[l], sp.Start()*rb, k[l].Bytes())
			r.write(st.v[l], sp.Start()*rb, v[l].Bytes())
		}
	}
	if r.err != nil {
		return dm.fault(r.err)
	}
	st.extendDraft(sp.Start(), sp.End()-sp.Start(), k[len(st.k):], v[len(st.k):])
	return st.writeConvLocked(sp.Conv())
}

// Trim keeps the state: a device's keys and values past a sequence's
// length are written over, never read.
func (st *devState) Trim(int) {}

// Free keeps the state's storage with its sequence (it is freed when the
// sequence is collected) and reports false.
func (st *devState) Free() bool { return false }

// Bytes is the state's size on the device for n positions.
func (st *devState) Bytes(n int) int {
	c := st.dm.cfg
	rb := st.dm.kvRowBytes()
	total := 0
	for _, kind := range c.LayerKinds {
		if kind == config.Conv {
			total += 4 * (c.ConvLCache - 1) * c.HiddenSize
		} else {
			total += 2 * n * rb
		}
	}
	total += len(st.dk) * 2 * n * st.dm.kv.RowBytes(st.dm.draft.dim)
	return total
}

// DeviceError is a device fault after start. The model it happened in is
// failed: every later Forward returns the same error.
type DeviceError struct {
	Device device.Info
	Err    error
}

// Error implements error.
func (e *DeviceError) Error() string {
	return fmt.Sprintf("model: the %s device %q failed; the model cannot continue: %v", e.Device.Kind, e.Device.Name, e.Err)
}

// Unwrap returns the device's error.
func (e *DeviceError) Unwrap() error { return e.Err }

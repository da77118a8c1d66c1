package devrun

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// littleEndian reports whether the host stores integers little-endian: a
// device reads the host's bytes of weights and caches as they are.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// devModel is a Model's weights, tables and working memory on a device,
// and the step that runs there (devstep.go): the model's runner
// (model.Runner). Weights are uploaded once, at load. Every use of the
// device holds mu: a device has one queue, and the model's sequences share
// it.
type devModel struct {
	d     device.Device
	cfg   *config.Config
	kv    kv.DType // the sequences' KV cache format (Model.KVCacheDType)
	shape kv.Shape // the sequences' shape, for the spans they make

	mu      sync.Mutex
	err     error // the first fault after start; the model is failed from then on
	embed   devMat
	head    devMat
	final   device.Buffer
	layers  []devLayer
	scales  [2]device.Buffer // BFP8, BFP4 exponent steps
	dummy   device.Buffer    // an int buffer for kernels' unused selection argument
	ws      devWorkspace
	weights int64 // bytes uploaded at load

	freeMu   sync.Mutex
	freeList []device.Buffer // buffers of collected sequences, freed at the next step

	draft devDrafter // an attached drafter (drafter.go); zero without one
}

// devMat is a weight matrix on the device, or for experts every expert's
// matrix of one projection, stride elements of the buffer apart.
type devMat struct {
	f       kernels.Format
	out, in int
	b       device.Buffer
	stride  int
}

// devLayer is one decoder layer's weights on the device.
type devLayer struct {
	kind                             config.LayerKind
	moe                              bool
	opNorm, ffnNorm                  device.Buffer
	postOpNorm, postFFNNorm          device.Buffer // LFM3's post norms; nil for LFM2
	inProj, outProj                  devMat
	convW, inBias, convBias, outBias device.Buffer
	q, k, v, o                       devMat
	qNorm, kNorm                     device.Buffer
	attnGate                         devMat        // LFM3's attention output gate; none for LFM2
	cos, sin                         device.Buffer // an attention layer's RoPE tables [maxContext, d/2], shared by the layers of one RoPE
	window                           int           // positions a query sees (config.Config.LayerWindow); 0 for all
	w1, w2, w3                       devMat
	gate                             devMat
	expertBias                       device.Buffer
	ew1, ew3, ew2                    devMat
}

// New uploads m's weights and tables to d and returns the runner that
// runs m there (Model.SetRunner).
func New(m *model.Model, d device.Device) (model.Runner, error) {
	dm, err := newDevModel(m, d)
	if err != nil {
		return nil, err
	}
	return dm, nil
}

// newDevModel uploads m's weights and tables to d.
func newDevModel(m *model.Model, d device.Device) (dm *devModel, err error) {
	if !littleEndian {
		return nil, &model.InputError{What: "LoadOptions.Device", Msg: "device engines need a little-endian host"}
	}
	c := m.Config
	w := m.Weights()
	dm = &devModel{d: d, cfg: c, kv: m.KVCacheDType(), shape: m.KVPool().Shape()}
	defer func() {
		if err != nil {
			dm.Close()
			err = fmt.Errorf("model: uploading %s to %s: %w", m.Dir, d.Info().Kind, err)
		}
	}()
	up := &uploader{dm: dm}
	// Checked before anything is uploaded.
	if w.Embed.Format != kernels.BF16 && w.Embed.Format != kernels.F32 {
		return nil, &model.InputError{What: "LoadOptions.Device", Msg: fmt.Sprintf("the embedding is %s; a device reads BF16 or F32 embeddings", w.Embed.Format)}
	}
	dm.embed = up.mat(w.Embed)
	dm.head = dm.embed
	if w.Head != w.Embed {
		dm.head = up.mat(w.Head)
	}
	dm.final = up.f32(w.FinalNorm)
	// Each distinct RoPE's tables are uploaded once: the CPU's own
	// (kernels.RoPE.Table has Apply's bits), never recomputed here. LFM2
	// has one; LFM3 one per attention kind (docs/lfm3.md).
	type ropeBufs struct{ cos, sin device.Buffer }
	ropes := map[*kernels.RoPE]ropeBufs{}
	for l, ly := range w.Layers {
		p := config.LayerPrefix(l)
		dl := devLayer{kind: ly.Kind, moe: ly.MoE, opNorm: up.f32(ly.OpNorm), ffnNorm: up.f32(ly.FFNNorm),
			postOpNorm: up.f32(ly.PostOpNorm), postFFNNorm: up.f32(ly.PostFFNNorm)}
		switch ly.Kind {
		case config.Conv:
			dl.inProj, dl.outProj = up.mat(ly.InProj), up.mat(ly.OutProj)
			dl.convW = up.f32(ly.ConvW)
			dl.inBias, dl.convBias, dl.outBias = up.f32(ly.InBias), up.f32(ly.ConvBias), up.f32(ly.OutBias)
		case config.Attention:
			dl.q, dl.k, dl.v, dl.o = up.mat(ly.Q), up.mat(ly.K), up.mat(ly.V), up.mat(ly.O)
			dl.qNorm, dl.kNorm = up.f32(ly.QNorm), up.f32(ly.KNorm)
			dl.attnGate = up.mat(ly.AttnGate)
			dl.window = c.LayerWindow(l)
			rope := m.LayerRoPE(l)
			rb, ok := ropes[rope]
			if !ok {
				cos, sin := rope.Table(m.MaxContext())
				rb = ropeBufs{up.f32(cos), up.f32(sin)}
				ropes[rope] = rb
			}
			dl.cos, dl.sin = rb.cos, rb.sin
		}
		if !ly.MoE {
			dl.w1, dl.w3, dl.w2 = up.mat(ly.W1), up.mat(ly.W3), up.mat(ly.W2)
		} else {
			dl.gate = up.mat(ly.Gate)
			dl.expertBias = up.f32(ly.ExpertBias)
			pick := func(f func(e model.Expert) *kernels.Matrix) []*kernels.Matrix {
				ms := make([]*kernels.Matrix, len(ly.Experts))
				for e, ex := range ly.Experts {
					ms[e] = f(ex)
				}
				return ms
			}
			dl.ew1 = up.experts(pick(func(e model.Expert) *kernels.Matrix { return e.W1 }), p+"experts.w1")
			dl.ew3 = up.experts(pick(func(e model.Expert) *kernels.Matrix { return e.W3 }), p+"experts.w3")
			dl.ew2 = up.experts(pick(func(e model.Expert) *kernels.Matrix { return e.W2 }), p+"experts.w2")
		}
		dm.layers = append(dm.layers, dl)
	}
	s8, s4 := kernels.ScaleTable(kernels.BFP8), kernels.ScaleTable(kernels.BFP4)
	dm.scales = [2]device.Buffer{up.f32(s8[:]), up.f32(s4[:])}
	dm.dummy = up.bytes(make([]byte, 4))
	if up.err != nil {
		return nil, up.err
	}
	dm.weights = up.n
	return dm, d.Finish()
}

// uploader copies host data to new device buffers, keeping the first error.
type uploader struct {
	dm  *devModel
	n   int64
	err error
}

func (u *uploader) bytes(b []byte) device.Buffer {
	if u.err != nil || len(b) == 0 {
		return nil
	}
	buf, err := u.dm.d.Alloc(len(b))
	if err == nil {
		err = u.dm.d.Write(buf, 0, b)
	}
	if err != nil {
		u.err = err
		return nil
	}
	u.n += int64(len(b))
	return buf
}

func (u *uploader) f32(x []float32) device.Buffer { return u.bytes(f32Bytes(x)) }

func matBytes(m *kernels.Matrix) []byte {
	switch m.Format {
	case kernels.F32:
		return f32Bytes(m.F32)
	case kernels.BF16:
		if len(m.BF16) == 0 {
			return nil
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&m.BF16[0])), 2*len(m.BF16))
	}
	return m.BFP
}

func (u *uploader) mat(m *kernels.Matrix) devMat {
	if m == nil {
		return devMat{}
	}
	return devMat{f: m.Format, out: m.Out, in: m.In, b: u.bytes(matBytes(m))}
}

// experts uploads one projection of every expert into one buffer: the
// step's products then pick an expert's matrix by its id on the device.
func (u *uploader) experts(ms []*kernels.Matrix, name string) devMat {
	if u.err != nil || len(ms) == 0 {
		return devMat{}
	}
	first := ms[0]
	var all []byte
	for e, m := range ms {
		if m.Format != first.Format || m.Out != first.Out || m.In != first.In {
			u.err = &model.InputError{What: "LoadOptions.Device", Msg: fmt.Sprintf("%s: expert %d is %s [%d, %d], expert 0 %s [%d, %d]; a device needs every expert of a layer alike",
				name, e, m.Format, m.Out, m.In, first.Format, first.Out, first.In)}
			return devMat{}
		}
		all = append(all, matBytes(m)...)
	}
	per := len(all) / len(ms)
	stride := per // bytes, for BFP
	switch first.Format {
	case kernels.F32:
		stride = per / 4
	case kernels.BF16:
		stride = per / 2
	}
	if stride > math.MaxInt32 {
		u.err = &model.InputError{What: "LoadOptions.Device", Msg: name + ": an expert matrix over 2^31 elements"}
		return devMat{}
	}
	return devMat{f: first.Format, out: first.Out, in: first.In, b: u.bytes(all), stride: stride}
}

func f32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

func i32Bytes(x []int32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// Close frees everything the model holds on the device.
func (dm *devModel) Close() {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	dm.flushFrees()
	seen := map[device.Buffer]bool{}
	free := func(bs ...device.Buffer) {
		for _, b := range bs {
			if b != nil && !seen[b] {
				seen[b] = true
				dm.d.Free(b)
			}
		}
	}
	free(dm.embed.b, dm.head.b, dm.final, dm.scales[0], dm.scales[1], dm.dummy)
	for _, l := range dm.layers {
		free(l.opNorm, l.ffnNorm, l.postOpNorm, l.postFFNNorm, l.inProj.b, l.outProj.b, l.convW, l.inBias, l.convBias, l.outBias,
			l.q.b, l.k.b, l.v.b, l.o.b, l.qNorm, l.kNorm, l.attnGate.b, l.cos, l.sin, l.w1.b, l.w2.b, l.w3.b, l.gate.b, l.expertBias,
			l.ew1.b, l.ew3.b, l.ew2.b)
	}
	dm.layers = nil
	dm.ws.free(dm.d)
}

// deferFree queues buffers of a collected sequence; the next step frees
// them under the device lock.
func (dm *devModel) deferFree(bs []device.Buffer) {
	dm.freeMu.Lock()
	dm.freeList = append(dm.freeList, bs...)
	dm.freeMu.Unlock()
}

func (dm *devModel) flushFrees() {
	dm.freeMu.Lock()
	list := dm.freeList
	dm.freeList = nil
	dm.freeMu.Unlock()
	for _, b := range list {
		if b != nil {
			dm.d.Free(b)
		}
	}
}

// alloc allocates n bytes, collecting garbage sequences once if the
// device is full.
func (dm *devModel) alloc(n int) (device.Buffer, error) {
	b, err := dm.d.Alloc(n)
	if err != nil {
		runtime.GC()
		dm.flushFrees()
		b, err = dm.d.Alloc(n)
	}
	return b, err
}

// devWorkspace is the step's activations on the device, sized for capRows
// rows; grown (never shrunk) when a step needs more.
type devWorkspace struct {
	capRows                int
	h, a, o                device.Buffer
	proj, u, cv, y, before device.Buffer
	q, k, v, ao            device.Buffer
	gate                   device.Buffer // the attention output gate's inputs to the sigmoid, [R, heads] (LFM3)
	ffG, ffU               device.Buffer
	router, sel, wts       device.Buffer
	eg, eu, ey             device.Buffer
	ids, pos, finIdx, fin  device.Buffer
	logits                 device.Buffer
	logitsRows             int
	scores                 device.Buffer
	scoreFloats            int
	bmax                   device.Buffer // attention's running block maxima
	bmaxFloats             int
	snap                   device.Buffer
	taps                   device.Buffer // a drafter's tapped rows, [taps][R, H]
}

func (w *devWorkspace) buffers() []device.Buffer {
	return []device.Buffer{w.h, w.a, w.o, w.proj, w.u, w.cv, w.y, w.before, w.q, w.k, w.v, w.ao, w.gate, w.ffG, w.ffU,
		w.router, w.sel, w.wts, w.eg, w.eu, w.ey, w.ids, w.pos, w.finIdx, w.fin, w.logits, w.scores, w.bmax, w.snap, w.taps}
}

func (w *devWorkspace) free(d device.Device) {
	for _, b := range w.buffers() {
		if b != nil {
			d.Free(b)
		}
	}
	*w = devWorkspace{}
}

// ensure sizes the workspace for R rows.
func (dm *devModel) ensure(R int) error {
	w := &dm.ws
	if w.capRows >= R {
		return nil
	}
	w.free(dm.d)
	c := dm.cfg
	H, d := c.HiddenSize, c.HeadDim
	var err error
	mk := func(floats int) device.Buffer {
		if err != nil || floats <= 0 {
			return nil
		}
		var b device.Buffer
		b, err = dm.alloc(4 * floats)
		return b
	}
	w.h, w.a, w.o, w.fin = mk(R*H), mk(R*H), mk(R*H), mk(R*H)
	w.ids, w.pos, w.finIdx = mk(R), mk(R), mk(R)
	w.proj, w.u, w.cv, w.y = mk(R*3*H), mk(R*H), mk(R*H), mk(R*H)
	w.before, w.snap = mk((c.ConvLCache-1)*H+1), mk((c.ConvLCache-1)*H+1)
	w.q, w.ao = mk(R*c.NumHeads*d), mk(R*c.NumHeads*d)
	w.k, w.v = mk(R*c.NumKVHeads*d), mk(R*c.NumKVHeads*d)
	if c.AttnGate {
		w.gate = mk(R * c.NumHeads)
	}
	if c.NumDenseLayers > 0 || c.NumMoELayers() < c.NumLayers {
		w.ffG, w.ffU = mk(R*c.IntermediateSize), mk(R*c.IntermediateSize)
	}
	if c.NumMoELayers() > 0 {
		E, K, Fe := c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize
		w.router, w.sel, w.wts = mk(R*E), mk(R*K), mk(R*K)
		w.eg, w.eu, w.ey = mk(R*K*Fe), mk(R*K*Fe), mk(R*K*H)
	}
	if dm.draft.d != nil {
		w.taps = mk(len(dm.draft.taps) * R * H)
	}
	if err != nil {
		w.free(dm.d)
		return err
	}
	w.capRows = R
	return nil
}

package draft

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// TensorError is a drafter tensor that is missing, misshapen, of a dtype
// lfmq cannot run, or not one of a DSpark drafter's. File is the
// safetensors file holding it, empty when it is missing.
type TensorError struct {
	Dir, File, Tensor string
	Msg               string
}

// Error implements error.
func (e *TensorError) Error() string {
	where := e.File
	if where == "" {
		where = e.Dir
	}
	return fmt.Sprintf("drafter %s: tensor %s: %s", where, e.Tensor, e.Msg)
}

// layer is one Qwen3-style drafter layer.
type layer struct {
	inNorm, postNorm, qNorm, kNorm []float32
	q, k, v, o, gate, up, down     *kernels.Matrix
}

// Drafter is a loaded DSpark drafter attached to its target model. It is
// safe for concurrent use by Forward calls (Context) and one Propose at a
// time.
type Drafter struct {
	// Config is the drafter's validated config.json.
	Config *Config
	// Dir is the drafter's directory.
	Dir string

	target     *model.Model
	fc         *kernels.Matrix // [H, taps·Ht]
	hiddenNorm []float32
	layers     []layer
	norm       []float32
	markov1    *kernels.Matrix // [V, r]: a row per previous token
	markov2    *kernels.Matrix // [V, r]: r → V
	confW      []float32       // [H + r] (or [H] without the Markov input)
	confB      float32
	rope       *kernels.RoPE
	closeFn    func() error
	// bufs and ctxBufs keep a pass's activations (*passBufs) and the
	// context's features (*[]float32) between calls: every step runs the
	// context, and a pass's logits are tens of MB.
	bufs, ctxBufs sync.Pool
}

// Load opens the DSpark drafter in dir, checks it against target and
// attaches it (model.Model.SetDrafter). dir is either a drafter as
// published (config.json and safetensors in BF16, F16 or F32) or one
// quantized by lfmq quantize --drafter: an lfmq-1 checkpoint whose manifest
// says architecture "dspark" (docs/lfmq-1.md, "A drafter"), whose every
// file is hashed against its manifest before it is used, and whose BFP8
// matrices run as stored. Every tensor problem found is reported, joined.
func Load(dir string, target *model.Model) (*Drafter, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckTarget(filepath.Join(dir, "config.json"), target.Config); err != nil {
		return nil, err
	}
	src, err := openSource(dir)
	if err != nil {
		return nil, err
	}
	d, err := newDrafter(cfg, dir, target, src)
	if err != nil {
		src.close()
		return nil, err
	}
	d.closeFn = src.close
	if err := target.SetDrafter(d); err != nil {
		src.close()
		return nil, err
	}
	return d, nil
}

// FromTensors builds the drafter of config cfg (read from dir's config.json
// by LoadConfig) from tensors held in memory, as an lfmq-1 drafter would
// store them, checks it against target and attaches it. lfmq quantize uses
// it to measure a quantized drafter before writing it, so that its
// acceptance can be recorded in its manifest. The tensors' data must stay
// unchanged while the drafter is used.
func FromTensors(cfg *Config, dir string, target *model.Model, tensors []lfmq1.Tensor) (*Drafter, error) {
	if err := cfg.CheckTarget(filepath.Join(dir, "config.json"), target.Config); err != nil {
		return nil, err
	}
	src := &memSource{byName: map[string]lfmq1.Tensor{}}
	for _, t := range tensors {
		src.byName[t.Name] = t
		src.order = append(src.order, t.Name)
	}
	slices.Sort(src.order)
	d, err := newDrafter(cfg, dir, target, src)
	if err != nil {
		return nil, err
	}
	if err := target.SetDrafter(d); err != nil {
		return nil, err
	}
	return d, nil
}

// Close releases the drafter's files. The target must not run afterwards.
func (d *Drafter) Close() error {
	if d.closeFn == nil {
		return nil
	}
	err := d.closeFn()
	d.closeFn = nil
	return err
}

// loader collects every tensor finding.
type loader struct {
	dir  string
	src  source
	used map[string]bool
	errs []error
}

// fail records a finding about tensor name.
func (ld *loader) fail(name, msg string) {
	e := &TensorError{Dir: ld.dir, Tensor: name, Msg: msg}
	if f, ok := ld.src.file(name); ok {
		e.File = f
	}
	ld.errs = append(ld.errs, e)
}

// raw returns the bytes of tensor name, which must have the given logical
// shape and be stored as a float dtype lfmq converts (BF16, F16 or F32) or,
// when bfp is true (a matrix), as BFP8 tiles of an lfmq-1 drafter.
func (ld *loader) raw(name string, bfp bool, shape ...int) ([]byte, storage, bool) {
	ld.used[name] = true
	info, ok := ld.src.info(name)
	if !ok {
		ld.fail(name, fmt.Sprintf("missing (want shape %v)", shape))
		return nil, "", false
	}
	if !slices.Equal(info.shape, shape) {
		ld.fail(name, fmt.Sprintf("shape %v, want %v", info.shape, shape))
		return nil, "", false
	}
	switch {
	case info.store == storeBF16, info.store == storeF16, info.store == storeF32:
	case info.store == storeBFP8 && bfp:
	case info.store == storeBFP8:
		ld.fail(name, "stored as BFP8 tiles; a vector or the confidence head is kept in BF16 or F32 (docs/lfmq-1.md, \"A drafter\")")
		return nil, "", false
	default:
		want := "BF16, F16 or F32"
		if bfp {
			want += ", or BFP8 in an lfmq-1 drafter"
		}
		ld.fail(name, fmt.Sprintf("dtype %s; want %s", info.store, want))
		return nil, "", false
	}
	b, err := ld.src.bytes(name)
	if err != nil {
		ld.errs = append(ld.errs, fmt.Errorf("drafter: %w", err))
		return nil, "", false
	}
	return b, info.store, true
}

// matrix loads [out, in]: BF16 and BFP8 in place, F16 or F32 as float32.
func (ld *loader) matrix(name string, out, in int) *kernels.Matrix {
	b, st, ok := ld.raw(name, true, out, in)
	if !ok {
		return nil
	}
	var m *kernels.Matrix
	var err error
	switch st {
	case storeBF16:
		w := make([]uint16, len(b)/2)
		for i := range w {
			w[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		}
		m, err = kernels.NewBF16(out, in, w)
	case storeBFP8:
		m, err = kernels.NewBFP(kernels.BFP8, out, in, b)
	default:
		w := make([]float32, out*in)
		if err = dtype.ToFloat32(st.dtype(), b, w); err == nil {
			m, err = kernels.NewF32(out, in, w)
		}
	}
	if err != nil {
		ld.fail(name, err.Error())
		return nil
	}
	return m
}

// vector loads a 1-D tensor as float32.
func (ld *loader) vector(name string, n int) []float32 {
	b, st, ok := ld.raw(name, false, n)
	if !ok {
		return nil
	}
	w := make([]float32, n)
	if err := dtype.ToFloat32(st.dtype(), b, w); err != nil {
		ld.fail(name, err.Error())
		return nil
	}
	return w
}

// unexpected says why tensor n is not one the drafter of config c reads.
func unexpected(c *Config, n string) string {
	var i int
	var rest string
	if _, err := fmt.Sscanf(n, "layers.%d.%s", &i, &rest); err == nil && (i < 0 || i >= c.NumLayers) {
		return fmt.Sprintf("a tensor of layer %d, but config.json's num_hidden_layers is %d (layers 0 to %d)", i, c.NumLayers, c.NumLayers-1)
	}
	if strings.HasPrefix(n, "confidence_head.") && !c.Confidence {
		return "a confidence head, but config.json's enable_confidence_head is false"
	}
	return "not a tensor of a DSpark drafter (fc, hidden_norm, layers.N.*, norm, markov_head.*, confidence_head.*)"
}

func newDrafter(c *Config, dir string, target *model.Model, src source) (*Drafter, error) {
	ld := &loader{dir: dir, src: src, used: map[string]bool{}}
	H, d, Hq, Hkv, F, V, r := c.HiddenSize, c.HeadDim, c.NumHeads, c.NumKVHeads, c.IntermediateSize, c.VocabSize, c.MarkovRank
	dr := &Drafter{Config: c, Dir: dir, target: target}
	dr.fc = ld.matrix("fc.weight", H, len(c.TargetLayerIDs)*c.TargetHiddenSize)
	dr.hiddenNorm = ld.vector("hidden_norm.weight", H)
	dr.norm = ld.vector("norm.weight", H)
	for i := range c.NumLayers {
		p := fmt.Sprintf("layers.%d.", i)
		dr.layers = append(dr.layers, layer{
			inNorm:   ld.vector(p+"input_layernorm.weight", H),
			postNorm: ld.vector(p+"post_attention_layernorm.weight", H),
			qNorm:    ld.vector(p+"self_attn.q_norm.weight", d),
			kNorm:    ld.vector(p+"self_attn.k_norm.weight", d),
			q:        ld.matrix(p+"self_attn.q_proj.weight", Hq*d, H),
			k:        ld.matrix(p+"self_attn.k_proj.weight", Hkv*d, H),
			v:        ld.matrix(p+"self_attn.v_proj.weight", Hkv*d, H),
			o:        ld.matrix(p+"self_attn.o_proj.weight", H, Hq*d),
			gate:     ld.matrix(p+"mlp.gate_proj.weight", F, H),
			up:       ld.matrix(p+"mlp.up_proj.weight", F, H),
			down:     ld.matrix(p+"mlp.down_proj.weight", H, F),
		})
	}
	dr.markov1 = ld.matrix("markov_head.markov_w1.weight", V, r)
	dr.markov2 = ld.matrix("markov_head.markov_w2.weight", V, r)
	if c.Confidence {
		in := H
		if c.ConfidenceWithMarkov {
			in += r
		}
		if b, st, ok := ld.raw("confidence_head.proj.weight", false, 1, in); ok {
			dr.confW = make([]float32, in)
			if err := dtype.ToFloat32(st.dtype(), b, dr.confW); err != nil {
				ld.fail("confidence_head.proj.weight", err.Error())
			}
		}
		if bias := ld.vector("confidence_head.proj.bias", 1); bias != nil {
			dr.confB = bias[0]
		}
	}
	for _, n := range src.names() {
		switch {
		case ld.used[n]:
		case n == "embed_tokens.weight" || n == "lm_head.weight" || n == "model.embed_tokens.weight":
			// A copy of the target's: the drafter uses the target's own.
		default:
			ld.fail(n, unexpected(c, n))
		}
	}
	if len(ld.errs) > 0 {
		return nil, errors.Join(ld.errs...)
	}
	maxPos := min(target.MaxContext()+MaxBlockSize, 1<<16)
	rope, err := kernels.NewRoPE(d, c.RopeTheta, maxPos)
	if err != nil {
		return nil, fmt.Errorf("drafter %s: %w", dir, err)
	}
	dr.rope = rope
	return dr, nil
}

// Taps implements model.Drafter.
func (d *Drafter) Taps() []int { return d.Config.TargetLayerIDs }

// ContextShape implements model.Drafter.
func (d *Drafter) ContextShape() (layers, dim int) {
	return d.Config.NumLayers, d.Config.NumKVHeads * d.Config.HeadDim
}

// rotate applies the drafter's RoPE to one head vector.
func (d *Drafter) rotate(z []float32, pos int) {
	if d.Config.RopeNeoX {
		d.rope.Apply(z, pos)
	} else {
		d.rope.ApplyPairs(z, pos)
	}
}

// features writes the context features c = hidden_norm(fc(taps)) of R
// rows into x, [R, H].
func (d *Drafter) features(pool *kernels.Pool, x, taps []float32, R int) {
	H := d.Config.HiddenSize
	pool.MatMul(d.fc, x, taps, R)
	for r := range R {
		z := x[r*H : (r+1)*H]
		kernels.RMSNorm(z, z, d.hiddenNorm, d.Config.NormEps)
	}
}

// Context implements model.Drafter: each layer's keys (k_proj, k_norm,
// RoPE at the row's position) and values (v_proj) of the rows' context
// features. Context rows do not pass through a layer's input norm.
func (d *Drafter) Context(pool *kernels.Pool, taps []float32, pos []int, k, v [][]float32) {
	c := d.Config
	R, H, dh := len(pos), c.HiddenSize, c.HeadDim
	if R*d.fc.In*H < smallWork {
		// A decode step's few rows: handing them to the workers costs
		// more than the products (the bits are the same either way).
		pool = nil
	}
	xp, _ := d.ctxBufs.Get().(*[]float32)
	if xp == nil {
		xp = new([]float32)
	}
	defer d.ctxBufs.Put(xp)
	if cap(*xp) < R*H {
		*xp = make([]float32, R*H)
	}
	x := (*xp)[:R*H]
	d.features(pool, x, taps, R)
	jobs := make([]kernels.MulJob, 0, 2*len(d.layers))
	for j, ly := range d.layers {
		jobs = append(jobs, kernels.MulJob{M: ly.k, Y: k[j], X: x, Batch: R}, kernels.MulJob{M: ly.v, Y: v[j], X: x, Batch: R})
	}
	pool.MatMulAll(jobs)
	for j, ly := range d.layers {
		for r, p := range pos {
			for h := range c.NumKVHeads {
				z := k[j][(r*c.NumKVHeads+h)*dh:][:dh]
				kernels.RMSNorm(z, z, ly.kNorm, c.NormEps)
				d.rotate(z, p)
			}
		}
	}
}

var negInf = float32(math.Inf(-1))

// smallWork is the multiply-adds below which the context's products run
// on the calling goroutine: about 100 µs of one core's work, the order of
// a parallel region's dispatch on a busy machine.
const smallWork = 1 << 22

package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"sync"
	"unsafe"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// SourceFormat says what kind of checkpoint a Model was loaded from.
type SourceFormat string

// The checkpoint kinds Load reads.
const (
	// SourceHF is a Hugging Face safetensors checkpoint (single or sharded).
	SourceHF SourceFormat = "hf"
	// SourceLFMQ1 is an lfmq-1 checkpoint (a directory with manifest.json).
	SourceLFMQ1 SourceFormat = "lfmq-1"
)

// LoadOptions configures Load. The zero value is ready to use.
type LoadOptions struct {
	// Threads is the number of goroutines the products and the attention
	// use; 0 means runtime.GOMAXPROCS(0). Results do not depend on it.
	Threads int
	// Pool, if set, is used instead of a Pool of Threads goroutines; the
	// Model does not close it. Several models may share one Pool.
	Pool *kernels.Pool
	// MaxContext is the longest sequence (prompt plus generated tokens) the
	// model accepts; 0 means the config's max_position_embeddings, which is
	// also the upper bound.
	MaxContext int
	// Check is how much of an lfmq-1 checkpoint is verified against its
	// manifest when it is opened. Below lfmq1.CheckFiles (the default is
	// lfmq1.CheckStructure) the files are then hashed in the background:
	// see Verified.
	Check lfmq1.Check
	// FakeQuant, if set, names an lfmq-1 checkpoint made from the Hugging
	// Face checkpoint being loaded: every BFP tensor of it (and its head) is
	// decoded exactly to float32 and replaces the BF16 weight of the same
	// name. The result runs the quantized weights through the float32
	// kernels: the reference the lfmq-1 path is tested against.
	FakeQuant string
	// Device, if set, runs the model there: the weights are uploaded once,
	// sequences keep their state on the device, and Forward's logits are
	// bit-identical to the CPU engine's. The Model does not close it. nil
	// is the CPU engine.
	Device device.Device
	// KVCacheDType is the number format of every sequence's KV cache
	// (KVF32, the zero value, keeps float32). Each key and value is
	// rounded once, when written; results stay bit-identical at any batch,
	// chunk and thread count in every format, on the CPU and on a device
	// alike.
	KVCacheDType KVDType
}

// Model is a loaded LFM2-MoE model. Its weights are memory-mapped from the
// checkpoint and stay valid until Close. Forward may be called from several
// goroutines at once as long as they use distinct Sequences; ReplaceLinear
// must not run concurrently with Forward.
type Model struct {
	// Config is the model's validated config.json.
	Config *config.Config
	// Dir is the checkpoint directory.
	Dir string
	// Format is the kind of checkpoint the weights come from.
	Format SourceFormat
	// ManifestSHA256 identifies an lfmq-1 checkpoint (empty for SourceHF).
	ManifestSHA256 string

	maxContext int
	pool       *kernels.Pool
	ownPool    bool
	closeFn    func() error
	releaseFn  func() error // ReleasePages of the checkpoint's files
	integrity  *integrity

	embed     *kernels.Matrix // [V, H]; also the head of a tied HF checkpoint
	head      *kernels.Matrix // [V, H]
	finalNorm []float32       // model.embedding_norm: the final norm
	layers    []*layer
	rope      *kernels.RoPE
	linears   map[string]**kernels.Matrix

	workspaces sync.Pool // *workspace

	dev *devModel // the device engine, or nil for the CPU

	kvDType KVDType // the KV cache's format (LoadOptions.KVCacheDType)
	kvPool  *KVPool // NewSequence's pages: unbounded, growing on demand
}

// KVCacheDType returns the number format of the model's KV caches.
func (m *Model) KVCacheDType() KVDType { return m.kvDType }

// layer holds one decoder layer's weights. Only the fields of its kind
// (conv or attention mixer; dense or MoE feed-forward) are set.
type layer struct {
	kind             config.LayerKind
	moe              bool
	opNorm, ffnNorm  []float32
	inProj, outProj  *kernels.Matrix // conv
	convW            []float32       // conv kernel [H, K]
	inBias, convBias []float32       // conv biases (conv_bias only)
	outBias          []float32
	q, k, v, o       *kernels.Matrix // attention
	qNorm, kNorm     []float32
	w1, w2, w3       *kernels.Matrix // dense SwiGLU
	gate             *kernels.Matrix // MoE router [E, H]
	expertBias       []float32       // [E] or nil
	experts          []expert
}

// expert is one routed expert's SwiGLU.
type expert struct{ w1, w3, w2 *kernels.Matrix }

// Load opens the checkpoint in dir, an lfmq-1 checkpoint if dir holds a
// manifest.json and a Hugging Face checkpoint otherwise, and checks every
// tensor against the config: a missing, misshapen, unusable or unexpected
// tensor gives one *TensorError per finding, joined. An unknown model_type
// or other config problem gives the *config.Error of engine/config.
func Load(dir string, opts LoadOptions) (*Model, error) {
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	maxCtx := opts.MaxContext
	if maxCtx == 0 {
		maxCtx = cfg.MaxPositionEmbeddings
	}
	if maxCtx < 0 || maxCtx > cfg.MaxPositionEmbeddings {
		return nil, &InputError{What: "LoadOptions.MaxContext", Msg: fmt.Sprintf("%d is outside [1, max_position_embeddings=%d]", opts.MaxContext, cfg.MaxPositionEmbeddings)}
	}
	switch kt := opts.KVCacheDType; {
	case kt > KVBFP8:
		return nil, &InputError{What: "LoadOptions.KVCacheDType", Msg: fmt.Sprintf("unknown format %d", kt)}
	case kt == KVBFP8 && cfg.HeadDim%bfp.GroupSize != 0:
		return nil, &InputError{What: "LoadOptions.KVCacheDType", Msg: fmt.Sprintf("bfp8 groups 16 values along the head dimension; head_dim %d is not a multiple of 16", cfg.HeadDim)}
	}
	m := &Model{Config: cfg, Dir: dir, maxContext: maxCtx, linears: map[string]**kernels.Matrix{}, kvDType: opts.KVCacheDType}
	m.kvPool = m.NewKVPool(0)
	var src tensorSource
	if lfmq1.IsCheckpoint(dir) {
		if opts.FakeQuant != "" {
			return nil, &InputError{What: "LoadOptions.FakeQuant", Msg: "applies to a Hugging Face checkpoint, not to the lfmq-1 checkpoint " + dir}
		}
		c, err := lfmq1.Open(dir, opts.Check)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		m.Format, m.ManifestSHA256, m.closeFn, m.releaseFn = SourceLFMQ1, c.ManifestSHA256, c.Close, c.ReleasePages
		src = &lfmqSource{c: c}
		m.integrity = verified()
		if opts.Check < lfmq1.CheckFiles {
			m.integrity = hashInBackground(c)
			closeFiles := m.closeFn
			m.closeFn = func() error { m.integrity.stop(); return closeFiles() }
		}
	} else {
		c, err := hf.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		m.Format, m.closeFn, m.releaseFn, m.integrity = SourceHF, c.Close, c.ReleasePages, verified()
		src = &hfSource{c: c}
	}
	if err := m.loadWeights(src); err != nil {
		m.closeFn()
		return nil, err
	}
	if opts.FakeQuant != "" {
		if err := m.substituteDecoded(opts.FakeQuant); err != nil {
			m.closeFn()
			return nil, err
		}
	}
	if opts.Device != nil {
		dm, err := newDevModel(m, opts.Device)
		if err != nil {
			m.closeFn()
			return nil, err
		}
		m.dev = dm
	}
	m.pool = opts.Pool
	if m.pool == nil {
		m.pool, m.ownPool = kernels.NewPool(opts.Threads), true
	}
	return m, nil
}

// Close releases the checkpoint mappings (and the Pool, if the Model made
// it). The Model and its weights must not be used afterwards.
func (m *Model) Close() error {
	if m.dev != nil {
		m.dev.close()
		m.dev = nil
	}
	if m.ownPool {
		m.pool.Close()
	}
	if m.closeFn == nil {
		return nil
	}
	err := m.closeFn()
	m.closeFn = nil
	return err
}

// ReleasePages drops the pages of the checkpoint's mapped files that the
// Model has read from the process's resident memory. A forward reads every
// weight it runs, and each page read stays in the resident set for as long
// as it is mapped, so a caller that runs a model part by part (quant's
// calibration runs one layer after another, each with several GB of
// weights at real widths) gives the pages back when it is done with a
// part. The weights stay valid: a later forward faults the pages back in
// from the page cache (or the disk), with the same bytes.
func (m *Model) ReleasePages() error {
	if m.releaseFn == nil {
		return nil
	}
	return m.releaseFn()
}

// MaxContext returns the longest sequence the model accepts.
func (m *Model) MaxContext() int { return m.maxContext }

// DecodeWeightBytes returns the bytes of weight data that one decode step of
// one token reads, in the weights' stored formats: every linear weight
// outside the routed experts (mixers, dense FFNs, routers, the head) and,
// in each MoE layer, num_experts_per_tok experts' w1, w3 and w2 (the
// largest such experts, which for real checkpoints are all the same size).
// The embedding row and the norms, under a millionth of it, are left out.
// Divided into a decode step's time it gives the weight bandwidth decode
// reaches, the figure to hold against the memory's bandwidth.
func (m *Model) DecodeWeightBytes() int64 {
	var n int64
	add := func(ms ...*kernels.Matrix) {
		for _, w := range ms {
			if w != nil {
				n += int64(w.WeightBytes())
			}
		}
	}
	add(m.head)
	k := m.Config.NumExpertsPerTok
	for _, ly := range m.layers {
		add(ly.inProj, ly.outProj, ly.q, ly.k, ly.v, ly.o, ly.w1, ly.w2, ly.w3, ly.gate)
		sizes := make([]int64, 0, len(ly.experts))
		for _, e := range ly.experts {
			sizes = append(sizes, int64(e.w1.WeightBytes()+e.w3.WeightBytes()+e.w2.WeightBytes()))
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
		for _, s := range sizes[:min(k, len(sizes))] {
			n += s
		}
	}
	return n
}

// ReplaceLinear substitutes the weight of the linear layer called name (its
// Hugging Face name, such as "model.layers.3.feed_forward.experts.5.w1.weight",
// or "lm_head.weight" for the head) by w, which must have the same logical
// shape. Calibration uses it to run layers with their quantized experts;
// replacing the head of a tied checkpoint leaves the embedding unchanged.
func (m *Model) ReplaceLinear(name string, w *kernels.Matrix) error {
	if m.dev != nil {
		return &InputError{What: "ReplaceLinear", Msg: "the weights of a model on a device were uploaded at load; calibration runs on the CPU"}
	}
	slot, ok := m.linears[name]
	if !ok {
		return &InputError{What: "ReplaceLinear", Msg: fmt.Sprintf("%q is not a linear weight of this model", name)}
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("model: ReplaceLinear %q: %w", name, err)
	}
	if old := *slot; old.Out != w.Out || old.In != w.In {
		return &InputError{What: "ReplaceLinear", Msg: fmt.Sprintf("%q has shape [%d, %d], the replacement [%d, %d]", name, old.Out, old.In, w.Out, w.In)}
	}
	*slot = w
	return nil
}

// substituteDecoded replaces every BFP weight by its exact float32 decoding
// from the lfmq-1 checkpoint in dir (LoadOptions.FakeQuant).
func (m *Model) substituteDecoded(dir string) error {
	c, err := lfmq1.Open(dir, lfmq1.CheckStructure)
	if err != nil {
		return fmt.Errorf("model: fake-quant source: %w", err)
	}
	defer c.Close()
	// The substitution is only meaningful for weights quantized from this
	// very checkpoint; lfmq-1 records its source config's digest.
	sum, _, err := lfmq1.HashFile(filepath.Join(m.Dir, "config.json"))
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if sum != c.Manifest.Source.ConfigSHA256 {
		return &InputError{What: "LoadOptions.FakeQuant", Msg: fmt.Sprintf("%s was quantized from a checkpoint with config sha256 %s, not from %s (config sha256 %s)", dir, c.Manifest.Source.ConfigSHA256, m.Dir, sum)}
	}
	for _, e := range c.Manifest.Tensors {
		if !e.Format.IsBFP() {
			continue
		}
		st, err := c.Tensor(e.Name)
		if err != nil {
			return fmt.Errorf("model: fake-quant source: %w", err)
		}
		if len(e.Shape) != 2 {
			return &TensorError{Dir: dir, Tensor: e.Name, Problem: ProblemShape, Got: e.Shape, Detail: "a BFP tensor must be 2-D"}
		}
		out, in := int(e.Shape[0]), int(e.Shape[1])
		w, err := decodeBFP(e.Format, st.Data, out, in)
		if err != nil {
			return fmt.Errorf("model: fake-quant source %s: tensor %q: %w", dir, e.Name, err)
		}
		mat, err := kernels.NewF32(out, in, w)
		if err != nil {
			return fmt.Errorf("model: fake-quant source %s: tensor %q: %w", dir, e.Name, err)
		}
		if err := m.ReplaceLinear(e.Name, mat); err != nil {
			return err
		}
	}
	return nil
}

// storage is how a tensor's bytes encode its values.
type storage int

const (
	storeOther storage = iota // a dtype the engine does not use
	storeBF16
	storeF16
	storeF32
	storeBFP8
	storeBFP4
)

// rawTensor is one checkpoint tensor before it becomes a weight: its logical
// shape and its memory-mapped bytes.
type rawTensor struct {
	name  string
	store storage
	dtype string // the stored dtype or lfmq-1 format, for messages
	shape config.Shape
	data  []byte
}

// tensorSource abstracts the two checkpoint kinds.
type tensorSource interface {
	// tensor returns the named tensor, or false when there is none.
	tensor(name string) (rawTensor, bool, error)
	// names lists every tensor the checkpoint holds.
	names() []string
}

type hfSource struct{ c *hf.Checkpoint }

func (s *hfSource) tensor(name string) (rawTensor, bool, error) {
	info, ok := s.c.Info(name)
	if !ok {
		return rawTensor{}, false, nil
	}
	data, err := s.c.Bytes(name)
	if err != nil {
		return rawTensor{}, false, fmt.Errorf("model: %w", err)
	}
	t := rawTensor{name: name, dtype: string(info.DType), shape: config.Shape(info.Shape), data: data}
	switch info.DType {
	case dtype.BF16:
		t.store = storeBF16
	case dtype.F16:
		t.store = storeF16
	case dtype.F32:
		t.store = storeF32
	}
	return t, true, nil
}

func (s *hfSource) names() []string { return s.c.Names() }

type lfmqSource struct{ c *lfmq1.Checkpoint }

func (s *lfmqSource) tensor(name string) (rawTensor, bool, error) {
	e, ok := s.c.Manifest.Tensor(name)
	if !ok {
		return rawTensor{}, false, nil
	}
	st, err := s.c.Tensor(name)
	if err != nil {
		return rawTensor{}, false, fmt.Errorf("model: %w", err)
	}
	t := rawTensor{name: name, dtype: string(e.Format) + "/" + e.DType, shape: config.Shape(e.Shape), data: st.Data}
	// The manifest's format must agree with the stored dtype Open checked,
	// or the bytes would be misread.
	switch {
	case e.Format == lfmq1.BF16 && e.DType == string(dtype.BF16):
		t.store = storeBF16
	case e.Format == lfmq1.F32 && e.DType == string(dtype.F32):
		t.store = storeF32
	case e.Format == lfmq1.BFP8 && e.DType == string(dtype.U8):
		t.store = storeBFP8
	case e.Format == lfmq1.BFP4 && e.DType == string(dtype.U8):
		t.store = storeBFP4
	}
	return t, true, nil
}

func (s *lfmqSource) names() []string {
	out := make([]string, len(s.c.Manifest.Tensors))
	for i, e := range s.c.Manifest.Tensors {
		out[i] = e.Name
	}
	return out
}

// loader checks tensors against the config's expected shapes while the
// weights are assembled, collecting every finding instead of stopping at the
// first, so one error lists all that is wrong with a checkpoint.
type loader struct {
	dir      string
	src      tensorSource
	expected map[string]config.Shape
	used     map[string]bool
	errs     []error
}

func (ld *loader) fail(err error) { ld.errs = append(ld.errs, err) }

// get returns the tensor expected under name, looked up under the first of
// names that exists (aliases), checked against the expected shape.
func (ld *loader) get(name string, names ...string) (rawTensor, bool) {
	want := ld.expected[name]
	if len(names) == 0 {
		names = []string{name}
	}
	for _, n := range names {
		t, ok, err := ld.src.tensor(n)
		if err != nil {
			ld.fail(err)
			return rawTensor{}, false
		}
		if !ok {
			continue
		}
		ld.used[n] = true
		if !shapeEqual(t.shape, want) {
			ld.fail(&TensorError{Dir: ld.dir, Tensor: n, Problem: ProblemShape, Want: want, Got: t.shape})
			return rawTensor{}, false
		}
		return t, true
	}
	ld.fail(&TensorError{Dir: ld.dir, Tensor: name, Problem: ProblemMissing, Want: want})
	return rawTensor{}, false
}

// matrix loads a 2-D weight as a kernels.Matrix over the mapped bytes.
func (ld *loader) matrix(name string) *kernels.Matrix {
	t, ok := ld.get(name)
	if !ok {
		return nil
	}
	mat, err := newMatrix(t)
	if err != nil {
		ld.fail(&TensorError{Dir: ld.dir, Tensor: name, Problem: ProblemDType, Detail: err.Error()})
		return nil
	}
	return mat
}

// vector loads a small tensor as a float32 copy.
func (ld *loader) vector(name string, aliases ...string) []float32 {
	t, ok := ld.get(name, aliases...)
	if !ok {
		return nil
	}
	var dt dtype.DType
	switch t.store {
	case storeBF16:
		dt = dtype.BF16
	case storeF16:
		dt = dtype.F16
	case storeF32:
		dt = dtype.F32
	default:
		ld.fail(&TensorError{Dir: ld.dir, Tensor: t.name, Problem: ProblemDType, Detail: fmt.Sprintf("%s; expected BF16, F16 or F32", t.dtype)})
		return nil
	}
	out := make([]float32, len(t.data)/dt.Size())
	if err := dtype.ToFloat32(dt, t.data, out); err != nil {
		ld.fail(&TensorError{Dir: ld.dir, Tensor: t.name, Problem: ProblemDType, Detail: err.Error()})
		return nil
	}
	return out
}

func shapeEqual(a, b config.Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// loadWeights assembles every layer from src.
func (m *Model) loadWeights(src tensorSource) error {
	cfg := m.Config
	ld := &loader{dir: m.Dir, src: src, expected: cfg.ExpectedTensors(), used: map[string]bool{}}
	if m.Format == SourceLFMQ1 {
		// lfmq-1 always stores the head: BFP8 of the tied embedding.
		ld.expected["lm_head.weight"] = config.Shape{int64(cfg.VocabSize), int64(cfg.HiddenSize)}
	}
	reg := func(name string, slot **kernels.Matrix) {
		if *slot != nil {
			m.linears[name] = slot
		}
	}
	m.embed = ld.matrix("model.embed_tokens.weight")
	m.finalNorm = ld.vector("model.embedding_norm.weight")
	if _, ok := ld.expected["lm_head.weight"]; ok {
		m.head = ld.matrix("lm_head.weight")
	} else {
		m.head = m.embed
	}
	reg("lm_head.weight", &m.head)

	for i := range cfg.NumLayers {
		p := config.LayerPrefix(i)
		ly := &layer{kind: cfg.LayerKinds[i], moe: cfg.IsMoE(i)}
		m.layers = append(m.layers, ly)
		ly.opNorm = ld.vector(p + "operator_norm.weight")
		ly.ffnNorm = ld.vector(p + "ffn_norm.weight")
		switch ly.kind {
		case config.Conv:
			ly.inProj = ld.matrix(p + "conv.in_proj.weight")
			ly.convW = ld.vector(p + "conv.conv.weight") // [H, 1, K] read as [H, K]
			ly.outProj = ld.matrix(p + "conv.out_proj.weight")
			if cfg.ConvBias {
				ly.inBias = ld.vector(p + "conv.in_proj.bias")
				ly.convBias = ld.vector(p + "conv.conv.bias")
				ly.outBias = ld.vector(p + "conv.out_proj.bias")
			}
			reg(p+"conv.in_proj.weight", &ly.inProj)
			reg(p+"conv.out_proj.weight", &ly.outProj)
		case config.Attention:
			ly.q = ld.matrix(p + "self_attn.q_proj.weight")
			ly.k = ld.matrix(p + "self_attn.k_proj.weight")
			ly.v = ld.matrix(p + "self_attn.v_proj.weight")
			ly.o = ld.matrix(p + "self_attn.out_proj.weight")
			ly.qNorm = ld.vector(p + "self_attn.q_layernorm.weight")
			ly.kNorm = ld.vector(p + "self_attn.k_layernorm.weight")
			reg(p+"self_attn.q_proj.weight", &ly.q)
			reg(p+"self_attn.k_proj.weight", &ly.k)
			reg(p+"self_attn.v_proj.weight", &ly.v)
			reg(p+"self_attn.out_proj.weight", &ly.o)
		}
		if !ly.moe {
			ly.w1 = ld.matrix(p + "feed_forward.w1.weight")
			ly.w3 = ld.matrix(p + "feed_forward.w3.weight")
			ly.w2 = ld.matrix(p + "feed_forward.w2.weight")
			reg(p+"feed_forward.w1.weight", &ly.w1)
			reg(p+"feed_forward.w3.weight", &ly.w3)
			reg(p+"feed_forward.w2.weight", &ly.w2)
			continue
		}
		ly.gate = ld.matrix(p + "feed_forward.gate.weight")
		reg(p+"feed_forward.gate.weight", &ly.gate)
		if cfg.UseExpertBias {
			// Some exports name the bias as a parameter ("….weight").
			b := p + "feed_forward.expert_bias"
			ly.expertBias = ld.vector(b, b, b+".weight")
		}
		ly.experts = make([]expert, cfg.NumExperts)
		m.loadExperts(ld, i, ly)
		for e := range ly.experts {
			ep := fmt.Sprintf("%sfeed_forward.experts.%d.", p, e)
			reg(ep+"w1.weight", &ly.experts[e].w1)
			reg(ep+"w3.weight", &ly.experts[e].w3)
			reg(ep+"w2.weight", &ly.experts[e].w2)
		}
	}
	var unexpected []string
	for _, n := range src.names() {
		if !ld.used[n] {
			unexpected = append(unexpected, n)
		}
	}
	sort.Strings(unexpected)
	for _, n := range unexpected {
		var got config.Shape
		if t, ok, _ := src.tensor(n); ok {
			got = t.shape
		}
		ld.fail(&TensorError{Dir: m.Dir, Tensor: n, Problem: ProblemUnexpected, Got: got})
	}
	if len(ld.errs) > 0 {
		fe := &FindingsError{Findings: ld.errs}
		if note := cfg.ShapeDefaultsNote(); note != "" {
			fe.Note = fmt.Sprintf("model: %s/%s", m.Dir, note)
		}
		return fe
	}
	rope, err := kernels.NewRoPE(cfg.HeadDim, cfg.RopeTheta, min(m.maxContext, ropeTablePositions))
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	m.rope = rope
	return nil
}

// loadExperts loads the routed experts of MoE layer i, per-expert tensors or
// the transformers-v5 fused layout (experts.gate_up_proj [E, 2Fe, H] with
// rows 0..Fe−1 the gate w1 and Fe..2Fe−1 the up w3; experts.down_proj
// [E, H, Fe]), whose per-expert slices are contiguous row ranges and so are
// used in place like any other tensor.
func (m *Model) loadExperts(ld *loader, i int, ly *layer) {
	cfg := m.Config
	p := config.LayerPrefix(i)
	E, H, Fe := int64(cfg.NumExperts), int64(cfg.HiddenSize), int64(cfg.MoEIntermediateSize)
	fusedUp, fusedDown := p+"feed_forward.experts.gate_up_proj", p+"feed_forward.experts.down_proj"
	_, perExpert, _ := ld.src.tensor(p + "feed_forward.experts.0.w1.weight")
	_, fused, _ := ld.src.tensor(fusedUp)
	if perExpert || !fused {
		for e := range ly.experts {
			ep := fmt.Sprintf("%sfeed_forward.experts.%d.", p, e)
			ly.experts[e] = expert{w1: ld.matrix(ep + "w1.weight"), w3: ld.matrix(ep + "w3.weight"), w2: ld.matrix(ep + "w2.weight")}
		}
		return
	}
	ld.expected[fusedUp] = config.Shape{E, 2 * Fe, H}
	ld.expected[fusedDown] = config.Shape{E, H, Fe}
	up, ok1 := ld.get(fusedUp)
	down, ok2 := ld.get(fusedDown)
	if !ok1 || !ok2 {
		return
	}
	slice := func(t rawTensor, e int64, row0, rows, cols int64, name string) *kernels.Matrix {
		perRow := int64(len(t.data)) / (t.shape[0] * t.shape[1])
		start := (e*t.shape[1] + row0) * perRow
		sub := rawTensor{name: name, store: t.store, dtype: t.dtype, shape: config.Shape{rows, cols},
			data: t.data[start : start+rows*perRow]}
		mat, err := newMatrix(sub)
		if err != nil {
			ld.fail(&TensorError{Dir: ld.dir, Tensor: t.name, Problem: ProblemDType, Detail: err.Error()})
			return nil
		}
		return mat
	}
	for e := range ly.experts {
		e64 := int64(e)
		ly.experts[e] = expert{
			w1: slice(up, e64, 0, Fe, H, fusedUp),
			w3: slice(up, e64, Fe, Fe, H, fusedUp),
			w2: slice(down, e64, 0, H, Fe, fusedDown),
		}
	}
}

// newMatrix wraps a 2-D tensor's bytes as a kernels.Matrix: BF16 and F32 in
// place (copied only when the mapping is misaligned for the element type or
// the host is big-endian), F16 widened to a float32 copy, BFP as packed tiles.
func newMatrix(t rawTensor) (*kernels.Matrix, error) {
	if len(t.shape) != 2 {
		return nil, fmt.Errorf("a matrix must be 2-D, got shape %v", t.shape)
	}
	out, in := int(t.shape[0]), int(t.shape[1])
	switch t.store {
	case storeBF16:
		return kernels.NewBF16(out, in, asUint16(t.data))
	case storeF32:
		return kernels.NewF32(out, in, asFloat32(t.data))
	case storeF16:
		w := make([]float32, len(t.data)/2)
		if err := dtype.ToFloat32(dtype.F16, t.data, w); err != nil {
			return nil, err
		}
		return kernels.NewF32(out, in, w)
	case storeBFP8:
		return kernels.NewBFP(kernels.BFP8, out, in, t.data)
	case storeBFP4:
		return kernels.NewBFP(kernels.BFP4, out, in, t.data)
	}
	return nil, fmt.Errorf("%s cannot be used as a linear weight; expected BF16, F16, F32 or BFP", t.dtype)
}

// littleEndian reports whether the host stores integers little-endian, so
// that little-endian file bytes can be reinterpreted in place.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// asUint16 views little-endian bytes as uint16 values, without copying when
// the host and the alignment allow it.
func asUint16(b []byte) []uint16 {
	n := len(b) / 2
	if n == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(uint16(0)) == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}

// asFloat32 views little-endian bytes as float32 values, without copying
// when the host and the alignment allow it.
func asFloat32(b []byte) []float32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(float32(0)) == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// decodeBFP decodes an lfmq-1 BFP tensor to row-major float32 [out, in].
func decodeBFP(f lfmq1.TensorFormat, data []byte, out, in int) ([]float32, error) {
	bf := bfp.BFP8
	if f == lfmq1.BFP4 {
		bf = bfp.BFP4
	}
	return bfp.UnpackMatrix(bf, data, out, in)
}

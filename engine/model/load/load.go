package load

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"unsafe"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/devrun"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// Options configures Load. The zero value is ready to use.
type Options struct {
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
	// see Model.Verified.
	Check lfmq1.Check
	// FakeQuant, if set, names an lfmq-1 checkpoint made from the Hugging
	// Face checkpoint being loaded: every BFP tensor of it (and its head) is
	// decoded exactly to float32 and replaces the BF16 weight of the same
	// name. The result runs the quantized weights through the float32
	// kernels: the reference the lfmq-1 path is tested against.
	FakeQuant string
	// Device, if set, runs the model there (engine/model/devrun): the
	// weights are uploaded once, sequences keep their state on the device,
	// and Forward's logits are bit-identical to the CPU engine's. The Model
	// does not close it. nil is the CPU engine.
	Device device.Device
	// KVCacheDType is the number format of every sequence's KV cache
	// (kv.F32, the zero value, keeps float32). Each key and value is
	// rounded once, when written; results stay bit-identical at any batch,
	// chunk and thread count in every format, on the CPU and on a device
	// alike.
	KVCacheDType kv.DType
	// Resident reads the checkpoint's files into the process's memory on
	// transparent huge pages (Linux), where a file is 2 MiB or more and
	// available memory is at least twice it, instead of mapping them
	// (safetensors.OpenResident): a decode step streams every weight, and
	// on 4 KiB pages the row kernels' jumps between a matrix's tile rows
	// miss the TLB; huge pages made LFM3-1.7B's decode 6 to 9 % faster on
	// the development VM (docs/lfm3.md). The cost is a read of every file
	// at load and memory that stays the process's (Model.ReleasePages
	// gives nothing back), so it is for serving and scoring, not for a
	// caller that runs a model part by part. Without Device only: a
	// device's weights are uploaded.
	Resident bool
	// SkipFiniteScan leaves out the background check that a Hugging Face
	// checkpoint's weights are finite (a caller that checks every weight
	// itself: quantization refuses a non-finite one by name).
	SkipFiniteScan bool
}

// Load opens the checkpoint in dir, an lfmq-1 checkpoint if dir holds a
// manifest.json and a Hugging Face checkpoint otherwise, and checks every
// tensor against the config: a missing, misshapen, unusable or unexpected
// tensor gives one *TensorError per finding, joined. An unknown model_type
// or other config problem gives the *config.Error of engine/config.
func Load(dir string, opts Options) (*model.Model, error) {
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	maxCtx := opts.MaxContext
	if maxCtx == 0 {
		maxCtx = cfg.MaxPositionEmbeddings
	}
	if maxCtx < 0 || maxCtx > cfg.MaxPositionEmbeddings {
		return nil, &model.InputError{What: "LoadOptions.MaxContext", Msg: fmt.Sprintf("%d is outside [1, max_position_embeddings=%d]", opts.MaxContext, cfg.MaxPositionEmbeddings)}
	}
	switch kt := opts.KVCacheDType; {
	case kt > kv.BFP8:
		return nil, &model.InputError{What: "LoadOptions.KVCacheDType", Msg: fmt.Sprintf("unknown format %d", kt)}
	case kt == kv.BFP8 && cfg.HeadDim%bfp.GroupSize != 0:
		return nil, &model.InputError{What: "LoadOptions.KVCacheDType", Msg: fmt.Sprintf("bfp8 groups 16 values along the head dimension; head_dim %d is not a multiple of 16", cfg.HeadDim)}
	}
	mo := model.Options{Dir: dir, MaxContext: maxCtx, KVDType: opts.KVCacheDType, Threads: opts.Threads, Pool: opts.Pool}
	var src tensorSource
	if lfmq1.IsCheckpoint(dir) {
		if opts.FakeQuant != "" {
			return nil, &model.InputError{What: "LoadOptions.FakeQuant", Msg: "applies to a Hugging Face checkpoint, not to the lfmq-1 checkpoint " + dir}
		}
		openCkpt := lfmq1.Open
		if opts.Resident && opts.Device == nil {
			openCkpt = lfmq1.OpenResident
		}
		c, err := openCkpt(dir, opts.Check)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		mo.Format, mo.ManifestSHA256, mo.Close, mo.ReleasePages = model.SourceLFMQ1, c.ManifestSHA256, c.Close, c.ReleasePages
		src = &lfmqSource{c: c}
		if opts.Check < lfmq1.CheckFiles {
			v := hashInBackground(c)
			mo.Integrity = v
			closeFiles := mo.Close
			mo.Close = func() error { v.stop(); return closeFiles() }
		}
	} else {
		openCkpt := hf.Open
		if opts.Resident && opts.Device == nil {
			openCkpt = hf.OpenResident
		}
		c, err := openCkpt(dir)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		mo.Format, mo.Close, mo.ReleasePages = model.SourceHF, c.Close, c.ReleasePages
		src = &hfSource{c: c}
		if !opts.SkipFiniteScan {
			v := scanInBackground(dir, c)
			mo.Integrity = v
			closeFiles := mo.Close
			mo.Close = func() error { v.stop(); return closeFiles() }
		}
	}
	w, err := loadWeights(cfg, dir, mo.Format, src)
	if err != nil {
		mo.Close()
		return nil, err
	}
	m, err := model.New(cfg, w, mo)
	if err != nil {
		mo.Close()
		return nil, err
	}
	if opts.FakeQuant != "" {
		if err := substituteDecoded(m, opts.FakeQuant); err != nil {
			m.Close()
			return nil, err
		}
	}
	if opts.Device != nil {
		r, err := devrun.New(m, opts.Device)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.SetRunner(r)
	}
	return m, nil
}

// substituteDecoded replaces every BFP weight by its exact float32 decoding
// from the lfmq-1 checkpoint in dir (Options.FakeQuant).
func substituteDecoded(m *model.Model, dir string) error {
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
		return &model.InputError{What: "LoadOptions.FakeQuant", Msg: fmt.Sprintf("%s was quantized from a checkpoint with config sha256 %s, not from %s (config sha256 %s)", dir, c.Manifest.Source.ConfigSHA256, m.Dir, sum)}
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
func loadWeights(cfg *config.Config, dir string, format model.SourceFormat, src tensorSource) (model.Weights, error) {
	var w model.Weights
	ld := &loader{dir: dir, src: src, expected: cfg.ExpectedTensors(), used: map[string]bool{}}
	if format == model.SourceLFMQ1 {
		// lfmq-1 always stores the head: BFP8 of the tied embedding.
		ld.expected["lm_head.weight"] = config.Shape{int64(cfg.VocabSize), int64(cfg.HiddenSize)}
	}
	w.Embed = ld.matrix("model.embed_tokens.weight")
	w.FinalNorm = ld.vector("model.embedding_norm.weight")
	if _, ok := ld.expected["lm_head.weight"]; ok {
		w.Head = ld.matrix("lm_head.weight")
	} else {
		w.Head = w.Embed
	}

	an := cfg.AttnNames()
	for i := range cfg.NumLayers {
		p := config.LayerPrefix(i)
		ly := &model.Layer{Kind: cfg.LayerKinds[i], MoE: cfg.IsMoE(i)}
		w.Layers = append(w.Layers, ly)
		ly.OpNorm = ld.vector(p + "operator_norm.weight")
		ly.FFNNorm = ld.vector(p + "ffn_norm.weight")
		if cfg.PostNorms {
			ly.PostOpNorm = ld.vector(p + config.PostOperatorNorm)
			ly.PostFFNNorm = ld.vector(p + config.PostFFNNorm)
		}
		switch ly.Kind {
		case config.Conv:
			ly.InProj = ld.matrix(p + "conv.in_proj.weight")
			ly.ConvW = ld.vector(p + "conv.conv.weight") // [H, 1, K] read as [H, K]
			ly.OutProj = ld.matrix(p + "conv.out_proj.weight")
			if cfg.ConvBias {
				ly.InBias = ld.vector(p + "conv.in_proj.bias")
				ly.ConvBias = ld.vector(p + "conv.conv.bias")
				ly.OutBias = ld.vector(p + "conv.out_proj.bias")
			}
		case config.Attention:
			ly.Q = ld.matrix(p + an.Q)
			ly.K = ld.matrix(p + an.K)
			ly.V = ld.matrix(p + an.V)
			ly.O = ld.matrix(p + an.O)
			ly.QNorm = ld.vector(p + an.QNorm)
			ly.KNorm = ld.vector(p + an.KNorm)
			if cfg.AttnGate {
				ly.AttnGate = ld.matrix(p + an.Gate)
			}
		}
		if !ly.MoE {
			ly.W1 = ld.matrix(p + "feed_forward.w1.weight")
			ly.W3 = ld.matrix(p + "feed_forward.w3.weight")
			ly.W2 = ld.matrix(p + "feed_forward.w2.weight")
			continue
		}
		ly.Gate = ld.matrix(p + "feed_forward.gate.weight")
		if cfg.UseExpertBias {
			// Some exports name the bias as a parameter ("….weight").
			b := p + "feed_forward.expert_bias"
			ly.ExpertBias = ld.vector(b, b, b+".weight")
		}
		ly.Experts = make([]model.Expert, cfg.NumExperts)
		loadExperts(cfg, ld, i, ly)
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
		ld.fail(&TensorError{Dir: dir, Tensor: n, Problem: ProblemUnexpected, Got: got})
	}
	if len(ld.errs) > 0 {
		fe := &FindingsError{Findings: ld.errs}
		if note := cfg.ShapeDefaultsNote(); note != "" {
			fe.Note = fmt.Sprintf("model: %s/%s", dir, note)
		}
		return w, fe
	}
	return w, nil
}

// loadExperts loads the routed experts of MoE layer i, per-expert tensors or
// the transformers-v5 fused layout (experts.gate_up_proj [E, 2Fe, H] with
// rows 0..Fe−1 the gate w1 and Fe..2Fe−1 the up w3; experts.down_proj
// [E, H, Fe]), whose per-expert slices are contiguous row ranges and so are
// used in place like any other tensor.
func loadExperts(cfg *config.Config, ld *loader, i int, ly *model.Layer) {
	p := config.LayerPrefix(i)
	E, H, Fe := int64(cfg.NumExperts), int64(cfg.HiddenSize), int64(cfg.MoEIntermediateSize)
	fusedUp, fusedDown := p+"feed_forward.experts.gate_up_proj", p+"feed_forward.experts.down_proj"
	_, perExpert, _ := ld.src.tensor(p + "feed_forward.experts.0.w1.weight")
	_, fused, _ := ld.src.tensor(fusedUp)
	if perExpert || !fused {
		for e := range ly.Experts {
			ep := fmt.Sprintf("%sfeed_forward.experts.%d.", p, e)
			ly.Experts[e] = model.Expert{W1: ld.matrix(ep + "w1.weight"), W3: ld.matrix(ep + "w3.weight"), W2: ld.matrix(ep + "w2.weight")}
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
	for e := range ly.Experts {
		e64 := int64(e)
		ly.Experts[e] = model.Expert{
			W1: slice(up, e64, 0, Fe, H, fusedUp),
			W3: slice(up, e64, Fe, Fe, H, fusedUp),
			W2: slice(down, e64, 0, H, Fe, fusedDown),
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

package model

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
)

// SourceFormat says what kind of checkpoint a Model was loaded from.
type SourceFormat string

// The checkpoint kinds engine/model/load reads.
const (
	// SourceHF is a Hugging Face safetensors checkpoint (single or sharded).
	SourceHF SourceFormat = "hf"
	// SourceLFMQ1 is an lfmq-1 checkpoint (a directory with manifest.json).
	SourceLFMQ1 SourceFormat = "lfmq-1"
)

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
	integrity  Integrity

	embed     *kernels.Matrix // [V, H]; also the head of a tied HF checkpoint
	head      *kernels.Matrix // [V, H]
	finalNorm []float32       // model.embedding_norm: the final norm
	layers    []*Layer
	rope      *kernels.RoPE   // the model's RoPE (RoPE); LFM2's every layer's
	ropes     []*kernels.RoPE // per layer: its kind's RoPE (nil for conv layers)
	linears   map[string]**kernels.Matrix

	workspaces sync.Pool // *workspace

	run Runner // where steps run and sequences' state lives: the CPU or a device

	kvDType kv.DType // the KV cache's format (Options.KVDType)
	drafter Drafter  // SetDrafter's; nil without one
	// draftNanos is the time spent computing the drafter's context
	// (DraftContextTime).
	draftNanos atomic.Int64
	kvPool     *KVPool // NewSequence's pages: unbounded, growing on demand
}

// Layer holds one decoder layer's weights. Only the fields of its kind
// (conv or attention mixer; dense or MoE feed-forward) are set, and those
// of the features its family has: LFM3's post norms and attention output
// gate are nil for LFM2, and a nil one is skipped (docs/lfm3.md).
type Layer struct {
	Kind             config.LayerKind
	MoE              bool
	OpNorm, FFNNorm  []float32
	InProj, OutProj  *kernels.Matrix // conv
	ConvW            []float32       // conv kernel [H, K]
	InBias, ConvBias []float32       // conv biases (conv_bias only)
	OutBias          []float32
	Q, K, V, O       *kernels.Matrix // attention
	QNorm, KNorm     []float32
	W1, W2, W3       *kernels.Matrix // dense SwiGLU
	Gate             *kernels.Matrix // MoE router [E, H]
	ExpertBias       []float32       // [E] or nil
	Experts          []Expert

	// LFM3's: the norms of the operator's and the FFN's output before
	// each residual add, and the attention output gate [heads, H], whose
	// sigmoid(AttnGate·h) scales each head's output before O.
	PostOpNorm, PostFFNNorm []float32
	AttnGate                *kernels.Matrix
}

// Expert is one routed expert's SwiGLU.
type Expert struct{ W1, W3, W2 *kernels.Matrix }

// Weights is everything a Model computes with, as a loader assembles it
// from a checkpoint (engine/model/load) and a runner reads it.
type Weights struct {
	Embed     *kernels.Matrix // [V, H]
	Head      *kernels.Matrix // [V, H]; Embed itself when tied
	FinalNorm []float32       // model.embedding_norm
	Layers    []*Layer
}

// Integrity is the check of a checkpoint's files against its manifest
// that may still be running after load (engine/model/load hashes an
// lfmq-1 checkpoint in the background).
type Integrity interface {
	// Done is closed once the check has ended.
	Done() <-chan struct{}
	// Err is what the check found, once Done is closed: nil when every
	// file matches.
	Err() error
}

// Options is what New needs besides the config and the weights.
type Options struct {
	Dir            string
	Format         SourceFormat
	ManifestSHA256 string
	// MaxContext is the longest sequence the model accepts, already
	// checked against the config.
	MaxContext int
	// KVDType is the number format of every sequence's KV cache.
	KVDType kv.DType
	// Threads and Pool are load.Options' Threads and Pool.
	Threads int
	Pool    *kernels.Pool
	// Close releases the checkpoint (Model.Close); ReleasePages drops its
	// mapped pages (Model.ReleasePages). Either may be nil.
	Close, ReleasePages func() error
	// Integrity is the checkpoint's file check; nil means verified.
	Integrity Integrity
}

// New returns a model of cfg computing with w, on the CPU until SetRunner.
// Its linear weights are registered under their Hugging Face names for
// ReplaceLinear.
func New(cfg *config.Config, w Weights, o Options) (*Model, error) {
	ropes, err := layerRoPEs(cfg, min(o.MaxContext, ropeTablePositions))
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	rope := ropes[len(ropes)-1] // one RoPE for every layer of LFM2: the model's
	m := &Model{
		Config: cfg, Dir: o.Dir, Format: o.Format, ManifestSHA256: o.ManifestSHA256,
		maxContext: o.MaxContext, closeFn: o.Close, releaseFn: o.ReleasePages, integrity: o.Integrity,
		embed: w.Embed, head: w.Head, finalNorm: w.FinalNorm, layers: w.Layers, rope: rope, ropes: ropes[:len(ropes)-1],
		linears: map[string]**kernels.Matrix{}, kvDType: o.KVDType,
	}
	if m.integrity == nil {
		m.integrity = verifiedIntegrity{}
	}
	m.kvPool = m.NewKVPool(0)
	m.registerLinears()
	m.run = cpuRunner{m}
	m.pool = o.Pool
	if m.pool == nil {
		m.pool, m.ownPool = kernels.NewPool(o.Threads), true
	}
	return m, nil
}

// layerRoPEs returns each layer's RoPE (nil for a conv layer), tables of
// maxPos positions, one per distinct parameter set, and after them the
// model's own: the full-attention layers' (config.Config.RopeTheta's θ,
// their rotation).
func layerRoPEs(cfg *config.Config, maxPos int) ([]*kernels.RoPE, error) {
	made := map[config.RoPEParams]*kernels.RoPE{}
	get := func(p config.RoPEParams) (*kernels.RoPE, error) {
		if r, ok := made[p]; ok {
			return r, nil
		}
		r, err := kernels.NewPartialRoPE(cfg.HeadDim, p.Theta, p.RotatedPairs(cfg.HeadDim), maxPos)
		made[p] = r
		return r, err
	}
	out := make([]*kernels.RoPE, cfg.NumLayers+1)
	for i, k := range cfg.LayerKinds {
		if k != config.Attention {
			continue
		}
		r, err := get(cfg.LayerRoPE(i))
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	own := config.RoPEParams{Theta: cfg.RopeTheta, PartialRotaryFactor: 1}
	if cfg.ModelType == config.ModelTypeLFM3 {
		own = cfg.RoPEFull
		if own.Theta == 0 {
			own = config.RoPEParams{Theta: cfg.RopeTheta, PartialRotaryFactor: 1}
		}
	}
	r, err := get(own)
	if err != nil {
		return nil, err
	}
	out[cfg.NumLayers] = r
	return out, nil
}

// LayerRoPE returns the RoPE of attention layer l: for LFM3 its attention
// kind's (docs/lfm3.md), for LFM2 the model's. A device runner uploads its
// tables (kernels.RoPE.Table) rather than computing its own.
func (m *Model) LayerRoPE(l int) *kernels.RoPE { return m.layerRoPE(l) }

// layerRoPE returns the RoPE of attention layer l.
func (m *Model) layerRoPE(l int) *kernels.RoPE {
	if l < len(m.ropes) && m.ropes[l] != nil {
		return m.ropes[l]
	}
	return m.rope
}

// registerLinears records where each linear weight lives, by its Hugging
// Face name.
func (m *Model) registerLinears() {
	reg := func(name string, slot **kernels.Matrix) {
		if *slot != nil {
			m.linears[name] = slot
		}
	}
	reg("lm_head.weight", &m.head)
	an := m.Config.AttnNames()
	for i, ly := range m.layers {
		p := config.LayerPrefix(i)
		switch ly.Kind {
		case config.Conv:
			reg(p+"conv.in_proj.weight", &ly.InProj)
			reg(p+"conv.out_proj.weight", &ly.OutProj)
		case config.Attention:
			reg(p+an.Q, &ly.Q)
			reg(p+an.K, &ly.K)
			reg(p+an.V, &ly.V)
			reg(p+an.O, &ly.O)
			if an.Gate != "" {
				reg(p+an.Gate, &ly.AttnGate)
			}
		}
		if !ly.MoE {
			reg(p+"feed_forward.w1.weight", &ly.W1)
			reg(p+"feed_forward.w3.weight", &ly.W3)
			reg(p+"feed_forward.w2.weight", &ly.W2)
			continue
		}
		reg(p+"feed_forward.gate.weight", &ly.Gate)
		for e := range ly.Experts {
			ep := fmt.Sprintf("%sfeed_forward.experts.%d.", p, e)
			reg(ep+"w1.weight", &ly.Experts[e].W1)
			reg(ep+"w3.weight", &ly.Experts[e].W3)
			reg(ep+"w2.weight", &ly.Experts[e].W2)
		}
	}
}

// verifiedIntegrity is the Integrity of a checkpoint with nothing left to
// check.
type verifiedIntegrity struct{}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (verifiedIntegrity) Done() <-chan struct{} { return closedChan }
func (verifiedIntegrity) Err() error            { return nil }

// Weights returns the weights the model computes with (a runner uploads
// them); the matrices are the model's own, not copies.
func (m *Model) Weights() Weights {
	return Weights{Embed: m.embed, Head: m.head, FinalNorm: m.finalNorm, Layers: m.layers}
}

// RoPE returns the model's rotary embedding: every attention layer's for
// LFM2, the full-attention layers' for LFM3 (whose sliding layers have
// their own; the device runner, which uploads this one, refuses LFM3).
func (m *Model) RoPE() *kernels.RoPE { return m.rope }

// SetRunner moves the model's steps and new sequences' state to r (a
// device runner, engine/model/devrun). A loader calls it once, before any
// sequence is made: sequences stay with the runner that made them.
func (m *Model) SetRunner(r Runner) { m.run = r }

// DeviceInfo describes the device the model runs on; ok is false for the
// CPU engine.
func (m *Model) DeviceInfo() (info device.Info, ok bool) { return m.run.DeviceInfo() }

// Close releases the runner, the checkpoint mappings and the Pool, if the
// Model made it. The Model and its weights must not be used afterwards.
func (m *Model) Close() error {
	m.run.Close()
	m.run = cpuRunner{m}
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
	for _, b := range m.DecodeWeightBytesByFormat() {
		n += b
	}
	return n
}

// DecodeMACs returns the multiply-adds of the products of one decode step
// of one token (the matrices DecodeWeightBytes counts), by the weights'
// stored format: what a step asks of the product kernels, beside the
// bytes it asks of memory. Attention's dot products, which depend on the
// context, are not included.
func (m *Model) DecodeMACs() map[kernels.Format]int64 {
	macs := map[kernels.Format]int64{}
	m.decodeMatrices(func(w *kernels.Matrix) { macs[w.Format] += int64(w.Out) * int64(w.In) })
	return macs
}

// DecodeWeightBytesByFormat is DecodeWeightBytes by the weights' stored
// format: with DecodeMACs, each format's products' own bytes and
// multiply-adds, which bound their time apart from the other formats'.
func (m *Model) DecodeWeightBytesByFormat() map[kernels.Format]int64 {
	bytes := map[kernels.Format]int64{}
	m.decodeMatrices(func(w *kernels.Matrix) { bytes[w.Format] += int64(w.WeightBytes()) })
	return bytes
}

// decodeMatrices calls visit with every linear weight one decode step of
// one token multiplies: the head, each layer's mixer, dense FFN and router
// weights, and in each MoE layer num_experts_per_tok experts' w1, w3 and
// w2 (the largest, which for real checkpoints are all the same size).
func (m *Model) decodeMatrices(visit func(*kernels.Matrix)) {
	add := func(ms ...*kernels.Matrix) {
		for _, w := range ms {
			if w != nil {
				visit(w)
			}
		}
	}
	add(m.head)
	k := m.Config.NumExpertsPerTok
	for _, ly := range m.layers {
		add(ly.InProj, ly.OutProj, ly.Q, ly.K, ly.V, ly.O, ly.AttnGate, ly.W1, ly.W2, ly.W3, ly.Gate)
		size := func(e *Expert) int { return e.W1.WeightBytes() + e.W3.WeightBytes() + e.W2.WeightBytes() }
		order := make([]*Expert, len(ly.Experts))
		for i := range order {
			order[i] = &ly.Experts[i]
		}
		sort.SliceStable(order, func(i, j int) bool { return size(order[i]) > size(order[j]) })
		for _, e := range order[:min(k, len(order))] {
			add(e.W1, e.W3, e.W2)
		}
	}
}

// ReplaceLinear substitutes the weight of the linear layer called name (its
// Hugging Face name, such as "model.layers.3.feed_forward.experts.5.w1.weight",
// or "lm_head.weight" for the head) by w, which must have the same logical
// shape. Calibration uses it to run layers with their quantized experts;
// replacing the head of a tied checkpoint leaves the embedding unchanged.
func (m *Model) ReplaceLinear(name string, w *kernels.Matrix) error {
	if err := m.run.ReplaceLinear(); err != nil {
		return err
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

// Verified waits until the checkpoint's background check has ended (or
// ctx ends) and returns what it found: for an lfmq-1 checkpoint the hash
// of its files (nil when every file matches the manifest, the joined
// *lfmq1.MismatchError findings otherwise), for a Hugging Face checkpoint
// the scan of its weights for NaN and infinity (engine/model/load's
// *NonFiniteError). It returns nil at once for a checkpoint checked when
// loaded.
func (m *Model) Verified(ctx context.Context) error {
	select {
	case <-m.integrity.Done():
		return m.integrity.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// VerifyDone returns a channel closed once Verified would not block.
func (m *Model) VerifyDone() <-chan struct{} { return m.integrity.Done() }

// integrityFailed returns the mismatch found so far, without waiting.
func (m *Model) integrityFailed() error {
	select {
	case <-m.integrity.Done():
		return m.integrity.Err()
	default:
		return nil
	}
}

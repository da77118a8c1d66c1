package hessian

import (
	"context"
	"fmt"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
)

// Cache holds what one MoE layer's calibration forward yields: for every
// calibration token the input of the layer's routed experts (the
// ffn_norm output z, which is also the router's input) and the router's
// decision. A dense FFN layer's Cache is that of a layer with one expert
// (0) that every token is routed to with weight 1: its statistics are
// then the plain Hessian of the FFN input over the calibration tokens.
// Holding z rather than each expert's rows keeps it at one copy per
// token, and lets the w2 statistics be computed from it once w1/w3 are
// quantized, without running the layers below again (docs/gptq.md §3).
type Cache struct {
	Layer  int
	Hidden int
	TopK   int
	Tokens int
	// Z is [Tokens, Hidden]; token t is position p of window w at
	// t = Σ_{v<w} len(window v) + p.
	Z []float32
	// Experts and Weights are [Tokens, TopK]: the selected experts of each
	// token and their router weights g (renormalised and scaled, without
	// the selection bias), as engine/model's Routing gives them.
	Experts []int32
	Weights []float32
}

// CollectOptions configures Collect.
type CollectOptions struct {
	// Batch is the number of windows per Forward call (0: 8). Results do
	// not depend on it: the engine's outputs are batch invariant.
	Batch int
	// Progress, if set, is called after each Forward call with the windows
	// done and the total.
	Progress func(done, total int)
	// Stream, if set, is the windows' residual stream at the input of
	// decoder layer Stream.Layer ≤ layer: Collect runs only layers
	// [Stream.Layer, layer] from it, and on success leaves in it the stream
	// at the input of layer (Past false) or of layer+1 (Past true, which
	// keeps the output of layer as it ran for the statistics). Calibrating
	// the MoE layers in ascending order through one Stream runs each layer
	// for the calibration tokens once (twice for a layer whose experts
	// change after its statistics) instead of once per MoE layer above it.
	Stream *Stream
	// Past selects the stream Collect leaves in Stream (see Stream).
	Past bool
	// Threads is the number of goroutines CollectLinear's statistics may
	// use to add rows (Stat.SetThreads; 0: one). It changes no bit.
	Threads int
}

// Stream is the residual stream of every calibration window at the input
// of decoder layer Layer: float32 [Tokens, hidden_size], tokens numbered
// as in Cache. The zero value is the stream at layer 0, which the engine
// forms from the embedding. It is large for real models (128 windows of
// 512 tokens at hidden size 2048 take 128·512·2048·4 B = 512 MB), and
// Collect holds two while it advances one (the old one is read while the
// new one is written).
type Stream struct {
	Layer int
	H     []float32
}

// Collect runs the windows through the first layer+1 decoder layers of m
// (no logits) and returns layer's Cache (for a dense FFN layer, with every
// token routed to expert 0 with weight 1). m runs with whatever weights it
// holds: in sequential calibration the caller has already replaced the
// lower layers' experts by their quantized versions.
func Collect(ctx context.Context, m *model.Model, layer int, windows [][]int, opts CollectOptions) (*Cache, error) {
	cfg := m.Config
	if layer < 0 || layer >= cfg.NumLayers {
		return nil, &InputError{What: "Collect", Msg: fmt.Sprintf("layer %d is outside [0, %d)", layer, cfg.NumLayers)}
	}
	total, base, err := windowBases("Collect", windows)
	if err != nil {
		return nil, err
	}
	H, K := cfg.HiddenSize, cfg.NumExpertsPerTok
	input := config.LayerPrefix(layer) + "feed_forward.gate.weight"
	if !cfg.IsMoE(layer) {
		K, input = 1, config.LayerPrefix(layer)+"feed_forward.w1.weight"
	}
	c := &Cache{
		Layer: layer, Hidden: H, TopK: K, Tokens: total,
		Z: make([]float32, total*H), Experts: make([]int32, total*K), Weights: make([]float32, total*K),
	}
	obs := &collector{layer: layer, gate: input, dense: !cfg.IsMoE(layer), c: c,
		seenZ: make([]bool, total), seenR: make([]bool, total)}
	start := 0
	if st := opts.Stream; st != nil {
		start = st.Layer
		if start < 0 || start > layer || (start > 0 && len(st.H) != total*H) {
			return nil, &InputError{What: "Collect", Msg: fmt.Sprintf("stream at layer %d with %d floats for layer %d and %d tokens", start, len(st.H), layer, total)}
		}
		// The stream kept is the input of layer (index layer) or its
		// output (index layer+1) in the Observer's Hidden numbering.
		obs.keep, obs.out = layer, make([]float32, total*H)
		if opts.Past {
			obs.keep = layer + 1
		}
		obs.seenH = make([]bool, total)
	}
	if err := forwardWindows(ctx, m, windows, base, layer+1, start, CollectPart(opts), opts, obs, func(b []int) { obs.base = b }, func() error { return obs.err }); err != nil {
		return nil, err
	}
	for t := range total {
		if !obs.seenZ[t] || !obs.seenR[t] || (obs.seenH != nil && !obs.seenH[t]) {
			return nil, &InputError{What: "Collect", Msg: fmt.Sprintf("the engine reported no expert input, routing or residual stream for token %d of layer %d", t, layer)}
		}
	}
	if st := opts.Stream; st != nil {
		st.Layer, st.H = obs.keep, obs.out
	}
	return c, nil
}

// CollectPart is how much of the calibrated layer Collect's forward runs:
// only as far as its FFN input and routing, which are all it reads, unless
// the layer's output is the stream it keeps (Past): its experts (or dense
// FFN) then need not run.
func CollectPart(opts CollectOptions) model.LayerPart {
	if opts.Stream != nil && opts.Past {
		return model.WholeLayer
	}
	return model.FFNInput
}

// windowBases numbers the windows' tokens: window i holds tokens
// [base[i], base[i+1]) of total.
func windowBases(what string, windows [][]int) (total int, base []int, err error) {
	base = make([]int, len(windows)+1)
	for i, w := range windows {
		if len(w) == 0 {
			return 0, nil, &InputError{What: what, Msg: fmt.Sprintf("window %d is empty", i)}
		}
		total += len(w)
		base[i+1] = total
	}
	return total, base, nil
}

// forwardWindows runs the windows through layers [start, layers) of m in
// batches of opts.Batch (from the stream when start > 0), the last of them
// as far as last (model.ForwardOptions.LastLayer), telling the observer
// each batch's token bases (setBase) and stopping at its first error
// (obsErr).
func forwardWindows(ctx context.Context, m *model.Model, windows [][]int, base []int, layers, start int, last model.LayerPart, opts CollectOptions, obs model.Observer, setBase func([]int), obsErr func() error) error {
	H := m.Config.HiddenSize
	batch := opts.Batch
	if batch <= 0 {
		batch = 8
	}
	for w0 := 0; w0 < len(windows); w0 += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		w1 := min(w0+batch, len(windows))
		seqs := make([]*model.Sequence, w1-w0)
		for i := range seqs {
			seqs[i] = m.NewSequence()
		}
		setBase(base[w0:w1])
		fo := model.ForwardOptions{Logits: model.NoLogits, Layers: layers, Observer: obs, LastLayer: last}
		if start > 0 {
			fo.StartLayer = start
			fo.Hidden = make([][]float32, w1-w0)
			for i := range fo.Hidden {
				fo.Hidden[i] = opts.Stream.H[base[w0+i]*H : base[w0+i+1]*H]
			}
		}
		if _, err := m.Forward(ctx, seqs, windows[w0:w1], fo); err != nil {
			return fmt.Errorf("hessian: calibration forward of windows %d–%d: %w", w0, w1-1, err)
		}
		if err := obsErr(); err != nil {
			return err
		}
		if opts.Progress != nil {
			opts.Progress(w1, len(windows))
		}
	}
	return nil
}

// collector copies layer's router input and routing into the Cache.
type collector struct {
	model.BaseObserver
	layer int
	// gate is the linear weight whose input is the FFN input: the router,
	// or a dense layer's w1.
	gate string
	// dense routes every token to expert 0 with weight 1.
	dense        bool
	c            *Cache
	base         []int // token index of position 0 of each sequence of the call
	seenZ, seenR []bool
	err          error
	// keep is the Hidden index copied into out when out is set (Stream).
	keep  int
	out   []float32
	seenH []bool
}

// Hidden keeps the residual stream that Collect leaves in its Stream.
func (o *collector) Hidden(index int, rows model.Rows, h []float32) {
	if o.out == nil || index != o.keep {
		return
	}
	H := o.c.Hidden
	for r := range rows.Len() {
		if t, ok := o.token(rows, r); ok {
			copy(o.out[t*H:(t+1)*H], h[r*H:(r+1)*H])
			o.seenH[t] = true
		}
	}
}

func (o *collector) token(rows model.Rows, r int) (int, bool) {
	s, p := rows.Seq[r], rows.Pos[r]
	if s < 0 || s >= len(o.base) || p < 0 || o.base[s]+p >= o.c.Tokens {
		if o.err == nil {
			o.err = &InputError{What: "Collect", Msg: fmt.Sprintf("engine row (sequence %d, position %d) outside the calibration windows", s, p)}
		}
		return 0, false
	}
	return o.base[s] + p, true
}

// Linear keeps the router input of the calibrated layer: the ffn_norm
// output that every routed expert's w1 and w3 read (a dense layer's w1
// input, which is also its routing: all to the one FFN).
func (o *collector) Linear(layer int, name string, rows model.Rows, x []float32) {
	if layer != o.layer || name != o.gate {
		return
	}
	H := o.c.Hidden
	for r := range rows.Len() {
		if t, ok := o.token(rows, r); ok {
			copy(o.c.Z[t*H:(t+1)*H], x[r*H:(r+1)*H])
			o.seenZ[t] = true
			if o.dense {
				o.c.Experts[t], o.c.Weights[t] = 0, 1
				o.seenR[t] = true
			}
		}
	}
}

// Routing keeps the calibrated layer's expert selection and weights.
func (o *collector) Routing(layer int, rows model.Rows, rt *model.Routing) {
	if layer != o.layer {
		return
	}
	K := o.c.TopK
	if rt.K != K {
		if o.err == nil {
			o.err = &InputError{What: "Collect", Msg: fmt.Sprintf("engine routed %d experts per token, the config says %d", rt.K, K)}
		}
		return
	}
	for r := range rows.Len() {
		if t, ok := o.token(rows, r); ok {
			for i := range K {
				o.c.Experts[t*K+i] = int32(rt.Experts[r*K+i])
				o.c.Weights[t*K+i] = rt.Weights[r*K+i]
			}
			o.seenR[t] = true
		}
	}
}

// Routed lists, for each expert, the tokens routed to it in ascending order
// and their router weights.
type Routed struct {
	Tokens  [][]int32
	Weights [][]float32
}

// Route groups the cache's selections by expert.
func (c *Cache) Route(numExperts int) (*Routed, error) {
	rt := &Routed{Tokens: make([][]int32, numExperts), Weights: make([][]float32, numExperts)}
	for t := range c.Tokens {
		for i := range c.TopK {
			e := int(c.Experts[t*c.TopK+i])
			if e < 0 || e >= numExperts {
				return nil, &InputError{What: "Route", Msg: fmt.Sprintf("token %d selected expert %d of %d", t, e, numExperts)}
			}
			rt.Tokens[e] = append(rt.Tokens[e], int32(t))
			rt.Weights[e] = append(rt.Weights[e], c.Weights[t*c.TopK+i])
		}
	}
	return rt, nil
}

// Weighting is how a routed token's router weight g becomes its Hessian
// weight ω (docs/gptq.md §3).
type Weighting string

const (
	// WeightG weights each routed token by g (the default for every matrix).
	WeightG Weighting = "g"
	// WeightG2 weights by g², the exact output MSE of w2 (an ablation).
	WeightG2 Weighting = "g2"
)

func (w Weighting) omega(g float32) float64 {
	if w == WeightG2 {
		return float64(g) * float64(g)
	}
	return float64(g)
}

// Valid reports whether w is a known weighting.
func (w Weighting) Valid() bool { return w == WeightG || w == WeightG2 }

// UpStats accumulates, for every expert, the statistics of the w1/w3 input:
// the z of the tokens routed to it, each weighted by its g. Experts run in
// parallel on up to workers goroutines (0: one); each expert's sums are
// formed on one goroutine in token order, so the result is the same for
// any workers. done, if set, is called (from the expert's goroutine) as
// each expert's statistics are complete.
func UpStats(ctx context.Context, c *Cache, rt *Routed, workers int, done func(expert int)) ([]*Stat, error) {
	return forExperts(ctx, len(rt.Tokens), workers, done, func(e int) (*Stat, error) {
		st := NewStat(c.Hidden)
		for i, t := range rt.Tokens[e] {
			if i%statCheckTokens == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			if err := st.Add(c.Z[int(t)*c.Hidden:][:c.Hidden], WeightG.omega(rt.Weights[e][i])); err != nil {
				return nil, err
			}
		}
		return st, st.Finish()
	})
}

// Expert is the pair of matrices that produce an expert's w2 input.
type Expert struct {
	W1, W3 *kernels.Matrix
}

// statCheckTokens is how many tokens an expert's statistics take between
// looks at the context: at LFM2-8B-A1B's width 64 rank-one updates are a
// few milliseconds, so a stop is seen at once and the look costs nothing.
const statCheckTokens = 64

// downBatch is the number of tokens whose w2 inputs are computed per
// product; it bounds memory and, by the kernels' batch invariance, changes
// no bit.
const downBatch = 128

// DownStats accumulates, for every expert, the statistics of the w2 input
// silu(w1·z) ⊙ (w3·z) of its routed tokens, computed with the kernels and
// the matrices the engine uses (experts[e], e.g. the quantized w1/w3), so
// the values are bit-identical to what the engine's forward would produce.
// Each token is weighted by g or g² (weighting). done is as for UpStats.
func DownStats(ctx context.Context, c *Cache, rt *Routed, experts []Expert, weighting Weighting, workers int, done func(expert int)) ([]*Stat, error) {
	if len(experts) != len(rt.Tokens) {
		return nil, &InputError{What: "DownStats", Msg: fmt.Sprintf("%d experts' matrices for %d experts", len(experts), len(rt.Tokens))}
	}
	if !weighting.Valid() {
		return nil, &InputError{What: "DownStats", Msg: fmt.Sprintf("unknown weighting %q", weighting)}
	}
	H := c.Hidden
	return forExperts(ctx, len(rt.Tokens), workers, done, func(e int) (*Stat, error) {
		ex := experts[e]
		if ex.W1 == nil || ex.W3 == nil || ex.W1.In != H || ex.W3.In != H || ex.W1.Out != ex.W3.Out {
			return nil, &InputError{What: "DownStats", Msg: fmt.Sprintf("expert %d: w1/w3 missing or misshapen", e)}
		}
		fe := ex.W1.Out
		st := NewStat(fe)
		toks := rt.Tokens[e]
		x := make([]float32, downBatch*H)
		g := make([]float32, downBatch*fe)
		u := make([]float32, downBatch*fe)
		for t0 := 0; t0 < len(toks); t0 += downBatch {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			n := min(downBatch, len(toks)-t0)
			for i, t := range toks[t0 : t0+n] {
				copy(x[i*H:(i+1)*H], c.Z[int(t)*H:][:H])
			}
			ex.W1.MatMul(g[:n*fe], x[:n*H], n)
			ex.W3.MatMul(u[:n*fe], x[:n*H], n)
			kernels.SwiGLU(g[:n*fe], g[:n*fe], u[:n*fe])
			for i := range n {
				if err := st.Add(g[i*fe:(i+1)*fe], weighting.omega(rt.Weights[e][t0+i])); err != nil {
					return nil, err
				}
			}
		}
		return st, st.Finish()
	})
}

// ExpertError says which expert's statistics failed.
type ExpertError struct {
	Expert int
	Err    error
}

func (e *ExpertError) Error() string { return fmt.Sprintf("hessian: expert %d: %v", e.Expert, e.Err) }

func (e *ExpertError) Unwrap() error { return e.Err }

// forExperts runs fn for experts 0..n−1 on up to workers goroutines,
// placing each result in its own slot and telling done, if set.
func forExperts(ctx context.Context, n, workers int, done func(e int), fn func(e int) (*Stat, error)) ([]*Stat, error) {
	out := make([]*Stat, n)
	p := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(max(1, workers))
	for e := range n {
		p.Go(func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			st, err := fn(e)
			if err != nil {
				return &ExpertError{Expert: e, Err: err}
			}
			out[e] = st
			if done != nil {
				done(e)
			}
			return nil
		})
	}
	if err := p.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

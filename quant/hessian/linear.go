package hessian

import (
	"context"
	"fmt"
	"strings"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
)

// LinearInputs are the statistics CollectLinear gathers: one Stat per
// distinct input of the named non-expert linear weights, every calibration
// token weighted 1. Names that read the same input (q/k/v, a dense FFN's
// w1/w3) share one Stat.
type LinearInputs struct {
	Stats map[string]*Stat
}

// sharedInput names, for a weight that reads the same input as another one
// the engine reports first, that other weight's name suffix.
var sharedInput = map[string]string{
	"self_attn.k_proj.weight": "self_attn.q_proj.weight",
	"self_attn.v_proj.weight": "self_attn.q_proj.weight",
	"feed_forward.w3.weight":  "feed_forward.w1.weight",
}

// CollectLinear runs the windows through m up to decoder layer layer (or
// through every layer and the final norm for layer = NumLayers, the head's
// input) and accumulates the input statistics of the named linear weights
// of that layer ("lm_head.weight" for the head). Rows are added in the order
// the engine reports them, which depends on the windows and Batch only, so
// the statistics are the same for any thread count. With opts.Stream set it
// starts from the stream and leaves there the stream at the input of layer
// (the weights of layer may change after this call). Memory: the Stats
// (k² float64 each) and, with a Stream, a second stream.
func CollectLinear(ctx context.Context, m *model.Model, layer int, names []string, windows [][]int, opts CollectOptions) (*LinearInputs, error) {
	cfg := m.Config
	if layer < 0 || layer > cfg.NumLayers {
		return nil, &InputError{What: "CollectLinear", Msg: fmt.Sprintf("layer %d is outside [0, %d]", layer, cfg.NumLayers)}
	}
	total, base, err := windowBases("CollectLinear", windows)
	if err != nil {
		return nil, err
	}
	H := cfg.HiddenSize
	obs := &linearCollector{layer: layer, want: map[string]bool{}, in: &LinearInputs{Stats: map[string]*Stat{}}, tokens: total, threads: opts.Threads}
	if layer == cfg.NumLayers {
		obs.layer = -1
	}
	for _, n := range names {
		obs.want[n] = true
	}
	start := 0
	if st := opts.Stream; st != nil {
		start = st.Layer
		if start < 0 || start > layer || (start > 0 && len(st.H) != total*H) {
			return nil, &InputError{What: "CollectLinear", Msg: fmt.Sprintf("stream at layer %d with %d floats for layer %d and %d tokens", start, len(st.H), layer, total)}
		}
	}
	runs := true
	switch {
	case obs.layer < 0 && start == layer:
		// The stream is already past the last layer: the head's input is
		// its final norm, no layer runs.
		obs.out, obs.seenH, runs = opts.Stream.H, make([]bool, total), false
		for t := range obs.seenH {
			obs.seenH[t] = true
		}
	case (opts.Stream != nil && start < layer) || obs.layer < 0:
		obs.keep, obs.out, obs.seenH = layer, make([]float32, total*H), make([]bool, total)
	}
	if runs {
		if err := forwardWindows(ctx, m, windows, base, min(layer+1, cfg.NumLayers), start, LinearPart(cfg, layer, names), opts, obs, func(b []int) { obs.base = b }, func() error { return obs.err }); err != nil {
			return nil, err
		}
	}
	if obs.layer < 0 {
		// The head's input is the final norm of the last layer's stream:
		// formed here with the engine's kernel and weight (bit for bit the
		// rows the head reads) rather than by a forward with logits, which
		// would multiply every calibration token by the largest matrix.
		if err := obs.headStats(m, names); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		st := obs.in.Stats[n]
		if st == nil || st.Tokens() != total {
			return nil, &InputError{What: "CollectLinear", Msg: fmt.Sprintf("the engine reported the input of %s for %d of %d tokens", n, tokensOf(st), total)}
		}
	}
	for n, st := range obs.in.Stats {
		if obs.owner(n) != n {
			continue // shared: finished once, under its owner's name
		}
		if err := st.Finish(); err != nil {
			return nil, &LinearError{Name: n, Err: err}
		}
	}
	if runs && obs.out != nil && opts.Stream != nil {
		for t := range total {
			if !obs.seenH[t] {
				return nil, &InputError{What: "CollectLinear", Msg: fmt.Sprintf("the engine reported no residual stream for token %d at layer %d", t, layer)}
			}
		}
		opts.Stream.Layer, opts.Stream.H = obs.keep, obs.out
	}
	return obs.in, nil
}

// headStats adds every token's final-normed stream, in token order, to
// the head's Stat.
func (o *linearCollector) headStats(m *model.Model, names []string) error {
	H := m.Config.HiddenSize
	norm := m.FinalNorm()
	if len(norm) != H || o.out == nil {
		return &InputError{What: "CollectLinear", Msg: "the head's input needs the final norm and the last layer's stream"}
	}
	st := NewStat(H)
	st.SetThreads(o.threads)
	x := make([]float32, H)
	for t := range o.tokens {
		if !o.seenH[t] {
			return &InputError{What: "CollectLinear", Msg: fmt.Sprintf("the engine reported no residual stream for token %d after the last layer", t)}
		}
		kernels.RMSNorm(x, o.out[t*H:(t+1)*H], norm, m.Config.NormEps)
		if err := st.Add(x, 1); err != nil {
			return &LinearError{Name: "lm_head.weight", Err: err}
		}
	}
	for _, n := range names {
		if n == "lm_head.weight" {
			o.in.Stats[n] = st
		}
	}
	return nil
}

func tokensOf(st *Stat) int {
	if st == nil {
		return 0
	}
	return st.Tokens()
}

// LinearError says which weight's input statistics failed.
type LinearError struct {
	Name string
	Err  error
}

func (e *LinearError) Error() string { return fmt.Sprintf("hessian: input of %s: %v", e.Name, e.Err) }

func (e *LinearError) Unwrap() error { return e.Err }

// linearCollector adds the wanted weights' inputs to their Stats.
type linearCollector struct {
	model.BaseObserver
	layer  int
	want   map[string]bool
	in     *LinearInputs
	tokens int
	base   []int
	err    error
	keep   int
	out    []float32
	seenH  []bool
	// threads is each Stat's SetThreads.
	threads int
}

// LinearPart is how far into its last layer CollectLinear's forward for
// layer and names runs: for a decoder layer, up to its last wanted input
// (its mixer's alone, or every non-expert one; the layer's output is not
// kept, the stream stays at its input); for the head (layer = NumLayers),
// through the whole last layer, whose output is the head's input.
func LinearPart(cfg *config.Config, layer int, names []string) model.LayerPart {
	if layer >= cfg.NumLayers {
		return model.WholeLayer
	}
	ffn := config.LayerPrefix(layer) + "feed_forward."
	for _, n := range names {
		if strings.HasPrefix(n, ffn) {
			return model.LinearInputs
		}
	}
	return model.MixerInputs
}

// owner is the name whose Stat name's input is added to.
func (o *linearCollector) owner(name string) string {
	for suffix, first := range sharedInput {
		if p, ok := cutSuffix(name, suffix); ok && o.want[p+first] {
			return p + first
		}
	}
	return name
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return "", false
}

func (o *linearCollector) Hidden(index int, rows model.Rows, h []float32) {
	if o.out == nil || index != o.keep {
		return
	}
	H := len(h) / max(rows.Len(), 1)
	for r := range rows.Len() {
		s, p := rows.Seq[r], rows.Pos[r]
		if s < 0 || s >= len(o.base) || p < 0 || o.base[s]+p >= o.tokens {
			o.fail(s, p)
			return
		}
		t := o.base[s] + p
		copy(o.out[t*H:(t+1)*H], h[r*H:(r+1)*H])
		o.seenH[t] = true
	}
}

func (o *linearCollector) fail(s, p int) {
	if o.err == nil {
		o.err = &InputError{What: "CollectLinear", Msg: fmt.Sprintf("engine row (sequence %d, position %d) outside the calibration windows", s, p)}
	}
}

func (o *linearCollector) Linear(layer int, name string, rows model.Rows, x []float32) {
	if layer != o.layer || !o.want[name] || o.err != nil {
		return
	}
	own := o.owner(name)
	st := o.in.Stats[own]
	if st == nil {
		st = NewStat(len(x) / max(rows.Len(), 1))
		st.SetThreads(o.threads)
		o.in.Stats[own] = st
	}
	if own != name {
		// The owner's call added these rows already (the engine reports a
		// shared input once per name, the owner first).
		o.in.Stats[name] = st
		return
	}
	k := st.K()
	for r := range rows.Len() {
		if err := st.Add(x[r*k:(r+1)*k], 1); err != nil {
			o.err = &LinearError{Name: name, Err: err}
			return
		}
	}
}

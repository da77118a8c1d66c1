package inspect

import (
	"sort"
	"strconv"
	"strings"
)

// The token mixers a decoder layer can have (Layer.Kind, LayerSpec.Kind).
const (
	MixerConv      = "conv"
	MixerAttention = "attention"
	// MixerUnknown is a layer whose tensors name neither mixer, or both.
	MixerUnknown = "unknown"
)

// Where Report.Layers' kinds come from.
const (
	LayersFromConfig = "config.json"
	LayersFromNames  = "tensor names"
)

// LayerSpec is what a model's config says about one decoder layer.
type LayerSpec struct {
	// Kind is MixerConv or MixerAttention.
	Kind string
	// MoE reports whether the feed-forward block is routed experts rather
	// than one dense SwiGLU.
	MoE bool
}

// Layer summarises the tensors of one decoder layer.
type Layer struct {
	Index int `json:"index"`
	// Kind is the token mixer: MixerConv, MixerAttention or MixerUnknown.
	Kind string `json:"kind"`
	MoE  bool   `json:"moe"`
	// Experts counts the distinct expert indices among the layer's tensor
	// names: what the checkpoint holds, whatever config.json promises.
	Experts int   `json:"experts"`
	Tensors int   `json:"tensors"`
	Params  int64 `json:"params"`
	Bytes   int64 `json:"bytes"`
	// Formats sums the layer's tensors per format, sorted by format name.
	Formats []Total `json:"formats"`
}

const layersPrefix = "model.layers."

// layerOf splits "model.layers.N.rest" into N and rest.
func layerOf(name string) (int, string, bool) {
	return indexAfter(name, layersPrefix)
}

// expertOf returns E for a layer-relative name "feed_forward.experts.E.…".
func expertOf(rest string) (int, bool) {
	e, _, ok := indexAfter(rest, "feed_forward.experts.")
	return e, ok
}

// indexAfter parses "<prefix><decimal>.<rest>". Indices too large for an
// int do not parse: such a name is treated as a global tensor rather than
// as a layer to allocate for.
func indexAfter(name, prefix string) (int, string, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, "", false
	}
	digits, rest, ok := strings.Cut(s, ".")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, "", false
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, "", false
	}
	return n, rest, true
}

// layers groups rows by decoder layer. specs are used for the kinds and the
// dense/MoE split when they describe exactly the layers the names show
// (0 … max index); otherwise the names decide.
func layers(rows []Row, specs []LayerSpec) ([]Layer, string) {
	type acc struct {
		rows    []Row
		rests   []string
		experts map[int]bool
	}
	byIndex := map[int]*acc{}
	maxIndex := -1
	for _, row := range rows {
		i, rest, ok := layerOf(row.Name)
		if !ok {
			continue
		}
		a := byIndex[i]
		if a == nil {
			a = &acc{experts: map[int]bool{}}
			byIndex[i] = a
		}
		a.rows = append(a.rows, row)
		a.rests = append(a.rests, rest)
		if e, ok := expertOf(rest); ok {
			a.experts[e] = true
		}
		maxIndex = max(maxIndex, i)
	}
	if len(byIndex) == 0 {
		return nil, ""
	}
	useSpecs := len(specs) == maxIndex+1
	from := LayersFromNames
	if useSpecs {
		from = LayersFromConfig
	}
	out := make([]Layer, 0, len(byIndex))
	for i, a := range byIndex {
		l := Layer{Index: i, Experts: len(a.experts), Tensors: len(a.rows)}
		if useSpecs {
			l.Kind, l.MoE = specs[i].Kind, specs[i].MoE
		} else {
			l.Kind, l.MoE = guessLayer(a.rests)
		}
		var all *Total
		l.Formats, all = totals(a.rows)
		l.Params, l.Bytes = all.Params, all.Bytes
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, from
}

// guessLayer reads a layer's mixer and feed-forward kind from its
// layer-relative tensor names (LFM2 naming: conv.*, self_attn.*,
// feed_forward.experts.E.* and feed_forward.gate.*).
func guessLayer(rests []string) (kind string, moe bool) {
	var conv, attn bool
	for _, r := range rests {
		switch {
		case strings.HasPrefix(r, "conv."):
			conv = true
		case strings.HasPrefix(r, "self_attn."):
			attn = true
		case strings.HasPrefix(r, "feed_forward.experts."), strings.HasPrefix(r, "feed_forward.gate."):
			moe = true
		}
	}
	switch {
	case conv && !attn:
		return MixerConv, moe
	case attn && !conv:
		return MixerAttention, moe
	}
	return MixerUnknown, moe
}

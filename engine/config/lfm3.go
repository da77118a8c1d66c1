package config

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// RoPEParams is the rotary embedding of one attention kind.
type RoPEParams struct {
	// Theta is the base θ.
	Theta float64
	// PartialRotaryFactor is the share of each head that rotates, in (0,
	// 1]: the first int(factor·head_dim/2) frequency slots take
	// θ^(−2j/head_dim), the denominator the whole head (lfm3's
	// "proportional" partial rotation, docs/lfm3.md), and the others 0, so
	// their dimensions pass through unchanged. 1 is a full rotation.
	PartialRotaryFactor float64
}

// RotatedPairs returns how many of the head_dim/2 frequency slots rotate.
func (p RoPEParams) RotatedPairs(headDim int) int {
	return min(headDim/2, int(p.PartialRotaryFactor*float64(headDim)/2))
}

// The layer_types names of the attention kinds.
const (
	fullAttention    = "full_attention"
	slidingAttention = "sliding_attention"
)

// LayerRoPE returns the rotary embedding of attention layer i: lfm3's
// rope_parameters entry of the layer's kind, or the model's θ with a full
// rotation for LFM2.
func (c *Config) LayerRoPE(i int) RoPEParams {
	if c.ModelType != ModelTypeLFM3 {
		return RoPEParams{Theta: c.RopeTheta, PartialRotaryFactor: 1}
	}
	if c.Sliding != nil && c.Sliding[i] {
		return c.RoPESliding
	}
	return c.RoPEFull
}

// LayerWindow returns how many positions a query of layer i sees, its own
// included: SlidingWindow for a sliding-attention layer, 0 (all earlier
// positions) otherwise.
func (c *Config) LayerWindow(i int) int {
	if c.Sliding != nil && i < len(c.Sliding) && c.Sliding[i] {
		return c.SlidingWindow
	}
	return 0
}

// LayerType returns layer i's layer_types name.
func (c *Config) LayerType(i int) string {
	switch {
	case c.LayerKinds[i] == Conv:
		return "conv"
	case c.Sliding != nil && c.Sliding[i]:
		return slidingAttention
	}
	return fullAttention
}

// lfm3KnownKeys are the keys an lfm3 config.json may set: those lfmq reads
// and Hugging Face's bookkeeping. LFM2's legacy and MoE keys are not among
// them, so a config that sets one is told it is not used.
var lfm3KnownKeys = map[string]bool{
	"model_type": true, "vocab_size": true, "hidden_size": true, "num_hidden_layers": true, "num_attention_heads": true,
	"num_key_value_heads": true, "head_dim": true, "intermediate_size": true, "norm_eps": true, "rms_norm_eps": true,
	"conv_L_cache": true, "conv_bias": true, "max_position_embeddings": true, "bos_token_id": true, "pad_token_id": true,
	"eos_token_id": true, "tie_word_embeddings": true, "layer_types": true, "rope_parameters": true, "sliding_window": true,
	// Hugging Face bookkeeping and training-only settings.
	"architectures": true, "torch_dtype": true, "dtype": true, "transformers_version": true, "initializer_range": true,
	"use_cache": true, "auto_map": true, "_name_or_path": true, "max_length": true, "quantization_config": true,
}

// lfm3RopeKeys are the keys of one rope_parameters entry.
var lfm3RopeKeys = []string{"partial_rotary_factor", "rope_theta", "rope_type"}

// normEps reads lfm3's norm_eps, or its alias rms_norm_eps; both set must
// agree.
func (p *parser) normEps() float64 {
	_, a := p.get("norm_eps")
	_, b := p.get("rms_norm_eps")
	switch {
	case a && b:
		x, y := p.float("norm_eps", 1e-5), p.float("rms_norm_eps", 1e-5)
		if p.err == nil && x != y {
			p.conflict("norm_eps", fmt.Sprint(x), "rms_norm_eps", fmt.Sprint(y))
		}
		return x
	case b:
		return p.float("rms_norm_eps", 1e-5)
	}
	return p.float("norm_eps", 1e-5)
}

// lfm3 reads what only LFM3 has: layer_types with both attention kinds,
// sliding_window and the per-kind rope_parameters.
func (p *parser) lfm3(c *Config) error {
	for _, key := range []string{"rope_theta", "rope_scaling", "full_attn_idxs"} {
		if _, ok := p.get(key); ok {
			where := `rope_parameters has one entry per attention kind, each with its rope_theta`
			if key == "full_attn_idxs" {
				where = "layer_types names each layer's kind"
			}
			return &Error{File: p.name, Field: key, Msg: "not read for model_type \"lfm3\" (" + where + "); remove it"}
		}
	}
	v, ok := p.get("layer_types")
	if !ok {
		return &Error{File: p.name, Field: "layer_types", Msg: `missing; lfm3 names each layer "conv", "full_attention" or "sliding_attention"`}
	}
	types, err := p.layerTypes(c, v)
	if err != nil {
		return err
	}
	c.LayerKinds = make([]LayerKind, len(types))
	used := map[string]int{} // attention kind → its first layer
	sliding := make([]bool, len(types))
	for i, t := range types {
		switch t {
		case "conv":
			c.LayerKinds[i] = Conv
		case fullAttention, slidingAttention:
			c.LayerKinds[i] = Attention
			sliding[i] = t == slidingAttention
			if _, seen := used[t]; !seen {
				used[t] = i
			}
		default:
			return &Error{File: p.name, Field: fmt.Sprintf("layer_types[%d]", i), Msg: fmt.Sprintf(`%q is not a layer type of lfm3; expected "conv", "full_attention" or "sliding_attention"`, t)}
		}
	}
	if _, ok := used[slidingAttention]; ok {
		c.Sliding = sliding
		if _, set := p.get("sliding_window"); !set {
			return &Error{File: p.name, Field: "sliding_window", Msg: fmt.Sprintf("missing; layer_types[%d] is \"sliding_attention\"", used[slidingAttention])}
		}
		c.SlidingWindow = p.int("sliding_window", 0)
		if p.err == nil && c.SlidingWindow <= 0 {
			p.fail("sliding_window", fmt.Sprintf("must be a positive number of positions, got %d", c.SlidingWindow))
		}
	} else if v, set := p.get("sliding_window"); set {
		p.intValue("sliding_window", v, 0) // no sliding layer: checked, not used
	}
	if p.err != nil {
		return p.err
	}
	return p.lfm3Rope(c, used)
}

// lfm3Rope reads rope_parameters: one entry per attention kind that
// layer_types uses, each with rope_theta, rope_type ("default", which LFM3
// uses for its proportional partial rotation, or NeMo's name for it,
// "proportional") and an optional partial_rotary_factor. Anything else is
// refused by name: an unread key could change the rotation.
func (p *parser) lfm3Rope(c *Config, used map[string]int) error {
	v, ok := p.get("rope_parameters")
	if !ok {
		if len(used) == 0 {
			c.RopeTheta = 1e6 // no attention layer: no rotation to describe
			return nil
		}
		return &Error{File: p.name, Field: "rope_parameters", Msg: `missing; lfm3 gives one entry per attention kind ("full_attention", "sliding_attention")`}
	}
	var rp map[string]json.RawMessage
	if err := json.Unmarshal(v, &rp); err != nil {
		return &Error{File: p.name, Field: "rope_parameters", Msg: "expected an object with one entry per attention kind, got " + string(v)}
	}
	kinds := make([]string, 0, len(rp))
	for k := range rp {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if k != fullAttention && k != slidingAttention {
			return &Error{File: p.name, Field: "rope_parameters." + k, Msg: `unknown key; lfm3's rope_parameters has one entry per attention kind, "full_attention" and "sliding_attention"`}
		}
	}
	for _, kind := range []string{fullAttention, slidingAttention} {
		field := "rope_parameters." + kind
		raw, present := rp[kind]
		if !present || string(raw) == "null" {
			if first, isUsed := used[kind]; isUsed {
				return &Error{File: p.name, Field: field, Msg: fmt.Sprintf("missing; layer_types[%d] is %q", first, kind)}
			}
			continue
		}
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(raw, &entry); err != nil {
			return &Error{File: p.name, Field: field, Msg: "expected an object, got " + string(raw)}
		}
		for key := range entry {
			if !slices.Contains(lfm3RopeKeys, key) {
				return &Error{File: p.name, Field: field + "." + key, Msg: "unknown key; an lfm3 rope entry has " + strings.Join(lfm3RopeKeys, ", ")}
			}
		}
		sub := parser{name: p.name, raw: entry}
		typ := sub.str("rope_type", "default")
		if sub.err == nil && typ != "default" && typ != "proportional" {
			sub.fail("rope_type", fmt.Sprintf(`%q is not supported; lfm3 uses "default" (its proportional partial rotation, also called "proportional")`, typ))
		}
		if _, set := sub.get("rope_theta"); !set && sub.err == nil {
			sub.fail("rope_theta", "missing")
		}
		rope := RoPEParams{Theta: sub.float("rope_theta", 0), PartialRotaryFactor: sub.float("partial_rotary_factor", 1)}
		if sub.err == nil && (!(rope.Theta > 1) || math.IsInf(rope.Theta, 0)) {
			sub.fail("rope_theta", fmt.Sprintf("must be a finite number above 1, got %g", rope.Theta))
		}
		if sub.err == nil && !(rope.PartialRotaryFactor > 0 && rope.PartialRotaryFactor <= 1) {
			sub.fail("partial_rotary_factor", fmt.Sprintf("must be in (0, 1], got %g", rope.PartialRotaryFactor))
		}
		if sub.err != nil {
			if ce, ok := sub.err.(*Error); ok {
				ce.Field = field + "." + ce.Field
			}
			return sub.err
		}
		if kind == fullAttention {
			c.RoPEFull = rope
		} else {
			c.RoPESliding = rope
		}
	}
	// RopeTheta keeps LFM2's meaning for what reads one θ (inspect): the
	// full-attention layers'.
	c.RopeTheta = c.RoPEFull.Theta
	if _, ok := used[fullAttention]; !ok {
		if _, ok := used[slidingAttention]; ok {
			c.RopeTheta = c.RoPESliding.Theta
		} else {
			c.RopeTheta = 1e6
		}
	}
	return nil
}

// validateLFM3 checks what LFM3 adds once head_dim is known: each attention
// kind's rotation must turn at least one pair of dimensions.
func (c *Config) validateLFM3(name string) error {
	for i := range c.NumLayers {
		if c.LayerKinds[i] != Attention {
			continue
		}
		if r := c.LayerRoPE(i); r.RotatedPairs(c.HeadDim) < 1 {
			return &Error{File: name, Field: "rope_parameters." + c.LayerType(i) + ".partial_rotary_factor",
				Msg: fmt.Sprintf("%g of head_dim %d rotates no pair of dimensions", r.PartialRotaryFactor, c.HeadDim)}
		}
	}
	return nil
}

package config

import (
	"encoding/json"
	"fmt"
	"math"
)

// moeOnlyKeys are the keys that mean something only to LFM2-MoE; a dense
// config that sets them is told they are not used.
var moeOnlyKeys = []string{"moe_intermediate_size", "num_dense_layers", "num_experts", "num_experts_per_tok",
	"use_expert_bias", "norm_topk_prob", "routed_scaling_factor", "output_router_logits", "router_aux_loss_coef"}

// denseKnownKeys is knownKeys without the MoE-only keys.
var denseKnownKeys = func() map[string]bool {
	out := map[string]bool{}
	for k := range knownKeys {
		out[k] = true
	}
	for _, k := range moeOnlyKeys {
		delete(out, k)
	}
	return out
}()

func knownKeysFor(modelType string) map[string]bool {
	switch modelType {
	case ModelTypeDense:
		return denseKnownKeys
	case ModelTypeLFM3:
		return lfm3KnownKeys
	}
	return knownKeys
}

// conflictError reports two keys that say the same thing differently (a
// new key and its legacy form); the message names both.
func conflictError(file, key, other, detail string) *Error {
	return &Error{File: file, Field: key, Msg: fmt.Sprintf("disagrees with %s: %s; set one of them, or make them agree", other, detail)}
}

// conflict records that key (value a) and other (value b) disagree.
func (p *parser) conflict(key, a, other, b string) {
	if p.err == nil {
		p.err = conflictError(p.name, key, other, fmt.Sprintf("%s is %s, %s is %s", key, a, other, b))
	}
}

// sameAs refuses a legacy duplicate key whose value differs from the one
// the config uses for canonical; an absent duplicate is fine.
func (p *parser) sameAs(dup, canonical string, value int) {
	v, ok := p.get(dup)
	if !ok || p.err != nil {
		return
	}
	if n := p.intValue(dup, v, 0); p.err == nil && n != value {
		p.conflict(dup, fmt.Sprint(n), canonical, fmt.Sprint(value))
	}
}

// denseFFNWidth returns the dense LFM2 FFN width as Hugging Face's Lfm2MLP
// computes it: the base width is block_ff_dim (the legacy key) or
// intermediate_size; with block_auto_adjust_ff_dim (default true) it
// becomes int(2·base/3), and when block_ffn_dim_multiplier is not null
// that is multiplied (truncated) and rounded up to a multiple of
// block_multiple_of. LFM2-1.2B: 12288 → 8192.
func (p *parser) denseFFNWidth() int {
	var base int
	if v, ok := p.get("block_ff_dim"); ok {
		base = p.intValue("block_ff_dim", v, 0)
		if w, ok := p.get("intermediate_size"); ok && p.err == nil {
			if n := p.intValue("intermediate_size", w, 0); p.err == nil && n != base {
				p.conflict("intermediate_size", fmt.Sprint(n), "block_ff_dim", fmt.Sprint(base))
			}
		}
	} else {
		base = p.int("intermediate_size", 12288)
	}
	auto := p.bool("block_auto_adjust_ff_dim", true)
	if p.err != nil || !auto {
		return base
	}
	if base <= 0 {
		return base // validate names intermediate_size
	}
	width := int(float64(2*base) / 3)
	mult := 1.0
	if v, ok := p.raw["block_ffn_dim_multiplier"]; ok && string(v) == "null" {
		return width // Hugging Face rounds only together with the multiplier
	} else if ok {
		if err := json.Unmarshal(v, &mult); err != nil {
			p.fail("block_ffn_dim_multiplier", "expected a number or null, got "+string(v))
			return base
		}
	} else {
		p.defaulted("block_ffn_dim_multiplier", "1")
	}
	if !(mult > 0) || math.IsInf(mult, 0) || mult*float64(width) > math.MaxInt32 {
		p.fail("block_ffn_dim_multiplier", fmt.Sprintf("must be a positive number that keeps the width in range, got %g", mult))
		return base
	}
	width = int(mult * float64(width))
	multiple := p.int("block_multiple_of", 256)
	if p.err != nil {
		return base
	}
	if multiple <= 0 {
		p.fail("block_multiple_of", fmt.Sprintf("must be positive, got %d", multiple))
		return base
	}
	return multiple * ((width + multiple - 1) / multiple)
}

package synth

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// denseShapes are the published dense LFM2 models' shapes (legacy config
// keys: block_ff_dim, multiplier 1.0 and multiple of 256; full_attn_idxs;
// tied embedding): vocabulary 65,536, 8 KV heads of 64, conv_L_cache 3,
// RoPE θ 1e6. TestDenseShapes holds each to its model card's parameter
// count.
//
// LFM2-350M and LFM2-1.2B auto-adjust block_ff_dim (6656 → 4608, 12288 →
// 8192). LFM2-2.6B's card gives 2.57B parameters for 30 layers (22 conv, 8
// attention) at hidden 2048: that is its FFN width 10752 used as is (the
// auto-adjusted 7168 would give 1.91B). Its 8 attention layers are spread
// evenly here, which may not be the published positions: only their
// number changes a checkpoint's size and a token's cost.
var denseShapes = map[string]Shape{
	"LFM2-350M": denseShape(1024, 16, 6656, 4608, true, 16, []int{2, 5, 8, 10, 12, 14}),
	"LFM2-1.2B": denseShape(2048, 32, 12288, 8192, true, 16, []int{2, 5, 8, 10, 12, 14}),
	"LFM2-2.6B": denseShape(2048, 32, 10752, 10752, false, 30, []int{2, 6, 10, 14, 18, 21, 24, 27}),
}

func denseShape(hidden, heads, ffBase, width int, adjust bool, layers int, attention []int) Shape {
	types := make([]string, layers)
	for i := range types {
		types[i] = "conv"
		if slices.Contains(attention, i) {
			types[i] = "full_attention"
		}
	}
	return Shape{
		VocabSize: 65536, HiddenSize: hidden, IntermediateSize: width, FFBase: ffBase,
		LayerTypes: types, NumHeads: heads, NumKVHeads: 8, HeadDim: hidden / heads,
		MaxPositions: 128000, Dense: true, FFAutoAdjust: adjust,
	}
}

// DenseShape returns the shape of a published dense LFM2 model by name:
// "LFM2-350M" (hidden 1024, FFN 4608, 16 layers of which 6 attention),
// "LFM2-1.2B" (hidden 2048, FFN 8192, 16 layers, 6 attention; 2.34 GB of
// BF16 weights) or "LFM2-2.6B" (hidden 2048, FFN 10752, 30 layers, 8
// attention). Every layer is the real model's, so a synthetic
// checkpoint of it reads the real model's bytes per token.
func DenseShape(name string) (Shape, error) {
	s, ok := denseShapes[name]
	if !ok {
		return Shape{}, fmt.Errorf("synth: no dense shape %q; known: %v", name, DenseShapeNames())
	}
	s.LayerTypes = slices.Clone(s.LayerTypes)
	return s, nil
}

// DenseShapeNames lists the names DenseShape knows, sorted.
func DenseShapeNames() []string {
	var out []string
	for n := range denseShapes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TinyDenseShape returns a dense model with TinyShape's sizes: hidden 64,
// FFN 256 (block_ff_dim 384 auto-adjusted), 4 layers with attention at 1.
func TinyDenseShape() Shape {
	s := denseShape(64, 4, 384, 256, true, 4, []int{1})
	s.VocabSize, s.NumKVHeads, s.MaxPositions = 512, 2, 4096
	return s
}

// denseConfigJSON returns the config.json of a dense shape in the legacy
// key style of the published LFM2 configs (LFM2-1.2B's own).
func denseConfigJSON(s Shape) ([]byte, error) {
	var attention []int
	for i, t := range s.LayerTypes {
		switch t {
		case "full_attention":
			attention = append(attention, i)
		case "conv":
		default:
			return nil, fmt.Errorf("synth: layer %d: %q is neither conv nor full_attention", i, t)
		}
	}
	if attention == nil {
		attention = []int{}
	}
	c := commonConfig(s)
	for k, v := range map[string]any{
		"architectures":            []string{"Lfm2ForCausalLM"},
		"model_type":               "lfm2",
		"block_dim":                s.HiddenSize,
		"block_ff_dim":             s.FFBase,
		"block_auto_adjust_ff_dim": s.FFAutoAdjust,
		"block_ffn_dim_multiplier": 1.0,
		"block_multiple_of":        256,
		"full_attn_idxs":           attention,
		"num_heads":                s.NumHeads,
		"conv_dim":                 s.HiddenSize,
		"tie_embedding":            true,
	} {
		c[k] = v
	}
	return json.MarshalIndent(c, "", "  ")
}

package synth

import (
	"encoding/json"
	"fmt"
)

// LFM3Shape returns LFM3-1.7B's published shape (docs/lfm3.md): hidden
// 2,048, 24 layers of which 13 gated short convolutions (conv_L_cache 7),
// 6 global attention layers (RoPE θ 1e6 with the proportional partial
// rotation over half of each head) and 5 sliding-window attention layers
// (window 256, θ 1e4), alternating on every second layer from layer 2 with
// convolutions between; 16 query and 4 KV heads of 128, SwiGLU width
// 7,680, vocabulary 128,000, tied embedding, 262,144 positions. Every
// layer is the real model's, so a synthetic checkpoint of it reads the real
// model's bytes per token: 1.73B parameters, 3.46 GB in BF16.
func LFM3Shape() Shape {
	types := make([]string, 24)
	for i := range types {
		switch {
		case i < 2 || i%2 == 1:
			types[i] = "conv"
		case (i/2)%2 == 1:
			types[i] = "full_attention"
		default:
			types[i] = "sliding_attention"
		}
	}
	return Shape{
		VocabSize: 128000, HiddenSize: 2048, IntermediateSize: 7680,
		LayerTypes: types, NumHeads: 16, NumKVHeads: 4, HeadDim: 128,
		MaxPositions: 262144, LFM3: true, SlidingWindow: 256, ConvK: 7,
	}
}

// TinyLFM3Shape returns an LFM3 with LFM3Shape's layer pattern cut to 6
// layers (conv, conv, full, conv, sliding, conv) at sizes small enough for
// unit tests: hidden 64, 4 query and 2 KV heads of 16, SwiGLU width 128,
// vocabulary 512, window 16.
func TinyLFM3Shape() Shape {
	s := LFM3Shape()
	s.LayerTypes = s.LayerTypes[:6]
	s.VocabSize, s.HiddenSize, s.IntermediateSize = 512, 64, 128
	s.NumHeads, s.NumKVHeads, s.HeadDim = 4, 2, 16
	s.MaxPositions, s.SlidingWindow = 4096, 16
	return s
}

// lfm3ConfigJSON returns the config.json of an LFM3 shape in the key style
// of LFM3-1.7B's published config: layer_types naming each layer,
// rope_parameters per attention kind.
func lfm3ConfigJSON(s Shape) ([]byte, error) {
	kinds := map[string]bool{}
	for i, t := range s.LayerTypes {
		switch t {
		case "conv", "full_attention", "sliding_attention":
			kinds[t] = true
		default:
			return nil, fmt.Errorf("synth: layer %d: %q is not conv, full_attention or sliding_attention", i, t)
		}
	}
	rope := map[string]any{}
	if kinds["full_attention"] {
		rope["full_attention"] = map[string]any{"partial_rotary_factor": 0.5, "rope_theta": 1e6, "rope_type": "default"}
	}
	if kinds["sliding_attention"] {
		rope["sliding_attention"] = map[string]any{"rope_theta": 1e4, "rope_type": "default"}
	}
	c := commonConfig(s)
	delete(c, "rope_theta") // lfm3 keeps θ in rope_parameters only
	delete(c, "torch_dtype")
	for k, v := range map[string]any{
		"architectures":       []string{"Lfm3ForCausalLM"},
		"model_type":          "lfm3",
		"intermediate_size":   s.IntermediateSize,
		"layer_types":         s.LayerTypes,
		"head_dim":            s.HeadDim,
		"conv_L_cache":        s.ConvK,
		"rope_parameters":     rope,
		"tie_word_embeddings": true,
		"dtype":               "bfloat16",
	} {
		c[k] = v
	}
	if kinds["sliding_attention"] {
		c["sliding_window"] = s.SlidingWindow
	}
	return json.MarshalIndent(c, "", "  ")
}

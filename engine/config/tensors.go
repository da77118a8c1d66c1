package config

import "fmt"

// Shape is a tensor shape in the Hugging Face [out, in] convention.
type Shape []int64

func (s Shape) String() string { return fmt.Sprint([]int64(s)) }

// LayerPrefix returns "model.layers.<i>.".
func LayerPrefix(i int) string { return fmt.Sprintf("model.layers.%d.", i) }

// ExpectedTensors returns every tensor a Hugging Face LFM2-MoE checkpoint with
// this config holds (per-expert layout), with its shape. It is the reference
// the weight loader and the quantization plan check a checkpoint against.
func (c *Config) ExpectedTensors() map[string]Shape {
	H, V := int64(c.HiddenSize), int64(c.VocabSize)
	d := int64(c.HeadDim)
	out := map[string]Shape{
		"model.embed_tokens.weight":   {V, H},
		"model.embedding_norm.weight": {H},
	}
	if !c.TieWordEmbeddings {
		out["lm_head.weight"] = Shape{V, H}
	}
	for i := 0; i < c.NumLayers; i++ {
		p := LayerPrefix(i)
		out[p+"operator_norm.weight"] = Shape{H}
		out[p+"ffn_norm.weight"] = Shape{H}
		switch c.LayerKinds[i] {
		case Conv:
			out[p+"conv.in_proj.weight"] = Shape{3 * H, H}
			out[p+"conv.conv.weight"] = Shape{H, 1, int64(c.ConvLCache)}
			out[p+"conv.out_proj.weight"] = Shape{H, H}
			if c.ConvBias {
				out[p+"conv.in_proj.bias"] = Shape{3 * H}
				out[p+"conv.conv.bias"] = Shape{H}
				out[p+"conv.out_proj.bias"] = Shape{H}
			}
		case Attention:
			q, kv := int64(c.NumHeads)*d, int64(c.NumKVHeads)*d
			out[p+"self_attn.q_proj.weight"] = Shape{q, H}
			out[p+"self_attn.k_proj.weight"] = Shape{kv, H}
			out[p+"self_attn.v_proj.weight"] = Shape{kv, H}
			out[p+"self_attn.out_proj.weight"] = Shape{H, q}
			out[p+"self_attn.q_layernorm.weight"] = Shape{d}
			out[p+"self_attn.k_layernorm.weight"] = Shape{d}
		}
		if !c.IsMoE(i) {
			F := int64(c.IntermediateSize)
			out[p+"feed_forward.w1.weight"] = Shape{F, H}
			out[p+"feed_forward.w3.weight"] = Shape{F, H}
			out[p+"feed_forward.w2.weight"] = Shape{H, F}
			continue
		}
		E, Fe := int64(c.NumExperts), int64(c.MoEIntermediateSize)
		out[p+"feed_forward.gate.weight"] = Shape{E, H}
		if c.UseExpertBias {
			out[p+"feed_forward.expert_bias"] = Shape{E}
		}
		for e := 0; e < c.NumExperts; e++ {
			ep := fmt.Sprintf("%sfeed_forward.experts.%d.", p, e)
			out[ep+"w1.weight"] = Shape{Fe, H}
			out[ep+"w3.weight"] = Shape{Fe, H}
			out[ep+"w2.weight"] = Shape{H, Fe}
		}
	}
	return out
}

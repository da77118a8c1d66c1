package config

import "fmt"

// Shape is a tensor shape in the Hugging Face [out, in] convention.
type Shape []int64

func (s Shape) String() string { return fmt.Sprint([]int64(s)) }

// LayerPrefix returns "model.layers.<i>.".
func LayerPrefix(i int) string { return fmt.Sprintf("model.layers.%d.", i) }

// AttnNames are the names of an attention layer's tensors after its
// LayerPrefix, which differ between the families: LFM2 names its own
// (out_proj, q_layernorm), LFM3 takes Qwen3's attention (o_proj, q_norm)
// and adds the output gate (docs/lfm3.md §Tensors).
type AttnNames struct {
	Q, K, V, O   string
	QNorm, KNorm string
	Gate         string // "" when the family has no output gate
}

// The names of LFM3's post norms, after LayerPrefix.
const (
	PostOperatorNorm = "post_operator_norm.weight"
	PostFFNNorm      = "post_ffn_norm.weight"
)

// AttnNames returns the model type's attention tensor names.
func (c *Config) AttnNames() AttnNames {
	if c.ModelType == ModelTypeLFM3 {
		return AttnNames{Q: "self_attn.q_proj.weight", K: "self_attn.k_proj.weight", V: "self_attn.v_proj.weight",
			O: "self_attn.o_proj.weight", QNorm: "self_attn.q_norm.weight", KNorm: "self_attn.k_norm.weight",
			Gate: "self_attn.gate_proj.weight"}
	}
	return AttnNames{Q: "self_attn.q_proj.weight", K: "self_attn.k_proj.weight", V: "self_attn.v_proj.weight",
		O: "self_attn.out_proj.weight", QNorm: "self_attn.q_layernorm.weight", KNorm: "self_attn.k_layernorm.weight"}
}

// ExpectedTensors returns every tensor a Hugging Face checkpoint with this
// config holds (per-expert layout for LFM2-MoE), with its shape. It is the
// reference the weight loader and the quantization plan check a checkpoint
// against.
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
	an := c.AttnNames()
	for i := 0; i < c.NumLayers; i++ {
		p := LayerPrefix(i)
		out[p+"operator_norm.weight"] = Shape{H}
		out[p+"ffn_norm.weight"] = Shape{H}
		if c.PostNorms {
			out[p+PostOperatorNorm] = Shape{H}
			out[p+PostFFNNorm] = Shape{H}
		}
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
			out[p+an.Q] = Shape{q, H}
			out[p+an.K] = Shape{kv, H}
			out[p+an.V] = Shape{kv, H}
			out[p+an.O] = Shape{H, q}
			out[p+an.QNorm] = Shape{d}
			out[p+an.KNorm] = Shape{d}
			if c.AttnGate {
				// One scalar gate per head (docs/lfm3.md).
				out[p+an.Gate] = Shape{int64(c.NumHeads), H}
			}
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

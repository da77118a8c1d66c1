// Package drafttest writes synthetic DSpark drafters: the checkpoint
// layout of LiquidAI's LFM2.5-*-DSpark drafters (config.json and
// model.safetensors, no embedding and no LM head) with seeded random
// weights, for benchmarks at the released drafters' size
// (docs/drafting-speed.md) and for tests that need a drafter of a given
// shape. Speed does not depend on the values; what a synthetic drafter
// drafts is noise.
package drafttest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/safetensors"
)

// Shape is a DSpark drafter's architecture.
type Shape struct {
	// Layers is num_hidden_layers; Heads, KVHeads and HeadDim the GQA
	// attention; Intermediate the SwiGLU width.
	Layers, Heads, KVHeads, HeadDim, Intermediate int
	// BlockSize is block_size (the rows of a block, one draft each).
	BlockSize int
	// MarkovRank is markov_rank, r of markov_w1 and markov_w2 [V, r].
	MarkovRank int
	// Taps are dflash_config.target_layer_ids.
	Taps []int
	// MaskTokenID is dflash_config.mask_token_id.
	MaskTokenID int
	// Hidden, Vocab and TargetLayers are the target's (a drafter's
	// hidden size is its target's).
	Hidden, Vocab, TargetLayers int
}

// Released returns the shape of the released LFM2.5 DSpark drafters for
// target: 5 Qwen3-style layers of the target's hidden size with 32 query
// and 8 KV heads of 64 and SwiGLU width 6144, block 9, Markov rank 256,
// the mask token 64402 (the id after </think> in the 65,536-token
// vocabulary; the last id in another), and 5 taps spread evenly from
// layer 2 to layer L−2 (Taps). These are the published
// LFM2.5-1.2B-Instruct-DSpark config's values (295.7 M parameters, 591 MB
// of BF16, taps [2, 5, 8, 11, 14] of 16 layers); the 2.6B, 8B-A1B and
// VL-3B drafters publish the same layer shapes.
func Released(target *config.Config) Shape {
	mask := 64402
	if target.VocabSize <= mask {
		mask = target.VocabSize - 1
	}
	return Shape{
		Layers: 5, Heads: 32, KVHeads: 8, HeadDim: 64, Intermediate: 6144,
		BlockSize: 9, MarkovRank: 256, Taps: Taps(target.NumLayers, 5), MaskTokenID: mask,
		Hidden: target.HiddenSize, Vocab: target.VocabSize, TargetLayers: target.NumLayers,
	}
}

// Taps returns n target layers spread evenly from layer 2 to layer L−2,
// rounded to the nearest (halves up): the spacing of the published
// LFM2.5-1.2B drafter's [2, 5, 8, 11, 14] for L = 16, never the last
// layer. A target of fewer than 5 layers is tapped from layer 0 to its
// next-to-last.
func Taps(L, n int) []int {
	lo, hi := 2, L-2
	if L < 5 {
		lo, hi = 0, max(L-2, 0)
	}
	out := make([]int, n)
	for i := range n {
		if n == 1 {
			out[i] = (lo + hi) / 2
			continue
		}
		out[i] = int(math.Floor(float64(lo) + float64(i*(hi-lo))/float64(n-1) + 0.5))
	}
	return out
}

// tensor is one tensor of the drafter: its name and shape.
type tensor struct {
	name  string
	shape []int64
}

// tensors lists the drafter's tensors in the published layout.
func (s Shape) tensors() []tensor {
	H, V, r := int64(s.Hidden), int64(s.Vocab), int64(s.MarkovRank)
	q, kv, F := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.Intermediate)
	ts := []tensor{
		{"fc.weight", []int64{H, int64(len(s.Taps)) * H}},
		{"hidden_norm.weight", []int64{H}},
		{"norm.weight", []int64{H}},
		{"markov_head.markov_w1.weight", []int64{V, r}},
		{"markov_head.markov_w2.weight", []int64{V, r}},
		{"confidence_head.proj.weight", []int64{1, H + r}},
		{"confidence_head.proj.bias", []int64{1}},
	}
	for i := range s.Layers {
		p := fmt.Sprintf("layers.%d.", i)
		ts = append(ts,
			tensor{p + "input_layernorm.weight", []int64{H}},
			tensor{p + "post_attention_layernorm.weight", []int64{H}},
			tensor{p + "self_attn.q_proj.weight", []int64{q, H}},
			tensor{p + "self_attn.k_proj.weight", []int64{kv, H}},
			tensor{p + "self_attn.v_proj.weight", []int64{kv, H}},
			tensor{p + "self_attn.o_proj.weight", []int64{H, q}},
			tensor{p + "self_attn.q_norm.weight", []int64{int64(s.HeadDim)}},
			tensor{p + "self_attn.k_norm.weight", []int64{int64(s.HeadDim)}},
			tensor{p + "mlp.gate_proj.weight", []int64{F, H}},
			tensor{p + "mlp.up_proj.weight", []int64{F, H}},
			tensor{p + "mlp.down_proj.weight", []int64{H, F}},
		)
	}
	return ts
}

// Params returns the drafter's parameter count.
func (s Shape) Params() int64 {
	var n int64
	for _, t := range s.tensors() {
		c := int64(1)
		for _, d := range t.shape {
			c *= d
		}
		n += c
	}
	return n
}

// Config returns the drafter's config.json, in the key layout of the
// released drafters (tiny-lfm2-moe-dspark's, testdata/).
func (s Shape) Config() ([]byte, error) {
	types := make([]string, s.Layers)
	for i := range types {
		types[i] = "full_attention"
	}
	dflash := map[string]any{"mask_token_id": s.MaskTokenID, "target_layer_ids": s.Taps, "num_target_layers": s.TargetLayers}
	c := map[string]any{
		"architectures":               []string{"Lfm2DSparkDraftModel"},
		"model_type":                  "qwen3",
		"hidden_size":                 s.Hidden,
		"intermediate_size":           s.Intermediate,
		"num_hidden_layers":           s.Layers,
		"num_attention_heads":         s.Heads,
		"num_key_value_heads":         s.KVHeads,
		"head_dim":                    s.HeadDim,
		"hidden_act":                  "silu",
		"attention_bias":              false,
		"rms_norm_eps":                1e-5,
		"rope_theta":                  1e7,
		"rope_parameters":             map[string]any{"rope_theta": 1e7, "rope_type": "default"},
		"rope_is_neox_style":          false,
		"layer_types":                 types,
		"max_position_embeddings":     128000,
		"vocab_size":                  s.Vocab,
		"tie_word_embeddings":         false,
		"block_size":                  s.BlockSize,
		"dflash_config":               dflash,
		"markov_rank":                 s.MarkovRank,
		"markov_head_type":            "vanilla",
		"enable_confidence_head":      true,
		"confidence_head_with_markov": true,
		"initializer_range":           0.02,
		"torch_dtype":                 "bfloat16",
		"dtype":                       "bfloat16",
	}
	return json.MarshalIndent(c, "", "  ")
}

// Write writes a drafter of shape s with weights drawn from seed into dir
// (created if needed): config.json and model.safetensors, every tensor
// BF16. Linear weights and the Markov factors are N(0, 0.02²) (the
// published initializer_range), norms 1, the confidence bias 0. It
// returns the bytes of tensor data written.
func Write(dir string, s Shape, seed uint64) (int64, error) {
	if s.Layers < 1 || s.Heads < 1 || s.KVHeads < 1 || s.HeadDim < 2 || s.Intermediate < 1 ||
		s.BlockSize < 1 || s.MarkovRank < 1 || len(s.Taps) == 0 || s.Hidden < 1 || s.Vocab < 1 {
		return 0, fmt.Errorf("drafttest: shape %+v has a size below 1 or no taps", s)
	}
	cfg, err := s.Config()
	if err != nil {
		return 0, fmt.Errorf("drafttest: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("drafttest: %w", err)
	}
	var ts []safetensors.Tensor
	var bytes int64
	for _, t := range s.tensors() {
		ts = append(ts, generate(t, seed))
		bytes += int64(len(ts[len(ts)-1].Data))
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		return 0, fmt.Errorf("drafttest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(cfg, '\n'), 0o644); err != nil {
		return 0, fmt.Errorf("drafttest: %w", err)
	}
	return bytes, nil
}

// generate draws tensor t from a generator seeded by seed and its name,
// so a tensor's values do not depend on the others.
func generate(t tensor, seed uint64) safetensors.Tensor {
	h := fnv.New64a()
	h.Write([]byte(t.name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	n := int64(1)
	for _, d := range t.shape {
		n *= d
	}
	data := make([]byte, 2*n)
	norm := strings.HasSuffix(t.name, "norm.weight")
	bias := strings.HasSuffix(t.name, ".bias")
	for i := range n {
		var v float32
		switch {
		case norm:
			v = 1
		case bias:
			v = 0
		default:
			v = float32(0.02 * rng.NormFloat64())
		}
		binary.LittleEndian.PutUint16(data[2*i:], dtype.Float32ToBF16(v))
	}
	return safetensors.Tensor{Name: t.name, DType: dtype.BF16, Shape: t.shape, Data: data}
}

package synth

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/safetensors"
)

// Shape is the architecture of a synthetic checkpoint: the config.json
// fields that decide tensor shapes and routing.
type Shape struct {
	VocabSize           int
	HiddenSize          int
	IntermediateSize    int // dense SwiGLU width (layers < NumDenseLayers)
	MoEIntermediateSize int // width of each routed expert
	// LayerTypes holds each layer's mixer, "conv" or "full_attention".
	LayerTypes       []string
	NumHeads         int
	NumKVHeads       int
	HeadDim          int
	NumDenseLayers   int
	NumExperts       int
	NumExpertsPerTok int
	// MaxPositions is max_position_embeddings.
	MaxPositions int
	// Dense makes a dense LFM2 (model_type "lfm2"): every layer has the
	// dense FFN and the MoE fields are unused. Its config.json uses the
	// legacy keys of the published LFM2 configs, with FFBase as
	// block_ff_dim and FFAutoAdjust as block_auto_adjust_ff_dim; the width
	// Hugging Face derives from them must be IntermediateSize, which Write
	// checks.
	Dense        bool
	FFBase       int
	FFAutoAdjust bool
	// LFM3 makes an LFM3 (model_type "lfm3", lfm3ConfigJSON): a dense
	// SwiGLU in every layer, LayerTypes naming conv, full_attention and
	// sliding_attention layers, SlidingWindow the sliding layers' window
	// and ConvK the conv kernel length (conv_L_cache). The MoE fields are
	// unused.
	LFM3          bool
	SlidingWindow int
	ConvK         int
}

// RealShape returns LFM2-8B-A1B's layer shapes (docs/model.md §8) in a
// 4-layer model: hidden 2048, 32 experts of width 1792 with top-4
// routing, dense width 7168, 32 query and 8 KV heads of 64, vocabulary
// 65,536; layer 0 a dense short-conv layer, layer 1 MoE attention, layers
// 2 and 3 MoE short-conv. Each MoE layer reads the same bytes per token
// as one of the real model's, so per-layer decode cost scales to the
// 24-layer model. Its BF16 checkpoint is about 2.6 GB.
func RealShape() Shape {
	return Shape{
		VocabSize:           65536,
		HiddenSize:          2048,
		IntermediateSize:    7168,
		MoEIntermediateSize: 1792,
		LayerTypes:          []string{"conv", "full_attention", "conv", "conv"},
		NumHeads:            32,
		NumKVHeads:          8,
		HeadDim:             64,
		NumDenseLayers:      1,
		NumExperts:          32,
		NumExpertsPerTok:    4,
		MaxPositions:        128000,
	}
}

// A2BShape returns LFM2-24B-A2B's layer shapes (docs/model.md §8) in the
// same 4-layer arrangement as RealShape: hidden 2048, 64 experts of
// width 1536 with top-4 routing, dense width 11776, 32 query and 8 KV
// heads of 64, vocabulary 65,536. The 24B's attention layout is not
// published; these layers only have its shapes. Its BF16 checkpoint is
// about 4.6 GB.
func A2BShape() Shape {
	s := RealShape()
	s.IntermediateSize, s.MoEIntermediateSize, s.NumExperts = 11776, 1536, 64
	return s
}

// TinyShape returns a model with RealShape's layer kinds and routing
// structure at sizes small enough for unit tests (under 1 MB): hidden 64,
// 8 experts of width 32 with top-2, 4 heads and 2 KV heads of 16, vocabulary
// 512. Every matrix dimension is a multiple of 32, as in the real models, so
// BFP tiling pads nothing.
func TinyShape() Shape {
	return Shape{
		VocabSize:           512,
		HiddenSize:          64,
		IntermediateSize:    128,
		MoEIntermediateSize: 32,
		LayerTypes:          []string{"conv", "full_attention", "conv", "conv"},
		NumHeads:            4,
		NumKVHeads:          2,
		HeadDim:             16,
		NumDenseLayers:      1,
		NumExperts:          8,
		NumExpertsPerTok:    2,
		MaxPositions:        4096,
	}
}

// Options configures Write.
type Options struct {
	// Shape is the architecture; the zero value means RealShape().
	Shape Shape
	// Seed selects the weights; the same Shape and Seed give the same bytes.
	Seed uint64
	// Workers bounds the goroutines generating tensors; 0 means GOMAXPROCS.
	Workers int
}

// Result describes a written checkpoint.
type Result struct {
	// Dir is the checkpoint directory.
	Dir string
	// Files lists the files written, relative to Dir.
	Files []string
	// Bytes is the total size of the weights (tensor data only).
	Bytes int64
	// Config is the checkpoint's config.json, parsed.
	Config *config.Config
}

// Write writes a synthetic checkpoint into dir, creating it if needed. It
// writes one safetensors shard for the embedding and final norm and one per
// layer, so that at most one layer's weights (about 0.7 GB for RealShape's
// MoE layers) are held in memory at a time.
func Write(ctx context.Context, dir string, opts Options) (*Result, error) {
	if opts.Shape.HiddenSize == 0 {
		opts.Shape = RealShape()
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	cfgJSON, err := configJSON(opts.Shape)
	if err != nil {
		return nil, err
	}
	// Parsing the config we are about to write gives the shapes the loader
	// will expect, so the checkpoint cannot drift from engine/config.
	cfg, err := config.Parse("config.json", cfgJSON)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	if opts.Shape.Dense && cfg.IntermediateSize != opts.Shape.IntermediateSize {
		return nil, fmt.Errorf("synth: block_ff_dim %d gives an FFN width of %d, the shape says %d", opts.Shape.FFBase, cfg.IntermediateSize, opts.Shape.IntermediateSize)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	expected := cfg.ExpectedTensors()
	shards := shardNames(cfg, expected)
	res := &Result{Dir: dir, Config: cfg}
	weightMap := map[string]string{}
	for i, names := range shards {
		file := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		tensors := make([]safetensors.Tensor, len(names))
		pl := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(workers)
		for j, name := range names {
			pl.Go(func(ctx context.Context) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				tensors[j] = generate(name, expected[name], opts.Seed)
				return nil
			})
		}
		if err := pl.Wait(); err != nil {
			return nil, err
		}
		if err := safetensors.Write(filepath.Join(dir, file), tensors, map[string]string{"format": "pt"}); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
		for _, t := range tensors {
			weightMap[t.Name] = file
			res.Bytes += int64(len(t.Data))
		}
		res.Files = append(res.Files, file)
	}
	index, err := json.MarshalIndent(map[string]any{
		"metadata":   map[string]any{"total_size": res.Bytes},
		"weight_map": weightMap,
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{hf.IndexFile, index}, {"config.json", cfgJSON}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), append(f.data, '\n'), 0o644); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
		res.Files = append(res.Files, f.name)
	}
	return res, nil
}

// configJSON returns the config.json of a checkpoint of shape s, with the
// LFM2-8B-A1B values for every field Shape does not set.
func configJSON(s Shape) ([]byte, error) {
	if len(s.LayerTypes) == 0 {
		return nil, errors.New("synth: Shape.LayerTypes is empty")
	}
	if s.Dense {
		return denseConfigJSON(s)
	}
	if s.LFM3 {
		return lfm3ConfigJSON(s)
	}
	c := commonConfig(s)
	for k, v := range map[string]any{
		"architectures":         []string{"Lfm2MoeForCausalLM"},
		"model_type":            "lfm2_moe",
		"intermediate_size":     s.IntermediateSize,
		"moe_intermediate_size": s.MoEIntermediateSize,
		"layer_types":           s.LayerTypes,
		"head_dim":              s.HeadDim,
		"num_dense_layers":      s.NumDenseLayers,
		"num_experts":           s.NumExperts,
		"num_experts_per_tok":   s.NumExpertsPerTok,
		"use_expert_bias":       true,
		"norm_topk_prob":        true,
		"routed_scaling_factor": 1.0,
		"rope_parameters":       map[string]any{"rope_theta": 1e6, "rope_type": "default"},
		"tie_word_embeddings":   true,
	} {
		c[k] = v
	}
	return json.MarshalIndent(c, "", "  ")
}

// commonConfig holds the config.json keys that LFM2-MoE and dense LFM2
// configs share, with the published models' values where Shape has none.
func commonConfig(s Shape) map[string]any {
	return map[string]any{
		"vocab_size":              s.VocabSize,
		"hidden_size":             s.HiddenSize,
		"num_hidden_layers":       len(s.LayerTypes),
		"num_attention_heads":     s.NumHeads,
		"num_key_value_heads":     s.NumKVHeads,
		"conv_L_cache":            3,
		"conv_bias":               false,
		"norm_eps":                1e-5,
		"rope_theta":              1e6,
		"max_position_embeddings": s.MaxPositions,
		"use_cache":               true,
		"bos_token_id":            1,
		"eos_token_id":            7,
		"pad_token_id":            0,
		"torch_dtype":             "bfloat16",
	}
}

// shardNames groups the tensor names into shards: the global tensors, then
// one shard per layer, each sorted.
func shardNames(cfg *config.Config, expected map[string]config.Shape) [][]string {
	shards := make([][]string, 1+cfg.NumLayers)
	for name := range expected {
		i := 0
		if rest, ok := strings.CutPrefix(name, "model.layers."); ok {
			num, _, _ := strings.Cut(rest, ".")
			l, err := strconv.Atoi(num)
			if err != nil { // ExpectedTensors never makes such a name
				panic("synth: unexpected tensor name " + name)
			}
			i = 1 + l
		}
		shards[i] = append(shards[i], name)
	}
	for _, s := range shards {
		slices.Sort(s)
	}
	return shards
}

// generate returns the named tensor with seeded random values.
//
// Scales: a linear weight [out, in] is N(0, 1/in), so that it maps a
// unit-RMS input (every linear reads a normed or comparable activation) to a
// unit-RMS output; the embedding is N(0, 1/H), which makes the tied head's
// logits about unit variance; RMSNorm weights are 1 + N(0, 0.05²); the conv
// kernel is N(0, 1/K). The router is a linear weight like the others, so
// each token's logits over the experts are i.i.d. N(0, 1)-like and the top-k
// selection spreads over all experts; expert_bias (float32, as Liquid's
// checkpoints store it) is small, N(0, 0.01²), so it shifts choices without
// dominating them.
func generate(name string, shape config.Shape, seed uint64) safetensors.Tensor {
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	var mean, std float64
	switch {
	case strings.HasSuffix(name, "expert_bias"):
		vals := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(vals[4*i:], math.Float32bits(float32(0.01*rng.NormFloat64())))
		}
		return safetensors.Tensor{Name: name, DType: dtype.F32, Shape: shape, Data: vals}
	case strings.HasSuffix(name, "norm.weight") || strings.HasSuffix(name, "layernorm.weight"):
		mean, std = 1, 0.05
	case strings.HasSuffix(name, "conv.conv.weight"):
		std = 1 / math.Sqrt(float64(shape[len(shape)-1]))
	default: // linear weights [out, in], and the embedding [V, H]
		std = 1 / math.Sqrt(float64(shape[1]))
	}
	data := make([]byte, 2*n)
	for i := range n {
		v := float32(mean + std*rng.NormFloat64())
		binary.LittleEndian.PutUint16(data[2*i:], dtype.Float32ToBF16(v))
	}
	return safetensors.Tensor{Name: name, DType: dtype.BF16, Shape: shape, Data: data}
}

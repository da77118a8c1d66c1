// Package config reads an LFM2 config.json, the MoE family (Hugging Face
// model_type "lfm2_moe"), the dense one ("lfm2") or LFM3 ("lfm3",
// docs/lfm3.md), into a validated Config, applying every default and
// legacy-key rule of docs/model.md §2 and, for dense checkpoints, the
// FFN-width rule of Hugging Face's Lfm2MLP.
//
// It knows the model's hyper-parameters and the tensor shapes they imply; it
// does not load weights or run anything.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/lfmq/lfmq/internal/editdist"
)

// LayerKind is the token mixer of a decoder layer.
type LayerKind int

const (
	// Conv is the gated short-convolution mixer (layer_types "conv").
	Conv LayerKind = iota
	// Attention is grouped-query attention (layer_types "full_attention",
	// and lfm3's "sliding_attention", whose layers Config.Sliding marks).
	Attention
)

func (k LayerKind) String() string {
	if k == Attention {
		return "full_attention"
	}
	return "conv"
}

// The model types lfmq reads.
const (
	// ModelTypeMoE is LFM2-MoE (Lfm2MoeForCausalLM): dense FFN in the first
	// num_dense_layers layers, routed experts above.
	ModelTypeMoE = "lfm2_moe"
	// ModelTypeDense is dense LFM2 (Lfm2ForCausalLM): every layer has a
	// dense SwiGLU FFN and there are no experts.
	ModelTypeDense = "lfm2"
	// ModelTypeLFM3 is LFM3 (Lfm3ForCausalLM, docs/lfm3.md): dense LFM2
	// layers plus sliding-window attention layers, a sigmoid gate on each
	// attention head's output, a norm on every operator's and MLP's output
	// before its residual add, and RoPE parameters per attention kind.
	ModelTypeLFM3 = "lfm3"
)

// supportedTypes is what an unknown model_type is told.
const supportedTypes = `lfmq supports "lfm2_moe", "lfm2" and "lfm3"`

// Config is a validated LFM2 configuration. A dense LFM2 is an LFM2-MoE
// whose layers all have a dense FFN: NumDenseLayers == NumLayers and the
// expert fields are zero.
type Config struct {
	ModelType             string
	VocabSize             int
	HiddenSize            int
	NumLayers             int
	LayerKinds            []LayerKind
	NumHeads              int
	NumKVHeads            int
	HeadDim               int
	IntermediateSize      int // dense SwiGLU width (layers < NumDenseLayers), after any auto-adjust
	MoEIntermediateSize   int // width of each routed expert
	NumDenseLayers        int
	NumExperts            int
	NumExpertsPerTok      int
	UseExpertBias         bool
	NormTopKProb          bool
	RoutedScalingFactor   float32
	NormEps               float32
	ConvLCache            int
	ConvBias              bool
	RopeTheta             float64 // lfm3: the full-attention layers' θ (LayerRoPE gives each layer's)
	TieWordEmbeddings     bool
	MaxPositionEmbeddings int
	BOSTokenID            int
	EOSTokenIDs           []int
	PadTokenID            int

	// SlidingWindow is how many positions a query of a sliding-attention
	// layer sees, its own included (lfm3's sliding_window): keys j of a
	// query at i with 0 ≤ i−j < SlidingWindow. 0 when no layer slides.
	SlidingWindow int
	// Sliding marks, per layer, the attention layers that slide (lfm3's
	// layer_types "sliding_attention"); nil when none does.
	Sliding []bool
	// RoPEFull and RoPESliding are lfm3's rope_parameters of its
	// full_attention and sliding_attention layers; LayerRoPE gives a
	// layer's, for every model type.
	RoPEFull, RoPESliding RoPEParams
	// PostNorms: every layer has post_operator_norm and post_ffn_norm,
	// applied to the operator's and the MLP's output before each residual
	// add (lfm3).
	PostNorms bool
	// AttnGate: every attention layer has self_attn.gate_proj [heads,
	// hidden], whose sigmoid scales each head's output before the output
	// projection (lfm3).
	AttnGate bool

	// Defaulted lists the keys config.json does not set, each with the
	// default used ("vocab_size=65536"), in the order read: when a tensor
	// does not fit, they are the first suspects.
	Defaulted []string
	// Unknown lists the keys lfmq does not read, each with the known key
	// it is likely a typo of (empty when none is close).
	Unknown []UnknownKey
}

// UnknownKey is a config.json key lfmq does not read.
type UnknownKey struct {
	Key string
	// Suggest is a known key within two edits that config.json does not
	// set, e.g. "hidden_size" for "hidden_sise".
	Suggest string
}

// Warnings returns what a user should hear about config.json's unknown
// keys, without the file name: one line per likely typo, named as such,
// then one line listing the others.
func (c *Config) Warnings() []string {
	var out []string
	var others []string
	for _, u := range c.Unknown {
		if u.Suggest != "" {
			out = append(out, fmt.Sprintf("unknown key %q, likely a typo of %q (%s not set: its default is used)", u.Key, u.Suggest, u.Suggest))
		} else {
			others = append(others, u.Key)
		}
	}
	if len(others) > 0 {
		out = append(out, "keys lfmq does not use, ignored: "+strings.Join(others, ", "))
	}
	return out
}

// Error reports a config.json that lfmq cannot use. Field names the JSON key.
type Error struct {
	File  string
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("config: %s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("config: %s: %s: %s", e.File, e.Field, e.Msg)
}

// maxConfigBytes bounds config.json; real ones are a few kilobytes.
const maxConfigBytes = 1 << 20

// Load reads dir/config.json.
func Load(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if st.Size() > maxConfigBytes {
		return nil, &Error{File: path, Msg: fmt.Sprintf("%d bytes, larger than the %d-byte limit", st.Size(), maxConfigBytes)}
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse decodes and validates a config.json held in data; name is used in
// error messages.
func Parse(name string, data []byte) (*Config, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, &Error{File: name, Msg: "not a JSON object: " + err.Error()}
	}
	p := parser{name: name, raw: raw, read: map[string]bool{}}
	c := &Config{}
	c.ModelType = p.str("model_type", "")
	if p.err == nil && c.ModelType != ModelTypeMoE && c.ModelType != ModelTypeDense && c.ModelType != ModelTypeLFM3 {
		if c.ModelType == "" {
			return nil, &Error{File: name, Field: "model_type", Msg: "missing; " + supportedTypes}
		}
		return nil, &Error{File: name, Field: "model_type", Msg: fmt.Sprintf("%q is not supported; %s", c.ModelType, supportedTypes)}
	}
	dense := c.ModelType == ModelTypeDense
	lfm3 := c.ModelType == ModelTypeLFM3
	switch {
	case lfm3:
		// LFM3-1.7B's published values, listed in Defaulted when used.
		c.VocabSize = p.int("vocab_size", 128000)
		c.HiddenSize = p.int("hidden_size", 2048)
	case dense:
		c.VocabSize = p.int("vocab_size", 65536)
		// Hugging Face's Lfm2Config defaults (LFM2-2.6B-like).
		c.HiddenSize = p.int("hidden_size", 2560)
	default:
		c.VocabSize = p.int("vocab_size", 65536)
		c.HiddenSize = p.int("hidden_size", 2048)
	}
	c.NumLayers = p.int("num_hidden_layers", -1)
	if lfm3 {
		c.NumHeads = p.int("num_attention_heads", 16)
		c.NumKVHeads = p.int("num_key_value_heads", 4)
	} else {
		c.NumHeads = p.int("num_attention_heads", 32)
		c.NumKVHeads = p.int("num_key_value_heads", 8)
	}
	if lfm3 {
		// The SwiGLU width as is: LFM3 has no block_auto_adjust_ff_dim.
		c.IntermediateSize = p.int("intermediate_size", 7680)
		c.NumDenseLayers = max(c.NumLayers, 0)
		c.PostNorms, c.AttnGate = true, true
	} else if dense {
		c.IntermediateSize = p.denseFFNWidth()
		c.NumDenseLayers = max(c.NumLayers, 0)
	} else {
		c.IntermediateSize = p.int("intermediate_size", 7168)
		c.MoEIntermediateSize = p.int("moe_intermediate_size", 1792)
		c.NumDenseLayers = p.int("num_dense_layers", 2)
		c.NumExperts = p.int("num_experts", 32)
		c.NumExpertsPerTok = p.int("num_experts_per_tok", 4)
		c.UseExpertBias = p.bool("use_expert_bias", true)
		c.NormTopKProb = p.bool("norm_topk_prob", true)
		c.RoutedScalingFactor = float32(p.float("routed_scaling_factor", 1.0))
	}
	if lfm3 {
		c.NormEps = float32(p.normEps())
		c.ConvLCache = p.int("conv_L_cache", 7)
	} else {
		c.NormEps = float32(p.float("norm_eps", 1e-5))
		c.ConvLCache = p.int("conv_L_cache", 3)
	}
	c.ConvBias = p.bool("conv_bias", false)
	if lfm3 {
		c.MaxPositionEmbeddings = p.int("max_position_embeddings", 262144)
		c.BOSTokenID = p.int("bos_token_id", 124894)
		c.PadTokenID = p.int("pad_token_id", 124893)
		c.EOSTokenIDs = p.intOrList("eos_token_id", []int{124900})
	} else {
		c.MaxPositionEmbeddings = p.int("max_position_embeddings", 128000)
		c.BOSTokenID = p.int("bos_token_id", 1)
		c.PadTokenID = p.int("pad_token_id", 0)
		c.EOSTokenIDs = p.intOrList("eos_token_id", []int{2})
	}
	if lfm3 {
		// No legacy key: tie_embedding is LFM2's.
		c.TieWordEmbeddings = p.bool("tie_word_embeddings", true)
	} else if _, ok := raw["tie_word_embeddings"]; ok {
		c.TieWordEmbeddings = p.bool("tie_word_embeddings", true)
		if _, legacy := p.get("tie_embedding"); legacy && p.err == nil {
			if old := p.bool("tie_embedding", true); p.err == nil && old != c.TieWordEmbeddings {
				p.conflict("tie_word_embeddings", fmt.Sprint(c.TieWordEmbeddings), "tie_embedding", fmt.Sprint(old))
			}
		}
	} else {
		c.TieWordEmbeddings = p.bool("tie_embedding", true)
	}
	if p.err != nil {
		return nil, p.err
	}
	if dense {
		// The legacy configs' duplicates of hidden_size and
		// num_attention_heads: recognised, and refused when they disagree.
		p.sameAs("block_dim", "hidden_size", c.HiddenSize)
		p.sameAs("conv_dim", "hidden_size", c.HiddenSize)
		p.sameAs("conv_dim_out", "hidden_size", c.HiddenSize)
		p.sameAs("num_heads", "num_attention_heads", c.NumHeads)
		if v, ok := p.get("use_pos_enc"); ok && string(v) == "false" {
			p.fail("use_pos_enc", "false (no rotary position encoding) is not supported; every published LFM2 uses RoPE")
		}
		if p.err != nil {
			return nil, p.err
		}
	}
	if c.NumLayers < 0 {
		if _, given := p.get("num_hidden_layers"); given {
			return nil, &Error{File: name, Field: "num_hidden_layers", Msg: fmt.Sprintf("%d is invalid: expected a positive number of layers", c.NumLayers)}
		}
		return nil, &Error{File: name, Field: "num_hidden_layers", Msg: "missing"}
	}
	if lfm3 {
		if err := p.lfm3(c); err != nil {
			return nil, err
		}
	} else if err := p.layerKinds(c); err != nil {
		return nil, err
	} else if err := p.rope(c); err != nil {
		return nil, err
	}
	if v, ok := p.get("rope_parameters"); ok && !lfm3 && bytes.Contains(v, []byte(`"rope_theta"`)) {
		// θ came from rope_parameters; the top-level default did not apply.
		p.defaults = slices.DeleteFunc(p.defaults, func(d string) bool { return strings.HasPrefix(d, "rope_theta=") })
	}
	// head_dim: the explicit key wins (LFM2.5-8B-A1B sets 64).
	if _, ok := raw["head_dim"]; ok {
		c.HeadDim = p.int("head_dim", 0)
	} else if c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	if p.err != nil {
		return nil, p.err
	}
	c.Defaulted, c.Unknown = p.defaults, unknownKeys(raw, knownKeysFor(c.ModelType))
	if err := c.validate(name); err != nil {
		return nil, withDefaults(err, c.Defaulted)
	}
	if lfm3 {
		if err := c.validateLFM3(name); err != nil {
			return nil, withDefaults(err, c.Defaulted)
		}
	}
	return c, nil
}

// withDefaults adds to a validation error which keys took defaults.
func withDefaults(err error, defaulted []string) error {
	if len(defaulted) == 0 {
		return err
	}
	var ce *Error
	if errors.As(err, &ce) {
		ce.Msg += "; config.json does not set " + strings.Join(defaulted, ", ") + " (defaults used)"
	}
	return err
}

func (c *Config) validate(name string) error {
	bad := func(field, format string, args ...any) error {
		return &Error{File: name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	positive := []struct {
		field string
		v     int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumLayers},
		{"num_attention_heads", c.NumHeads}, {"num_key_value_heads", c.NumKVHeads}, {"head_dim", c.HeadDim},
		{"conv_L_cache", c.ConvLCache}, {"max_position_embeddings", c.MaxPositionEmbeddings},
	}
	for _, f := range positive {
		if f.v <= 0 {
			return bad(f.field, "must be positive, got %d", f.v)
		}
	}
	if c.NumHeads%c.NumKVHeads != 0 {
		return bad("num_key_value_heads", "%d does not divide num_attention_heads %d", c.NumKVHeads, c.NumHeads)
	}
	if c.HeadDim%2 != 0 {
		return bad("head_dim", "%d is odd; NeoX RoPE needs an even head dimension", c.HeadDim)
	}
	if c.NumDenseLayers < 0 || c.NumDenseLayers > c.NumLayers {
		return bad("num_dense_layers", "%d is outside [0, %d]", c.NumDenseLayers, c.NumLayers)
	}
	if c.NumDenseLayers > 0 && c.IntermediateSize <= 0 {
		return bad("intermediate_size", "must be positive, got %d", c.IntermediateSize)
	}
	if c.NumDenseLayers < c.NumLayers {
		if c.NumExperts <= 0 {
			return bad("num_experts", "must be positive, got %d", c.NumExperts)
		}
		if c.NumExpertsPerTok <= 0 || c.NumExpertsPerTok > c.NumExperts {
			return bad("num_experts_per_tok", "%d is outside [1, num_experts=%d]", c.NumExpertsPerTok, c.NumExperts)
		}
		if c.MoEIntermediateSize <= 0 {
			return bad("moe_intermediate_size", "must be positive, got %d", c.MoEIntermediateSize)
		}
	}
	if !(c.NormEps > 0) {
		return bad("norm_eps", "must be positive, got %g", c.NormEps)
	}
	if !(c.RopeTheta > 0) {
		return bad("rope_theta", "must be positive, got %g", c.RopeTheta)
	}
	for _, id := range append([]int{c.BOSTokenID, c.PadTokenID}, c.EOSTokenIDs...) {
		if id < 0 || id >= c.VocabSize {
			return bad("bos/eos/pad_token_id", "token id %d is outside the vocabulary [0, %d)", id, c.VocabSize)
		}
	}
	return nil
}

// Dense reports whether no layer has routed experts: a dense LFM2
// (model_type "lfm2") or an LFM3, whose MLPs are all dense SwiGLUs.
func (c *Config) Dense() bool { return c.ModelType == ModelTypeDense || c.ModelType == ModelTypeLFM3 }

// IsMoE reports whether layer i has the routed-expert feed-forward block.
func (c *Config) IsMoE(i int) bool { return i >= c.NumDenseLayers }

// NumMoELayers returns how many layers have routed experts.
func (c *Config) NumMoELayers() int { return c.NumLayers - c.NumDenseLayers }

// KVGroup is the number of query heads that share one key/value head.
func (c *Config) KVGroup() int { return c.NumHeads / c.NumKVHeads }

type parser struct {
	name     string
	raw      map[string]json.RawMessage
	err      error
	defaults []string // key=value of keys that took their default
	read     map[string]bool
}

func (p *parser) defaulted(key, value string) {
	if p.read == nil || p.read[key] {
		return // sub-objects, and keys read twice, are not listed
	}
	p.read[key] = true
	p.defaults = append(p.defaults, key+"="+value)
}

// knownKeys are the config.json keys lfmq reads, and those of Hugging
// Face's configs that do not change the forward pass.
var knownKeys = map[string]bool{
	"model_type": true, "vocab_size": true, "hidden_size": true, "num_hidden_layers": true, "num_attention_heads": true,
	"num_key_value_heads": true, "intermediate_size": true, "moe_intermediate_size": true, "num_dense_layers": true,
	"num_experts": true, "num_experts_per_tok": true, "use_expert_bias": true, "norm_topk_prob": true,
	"routed_scaling_factor": true, "norm_eps": true, "conv_L_cache": true, "conv_bias": true,
	"max_position_embeddings": true, "bos_token_id": true, "pad_token_id": true, "eos_token_id": true,
	"tie_word_embeddings": true, "tie_embedding": true, "layer_types": true, "full_attn_idxs": true,
	"rope_theta": true, "rope_parameters": true, "rope_scaling": true, "head_dim": true,
	// Hugging Face bookkeeping and training-only settings.
	"architectures": true, "torch_dtype": true, "dtype": true, "transformers_version": true, "initializer_range": true,
	"use_cache": true, "auto_map": true, "_name_or_path": true, "output_router_logits": true, "router_aux_loss_coef": true,
	"block_auto_adjust_ff_dim": true, "block_dim": true, "block_ff_dim": true, "block_ffn_dim_multiplier": true,
	"block_mlp_init_scale": true, "block_multiple_of": true, "block_norm_eps": true, "block_out_init_scale": true,
	"block_use_swiglu": true, "block_use_xavier_init": true, "conv_dim": true, "conv_dim_out": true,
	"conv_use_xavier_init": true, "num_heads": true, "use_pos_enc": true, "max_length": true, "quantization_config": true,
}

// unknownKeys returns the keys of raw that lfmq does not know, sorted,
// each with a likely intended known key that raw does not set.
func unknownKeys(raw map[string]json.RawMessage, known map[string]bool) []UnknownKey {
	var out []UnknownKey
	for k := range raw {
		if known[k] {
			continue
		}
		u := UnknownKey{Key: k}
		best := 3
		for known := range known {
			if _, set := raw[known]; set {
				continue
			}
			if d := editdist.Levenshtein(strings.ToLower(k), known); d < best || (d == best && known < u.Suggest) {
				best, u.Suggest = d, known
			}
		}
		if best > 2 {
			u.Suggest = ""
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (p *parser) fail(field, msg string) {
	if p.err == nil {
		p.err = &Error{File: p.name, Field: field, Msg: msg}
	}
}

func (p *parser) get(key string) (json.RawMessage, bool) {
	v, ok := p.raw[key]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func (p *parser) str(key, def string) string {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		p.fail(key, "expected a string, got "+string(v))
		return def
	}
	return s
}

func (p *parser) int(key string, def int) int {
	v, ok := p.get(key)
	if !ok {
		p.defaulted(key, fmt.Sprint(def))
		return def
	}
	return p.intValue(key, v, def)
}

func (p *parser) intValue(key string, v json.RawMessage, def int) int {
	var n json.Number
	// json.Number also accepts a quoted number; config.json must not.
	if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '"' {
		p.fail(key, "expected an integer, got "+string(v))
		return def
	}
	if err := json.Unmarshal(v, &n); err != nil {
		p.fail(key, "expected an integer, got "+string(v))
		return def
	}
	i, err := n.Int64()
	if err != nil || i != int64(int(i)) {
		p.fail(key, "expected an integer, got "+string(v))
		return def
	}
	return int(i)
}

func (p *parser) float(key string, def float64) float64 {
	v, ok := p.get(key)
	if !ok {
		p.defaulted(key, fmt.Sprint(def))
		return def
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		p.fail(key, "expected a number, got "+string(v))
		return def
	}
	return f
}

func (p *parser) bool(key string, def bool) bool {
	v, ok := p.get(key)
	if !ok {
		p.defaulted(key, fmt.Sprint(def))
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		p.fail(key, "expected true or false, got "+string(v))
		return def
	}
	return b
}

// intOrList reads eos_token_id, which checkpoints give as an int or a list.
func (p *parser) intOrList(key string, def []int) []int {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	trimmed := bytes.TrimSpace(v)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil || len(items) == 0 {
			p.fail(key, "expected an integer or a non-empty list of integers, got "+string(v))
			return def
		}
		out := make([]int, len(items))
		for i, it := range items {
			out[i] = p.intValue(key, it, 0)
		}
		return out
	}
	return []int{p.intValue(key, v, 0)}
}

// layerTypes reads layer_types' value v: a list of one string per layer.
func (p *parser) layerTypes(c *Config, v json.RawMessage) ([]string, error) {
	var types []string
	if err := json.Unmarshal(v, &types); err != nil {
		return nil, &Error{File: p.name, Field: "layer_types", Msg: "expected a list of strings, got " + string(v)}
	}
	if len(types) != c.NumLayers {
		return nil, &Error{File: p.name, Field: "layer_types", Msg: fmt.Sprintf("has %d entries, num_hidden_layers is %d", len(types), c.NumLayers)}
	}
	return types, nil
}

func (p *parser) layerKinds(c *Config) error {
	v, hasTypes := p.get("layer_types")
	if hasTypes {
		types, err := p.layerTypes(c, v)
		if err != nil {
			return err
		}
		c.LayerKinds = make([]LayerKind, len(types))
		for i, t := range types {
			switch t {
			case "conv":
				c.LayerKinds[i] = Conv
			case "full_attention":
				c.LayerKinds[i] = Attention
			default:
				return &Error{File: p.name, Field: fmt.Sprintf("layer_types[%d]", i), Msg: fmt.Sprintf("%q is neither \"conv\" nor \"full_attention\"", t)}
			}
		}
	}
	v, hasIdxs := p.get("full_attn_idxs")
	if !hasIdxs {
		if !hasTypes {
			return &Error{File: p.name, Field: "layer_types", Msg: "missing (and no legacy full_attn_idxs)"}
		}
		return nil
	}
	var idxs []int
	if err := json.Unmarshal(v, &idxs); err != nil {
		return &Error{File: p.name, Field: "full_attn_idxs", Msg: "expected a list of integers, got " + string(v)}
	}
	kinds := make([]LayerKind, c.NumLayers)
	for _, i := range idxs {
		if i < 0 || i >= c.NumLayers {
			return &Error{File: p.name, Field: "full_attn_idxs", Msg: fmt.Sprintf("index %d is outside [0, %d)", i, c.NumLayers)}
		}
		kinds[i] = Attention
	}
	if !hasTypes {
		c.LayerKinds = kinds
		return nil
	}
	// Both styles: they must describe the same layers.
	for i, k := range kinds {
		if k != c.LayerKinds[i] {
			return conflictError(p.name, "layer_types", "full_attn_idxs",
				fmt.Sprintf("layer %d is %q in layer_types but %q by full_attn_idxs", i, c.LayerKinds[i].String(), k.String()))
		}
	}
	return nil
}

// rope applies the θ lookup order of docs/model.md §2:
// rope_parameters.rope_theta, then the top-level rope_theta, then 1e6; any
// rope_type but "default" is refused because the engine implements no RoPE scaling.
func (p *parser) rope(c *Config) error {
	c.RopeTheta = p.float("rope_theta", 1e6)
	if p.err != nil {
		return p.err
	}
	for _, key := range []string{"rope_parameters", "rope_scaling"} {
		v, ok := p.get(key)
		if !ok {
			continue
		}
		var rp map[string]json.RawMessage
		if err := json.Unmarshal(v, &rp); err != nil {
			return &Error{File: p.name, Field: key, Msg: "expected an object, got " + string(v)}
		}
		sub := parser{name: p.name, raw: rp}
		typ := sub.str("rope_type", "default")
		if t2 := sub.str("type", ""); t2 != "" && typ == "default" {
			typ = t2
		}
		if typ != "default" {
			return &Error{File: p.name, Field: key + ".rope_type", Msg: fmt.Sprintf("%q is not supported; only \"default\" RoPE", typ)}
		}
		if key == "rope_parameters" {
			c.RopeTheta = sub.float("rope_theta", c.RopeTheta)
		}
		if sub.err != nil {
			var ce *Error
			if errors.As(sub.err, &ce) {
				ce.Field = key + "." + ce.Field
			}
			return sub.err
		}
	}
	return nil
}

// shapeKeys are the keys whose values decide tensor shapes.
var shapeKeys = []string{"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
	"head_dim", "intermediate_size", "moe_intermediate_size", "num_dense_layers", "num_experts", "conv_L_cache",
	"conv_bias", "use_expert_bias", "tie_word_embeddings", "tie_embedding",
	"block_ff_dim", "block_auto_adjust_ff_dim", "block_ffn_dim_multiplier", "block_multiple_of"}

// DefaultedShapeKeys returns the entries of Defaulted whose keys decide
// tensor shapes.
func (c *Config) DefaultedShapeKeys() []string {
	var out []string
	for _, d := range c.Defaulted {
		key, _, _ := strings.Cut(d, "=")
		for _, k := range shapeKeys {
			if k == key {
				out = append(out, d)
			}
		}
	}
	return out
}

// ShapeDefaultsNote says which shape-deciding keys config.json left to
// their defaults, or "" when it sets them all: a dimension that came from
// a default is the likeliest cause of a tensor that does not fit.
func (c *Config) ShapeDefaultsNote() string {
	d := c.DefaultedShapeKeys()
	if len(d) == 0 {
		return ""
	}
	return "config.json does not set " + strings.Join(d, ", ") + ": these dimensions are defaults, not read from the checkpoint"
}

// ExplainShapes adds ShapeDefaultsNote to a tensor-shape error. The
// result wraps err, so errors.As still finds its findings.
func (c *Config) ExplainShapes(err error) error {
	note := c.ShapeDefaultsNote()
	if err == nil || note == "" {
		return err
	}
	return fmt.Errorf("%w\n%s", err, note)
}

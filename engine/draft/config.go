package draft

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/internal/bounded"
)

// Config is a DSpark drafter's config.json (the LFM2.5-*-DSpark layout):
// the Qwen3-style backbone, the block, the taps and the heads.
type Config struct {
	HiddenSize       int
	IntermediateSize int
	NumLayers        int
	NumHeads         int
	NumKVHeads       int
	HeadDim          int
	NormEps          float32
	RopeTheta        float64
	// RopeNeoX is rope_is_neox_style: false (the released drafters) rotates
	// interleaved pairs (2j, 2j+1), true the halves as the target does.
	RopeNeoX bool
	// BlockSize is block_size: the rows of a block (the pending token,
	// then mask tokens) and the tokens it drafts, one per row.
	BlockSize int
	// MaskTokenID fills the block's rows after the first.
	MaskTokenID int
	// TargetLayerIDs are the target's decoder layers tapped, in fc's
	// input order (layer i: the stream after decoder layer i).
	TargetLayerIDs []int
	// NumTargetLayers is the target's depth the drafter was trained on.
	NumTargetLayers int
	// TargetHiddenSize is the target's hidden size (fc's input is
	// len(TargetLayerIDs) of it).
	TargetHiddenSize int
	VocabSize        int
	// MarkovRank is markov_rank, r of markov_w1 [V, r] and markov_w2 [V, r].
	MarkovRank int
	// Confidence is enable_confidence_head; ConfidenceWithMarkov its input
	// [h; markov_w1[prev]] rather than h alone.
	Confidence, ConfidenceWithMarkov bool

	// fields are the keys some fields were read from, for CheckTarget's
	// errors.
	fields configFields
}

// configFields are the keys of config.json that MaskTokenID,
// TargetLayerIDs and NumTargetLayers were read from: under dflash_config
// or, in DeepSpec-style configs, at the top level.
type configFields struct {
	mask, taps, depth string
}

// ConfigError is a drafter's config.json that lfmq cannot run: the file,
// the field and what was expected.
type ConfigError struct {
	File, Field, Msg string
}

// Error implements error.
func (e *ConfigError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("drafter %s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("drafter %s: %s: %s", e.File, e.Field, e.Msg)
}

// maxConfigBytes bounds a config.json read.
const maxConfigBytes = 1 << 20

// LoadConfig reads dir/config.json.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	if _, err := os.Stat(path); err != nil {
		return nil, &ConfigError{File: path, Msg: "no config.json: a drafter directory holds config.json and model.safetensors"}
	}
	data, err := bounded.ReadRegularFile(path, maxConfigBytes)
	if err != nil {
		return nil, &ConfigError{File: path, Msg: err.Error()}
	}
	return ParseConfig(path, data)
}

// ParseConfig parses a drafter's config.json; name is its path, for errors.
func ParseConfig(name string, data []byte) (*Config, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		// json's own messages name Go types ("map[string]json.RawMessage");
		// say what the file holds instead.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &ConfigError{File: name, Msg: fmt.Sprintf("a JSON %s, not an object of config fields", te.Value)}
		}
		return nil, &ConfigError{File: name, Msg: "not a JSON object: " + err.Error()}
	}
	if raw == nil {
		return nil, &ConfigError{File: name, Msg: "null, not an object of config fields"}
	}
	p := parser{file: name, raw: raw}
	var archs []string
	if !p.get("architectures", &archs, false) && p.err == nil {
		return nil, &ConfigError{File: name, Field: "architectures", Msg: `missing (want ["Lfm2DSparkDraftModel"] or ["DSparkDraftModel"])`}
	}
	if p.err == nil && !slices.ContainsFunc(archs, func(a string) bool { return strings.Contains(a, "DSpark") }) {
		return nil, &ConfigError{File: name, Field: "architectures", Msg: fmt.Sprintf("%q is not a DSpark drafter (want Lfm2DSparkDraftModel or DSparkDraftModel)", archs)}
	}
	c := &Config{}
	p.get("hidden_size", &c.HiddenSize, true)
	p.get("intermediate_size", &c.IntermediateSize, true)
	p.get("num_hidden_layers", &c.NumLayers, true)
	p.get("num_attention_heads", &c.NumHeads, true)
	p.get("num_key_value_heads", &c.NumKVHeads, true)
	p.get("head_dim", &c.HeadDim, false)
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	var eps float64 = 1e-6
	p.get("rms_norm_eps", &eps, false)
	c.NormEps = float32(eps)
	c.RopeTheta = 1e6
	p.get("rope_theta", &c.RopeTheta, false)
	var rp struct {
		RopeTheta float64 `json:"rope_theta"`
	}
	if p.get("rope_parameters", &rp, false) && rp.RopeTheta > 0 {
		c.RopeTheta = rp.RopeTheta
	}
	p.get("rope_is_neox_style", &c.RopeNeoX, false)
	p.get("block_size", &c.BlockSize, true)
	p.get("vocab_size", &c.VocabSize, true)
	p.get("markov_rank", &c.MarkovRank, true)
	var mt string
	if p.get("markov_head_type", &mt, false) && mt != "vanilla" {
		p.fail("markov_head_type", fmt.Sprintf("%q: lfmq runs the vanilla Markov head only", mt))
	}
	p.get("enable_confidence_head", &c.Confidence, false)
	c.ConfidenceWithMarkov = true
	p.get("confidence_head_with_markov", &c.ConfidenceWithMarkov, false)
	var lt []string
	if p.get("layer_types", &lt, false) {
		for i, t := range lt {
			if t != "full_attention" {
				p.fail("layer_types", fmt.Sprintf("layer %d is %q; a DSpark drafter's layers are full_attention", i, t))
			}
		}
	}
	// The released drafters keep the tap list, the mask token and the
	// target's depth under dflash_config; DeepSpec-style configs at the
	// top level. dflash_config wins, and errors name the key read.
	var df map[string]json.RawMessage
	p.get("dflash_config", &df, false)
	dp := parser{file: name, prefix: "dflash_config.", raw: df}
	either := func(field string, v any) (key string, ok bool) {
		if dp.get(field, v, false) {
			return dp.prefix + field, true
		}
		if p.get(field, v, false) {
			return field, true
		}
		return dp.prefix + field, false
	}
	maskField, maskSet := either("mask_token_id", &c.MaskTokenID)
	tapsField, _ := either("target_layer_ids", &c.TargetLayerIDs)
	depthField, _ := either("num_target_layers", &c.NumTargetLayers)
	c.fields = configFields{mask: maskField, taps: tapsField, depth: depthField}
	if dp.err != nil && p.err == nil {
		p.err = dp.err
	}
	p.get("target_hidden_size", &c.TargetHiddenSize, false)
	if c.TargetHiddenSize == 0 {
		c.TargetHiddenSize = c.HiddenSize
	}
	if p.err != nil {
		return nil, p.err
	}
	positive := []struct {
		field string
		v     int
	}{
		{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize}, {"num_hidden_layers", c.NumLayers},
		{"num_attention_heads", c.NumHeads}, {"num_key_value_heads", c.NumKVHeads}, {"head_dim", c.HeadDim},
		{"vocab_size", c.VocabSize}, {"markov_rank", c.MarkovRank}, {"target_hidden_size", c.TargetHiddenSize},
	}
	for _, f := range positive {
		if f.v < 1 || f.v > 1<<20 {
			return nil, &ConfigError{File: name, Field: f.field, Msg: fmt.Sprintf("%d; want 1 to 2^20", f.v)}
		}
	}
	switch {
	case c.BlockSize < 1 || c.BlockSize > MaxBlockSize:
		return nil, &ConfigError{File: name, Field: "block_size", Msg: fmt.Sprintf("%d; want 1 to %d rows (the released drafters use 9)", c.BlockSize, MaxBlockSize)}
	case c.NumHeads%c.NumKVHeads != 0:
		return nil, &ConfigError{File: name, Field: "num_key_value_heads", Msg: fmt.Sprintf("%d does not divide num_attention_heads %d", c.NumKVHeads, c.NumHeads)}
	case c.HeadDim%2 != 0:
		return nil, &ConfigError{File: name, Field: "head_dim", Msg: fmt.Sprintf("%d is odd; RoPE rotates pairs", c.HeadDim)}
	case !maskSet:
		return nil, &ConfigError{File: name, Field: maskField, Msg: fmt.Sprintf("missing (nor mask_token_id at the top level): the token id that fills a block's rows after the first, in [0, %d)", c.VocabSize)}
	case c.MaskTokenID < 0 || c.MaskTokenID >= c.VocabSize:
		return nil, &ConfigError{File: name, Field: maskField, Msg: fmt.Sprintf("%d is outside the vocabulary; want 0 to %d", c.MaskTokenID, c.VocabSize-1)}
	case len(c.TargetLayerIDs) == 0:
		msg := "missing or empty"
		if tapsField != "target_layer_ids" {
			msg += " (nor target_layer_ids at the top level)"
		}
		return nil, &ConfigError{File: name, Field: tapsField, Msg: msg + ": the target's layers whose stream the drafter reads, e.g. [1, 3, 4, 6]"}
	case c.NumTargetLayers < 0 || c.NumTargetLayers > 1<<20:
		return nil, &ConfigError{File: name, Field: depthField, Msg: fmt.Sprintf("%d; want the target's number of layers", c.NumTargetLayers)}
	case !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0):
		return nil, &ConfigError{File: name, Field: "rope_theta", Msg: fmt.Sprintf("%g; want a finite number more than 1", c.RopeTheta)}
	case !(c.NormEps > 0) || math.IsInf(float64(c.NormEps), 0):
		return nil, &ConfigError{File: name, Field: "rms_norm_eps", Msg: fmt.Sprintf("%g; want a small positive number such as 1e-6", eps)}
	}
	for i, id := range c.TargetLayerIDs {
		if id < 0 || id > 1<<20 {
			return nil, &ConfigError{File: name, Field: tapsField, Msg: fmt.Sprintf("entry %d is layer %d; want a target layer index, 0 or more", i, id)}
		}
	}
	return c, nil
}

// MaxBlockSize is the largest block_size lfmq runs: the released drafters
// use 9, and a verify of more rows than that costs more than it keeps.
const MaxBlockSize = 16

// CheckTarget reports what of the drafter does not fit the target whose
// config is t: its depth and taps, hidden size and vocabulary. file names
// the drafter's config in the error.
func (c *Config) CheckTarget(file string, t *config.Config) error {
	bad := func(field, msg string) error { return &ConfigError{File: file, Field: field, Msg: msg} }
	f := c.fields
	if f == (configFields{}) { // a Config not made by ParseConfig
		f = configFields{mask: "dflash_config.mask_token_id", taps: "dflash_config.target_layer_ids", depth: "dflash_config.num_target_layers"}
	}
	if c.NumTargetLayers != 0 && c.NumTargetLayers != t.NumLayers {
		return bad(f.depth, fmt.Sprintf("%d, but the target has %d layers: this drafter was trained for another model", c.NumTargetLayers, t.NumLayers))
	}
	for _, id := range c.TargetLayerIDs {
		if id < 0 || id >= t.NumLayers {
			return bad(f.taps, fmt.Sprintf("layer %d is outside the target's %d layers; want 0 to %d", id, t.NumLayers, t.NumLayers-1))
		}
	}
	// hidden_size before target_hidden_size: the latter defaults to the
	// former, and the field the file holds is the one to name.
	switch {
	case c.HiddenSize != t.HiddenSize:
		return bad("hidden_size", fmt.Sprintf("%d, but the target's is %d: the drafter's block rows are the target's embeddings and its logits the target's head", c.HiddenSize, t.HiddenSize))
	case c.TargetHiddenSize != t.HiddenSize:
		return bad("target_hidden_size", fmt.Sprintf("%d, but the target's hidden_size is %d", c.TargetHiddenSize, t.HiddenSize))
	case c.VocabSize != t.VocabSize:
		return bad("vocab_size", fmt.Sprintf("%d, but the target's vocabulary is %d", c.VocabSize, t.VocabSize))
	case c.MaskTokenID < 0 || c.MaskTokenID >= t.VocabSize:
		return bad(f.mask, fmt.Sprintf("%d is outside the target's vocabulary; want 0 to %d", c.MaskTokenID, t.VocabSize-1))
	}
	return nil
}

// parser reads fields of a config object, keeping the first error.
type parser struct {
	file string
	// prefix is put before field names in errors: "dflash_config." for
	// the fields of that object.
	prefix string
	raw    map[string]json.RawMessage
	err    error
}

func (p *parser) fail(field, msg string) {
	if p.err == nil {
		p.err = &ConfigError{File: p.file, Field: p.prefix + field, Msg: msg}
	}
}

// get decodes field into v and reports whether it was present (and not
// null); a required field that is absent is an error.
func (p *parser) get(field string, v any, required bool) bool {
	r, ok := p.raw[field]
	if !ok || string(r) == "null" {
		if required {
			p.fail(field, "missing")
		}
		return false
	}
	if err := json.Unmarshal(r, v); err != nil {
		p.fail(field, fmt.Sprintf("%s is not %s", clip(r), kindOf(v)))
		return false
	}
	return true
}

// clip shortens a value quoted in an error to its first 64 bytes.
func clip(r json.RawMessage) string {
	if len(r) > 64 {
		return string(r[:64]) + "…"
	}
	return string(r)
}

func kindOf(v any) string {
	switch v.(type) {
	case *int:
		return "an integer"
	case *float64:
		return "a number"
	case *bool:
		return "true or false"
	case *string:
		return "a string"
	case *[]int:
		return "a list of integers"
	case *[]string:
		return "a list of strings"
	case *map[string]json.RawMessage:
		return "an object"
	}
	return "an object of the expected fields"
}

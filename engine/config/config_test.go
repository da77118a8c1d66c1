package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

const fixtureDir = "../../testdata/tiny-lfm2-moe/model"

func TestLoadFixture(t *testing.T) {
	c, err := Load(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	wantKinds := "conv conv full_attention conv conv full_attention conv full_attention"
	var kinds []string
	for _, k := range c.LayerKinds {
		kinds = append(kinds, k.String())
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"vocab", c.VocabSize, 8192},
		{"hidden", c.HiddenSize, 128},
		{"layers", c.NumLayers, 8},
		{"kinds", strings.Join(kinds, " "), wantKinds},
		{"heads", c.NumHeads, 4},
		{"kv heads", c.NumKVHeads, 2},
		{"head dim", c.HeadDim, 32},
		{"dense width", c.IntermediateSize, 384},
		{"expert width", c.MoEIntermediateSize, 128},
		{"dense layers", c.NumDenseLayers, 2},
		{"experts", c.NumExperts, 16},
		{"top k", c.NumExpertsPerTok, 4},
		{"theta", c.RopeTheta, 1e6},
		{"eps", c.NormEps, float32(1e-5)},
		{"tied", c.TieWordEmbeddings, true},
		{"eos", c.EOSTokenIDs[0], 7},
		{"max pos", c.MaxPositionEmbeddings, 4096},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if n := len(c.ExpectedTensors()); n != 357 {
		t.Errorf("ExpectedTensors: %d tensors, the fixture has 357", n)
	}
}

func TestParseRules(t *testing.T) {
	base := `"model_type":"lfm2_moe","num_hidden_layers":4,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":100,"num_experts":8,"num_experts_per_tok":2`
	tests := []struct {
		name  string
		json  string
		check func(*Config) string
	}{
		{"legacy full_attn_idxs", `{` + base + `,"full_attn_idxs":[1,3]}`, func(c *Config) string {
			if c.LayerKinds[1] != Attention || c.LayerKinds[3] != Attention || c.LayerKinds[0] != Conv {
				return "layer kinds wrong"
			}
			return ""
		}},
		{"theta from rope_parameters", `{` + base + `,"full_attn_idxs":[],"rope_theta":1,"rope_parameters":{"rope_theta":5000000.0,"rope_type":"default"}}`, func(c *Config) string {
			if c.RopeTheta != 5e6 {
				return "theta not from rope_parameters"
			}
			return ""
		}},
		{"theta top level", `{` + base + `,"full_attn_idxs":[],"rope_theta":20000}`, func(c *Config) string {
			if c.RopeTheta != 20000 {
				return "theta not top-level"
			}
			return ""
		}},
		{"theta default", `{` + base + `,"full_attn_idxs":[]}`, func(c *Config) string {
			if c.RopeTheta != 1e6 {
				return "theta default not 1e6"
			}
			return ""
		}},
		{"explicit head_dim wins", `{` + base + `,"full_attn_idxs":[],"head_dim":8}`, func(c *Config) string {
			if c.HeadDim != 8 {
				return "head_dim not explicit"
			}
			return ""
		}},
		{"head_dim default", `{` + base + `,"full_attn_idxs":[]}`, func(c *Config) string {
			if c.HeadDim != 16 {
				return "head_dim default not H/Hq"
			}
			return ""
		}},
		{"eos list", `{` + base + `,"full_attn_idxs":[],"eos_token_id":[2,7]}`, func(c *Config) string {
			if len(c.EOSTokenIDs) != 2 || c.EOSTokenIDs[1] != 7 {
				return "eos list wrong"
			}
			return ""
		}},
		{"legacy tie_embedding", `{` + base + `,"full_attn_idxs":[],"tie_embedding":false}`, func(c *Config) string {
			if c.TieWordEmbeddings {
				return "tie_embedding ignored"
			}
			if _, ok := c.ExpectedTensors()["lm_head.weight"]; !ok {
				return "untied config does not expect lm_head.weight"
			}
			return ""
		}},
		{"num_dense_layers", `{` + base + `,"full_attn_idxs":[],"num_dense_layers":1,"intermediate_size":96}`, func(c *Config) string {
			if c.IsMoE(0) || !c.IsMoE(1) {
				return "dense/moe split wrong"
			}
			if _, ok := c.ExpectedTensors()["model.layers.0.feed_forward.w1.weight"]; !ok {
				return "dense layer tensors missing"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("config.json", []byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(c); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	base := `"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":100,"num_experts":8,"num_experts_per_tok":2,"num_dense_layers":1,"layer_types":["conv","full_attention"]`
	tests := []struct {
		name, json, field, contains string
	}{
		{"unknown model_type", `{"model_type":"llama",` + base + `}`, "model_type", `"llama" is not supported`},
		{"missing model_type", `{` + base + `}`, "model_type", "missing"},
		{"not an object", `[1]`, "", "not a JSON object"},
		{"bad layer type", `{"model_type":"lfm2_moe",` + strings.Replace(base, `"full_attention"]`, `"mamba"]`, 1) + `}`, "layer_types[1]", `"mamba"`},
		{"layer_types length", `{"model_type":"lfm2_moe",` + strings.Replace(base, `["conv","full_attention"]`, `["conv"]`, 1) + `}`, "layer_types", "1 entries"},
		{"kv heads do not divide", `{"model_type":"lfm2_moe",` + strings.Replace(base, `"num_key_value_heads":2`, `"num_key_value_heads":3`, 1) + `}`, "num_key_value_heads", "does not divide"},
		{"top k above experts", `{"model_type":"lfm2_moe",` + strings.Replace(base, `"num_experts_per_tok":2`, `"num_experts_per_tok":9`, 1) + `}`, "num_experts_per_tok", "outside"},
		{"rope scaling", `{"model_type":"lfm2_moe",` + base + `,"rope_parameters":{"rope_type":"yarn","rope_theta":1}}`, "rope_parameters.rope_type", `"yarn"`},
		{"string where int", `{"model_type":"lfm2_moe",` + strings.Replace(base, `"hidden_size":64`, `"hidden_size":"64"`, 1) + `}`, "hidden_size", "expected an integer"},
		{"missing layers", `{"model_type":"lfm2_moe","layer_types":[]}`, "num_hidden_layers", "missing"},
		{"no layer types", `{"model_type":"lfm2_moe","num_hidden_layers":2}`, "layer_types", "missing"},
		// Given but invalid is not missing (issue 45 item 7).
		{"negative layers", `{"model_type":"lfm2_moe",` + strings.Replace(base, `"num_hidden_layers":2`, `"num_hidden_layers":-1`, 1) + `}`, "num_hidden_layers", "-1 is invalid: expected a positive number of layers"},
		{"negative layers, dense", `{"model_type":"lfm2","num_hidden_layers":-1}`, "num_hidden_layers", "-1 is invalid: expected a positive number of layers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("config.json", []byte(tt.json))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			if ce.Field != tt.field || !strings.Contains(ce.Error(), tt.contains) || !strings.Contains(ce.Error(), "config.json") {
				t.Errorf("err = %q (field %q), want field %q containing %q", ce.Error(), ce.Field, tt.field, tt.contains)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("Load of a missing directory succeeded")
	}
}

func TestStrictness(t *testing.T) {
	base := `"model_type":"lfm2_moe","num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":100,"num_experts":8,"num_experts_per_tok":2,"num_dense_layers":1,"layer_types":["conv","full_attention"],"intermediate_size":96,"moe_intermediate_size":32,"max_position_embeddings":128,"norm_eps":1e-5,"rope_theta":10000,"conv_L_cache":3,"conv_bias":false,"use_expert_bias":true,"norm_topk_prob":true,"routed_scaling_factor":1,"tie_word_embeddings":true,"bos_token_id":1,"eos_token_id":2,"pad_token_id":0`
	tests := []struct {
		name          string
		json          string
		wantUnknown   []UnknownKey
		wantDefaulted []string
		wantWarning   string
	}{
		{name: "complete", json: `{` + base + `}`},
		{name: "typo of a key", json: `{` + strings.Replace(base, `"hidden_size":64`, `"hidden_sise":64`, 1) + `}`,
			wantUnknown: []UnknownKey{{"hidden_sise", "hidden_size"}}, wantDefaulted: []string{"hidden_size=2048"},
			wantWarning: `unknown key "hidden_sise", likely a typo of "hidden_size"`},
		{name: "unrelated key", json: `{` + base + `,"my_note":"x","zzz":1}`,
			wantUnknown: []UnknownKey{{"my_note", ""}, {"zzz", ""}}, wantWarning: "keys lfmq does not use, ignored: my_note, zzz"},
		{name: "missing vocab", json: `{` + strings.Replace(base, `"vocab_size":100,`, ``, 1) + `}`,
			wantDefaulted: []string{"vocab_size=65536"}},
		{name: "theta from rope_parameters", json: `{` + strings.Replace(base, `"rope_theta":10000`, `"rope_parameters":{"rope_theta":5e5,"rope_type":"default"}`, 1) + `}`},
		{name: "huggingface bookkeeping", json: `{` + base + `,"architectures":["Lfm2MoeForCausalLM"],"torch_dtype":"bfloat16","transformers_version":"4.57.0","use_cache":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("config.json", []byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(c.Unknown) != fmt.Sprint(tt.wantUnknown) {
				t.Errorf("Unknown = %v, want %v", c.Unknown, tt.wantUnknown)
			}
			if fmt.Sprint(c.Defaulted) != fmt.Sprint(tt.wantDefaulted) {
				t.Errorf("Defaulted = %v, want %v", c.Defaulted, tt.wantDefaulted)
			}
			w := strings.Join(c.Warnings(), "\n")
			if (tt.wantWarning == "") != (w == "") || !strings.Contains(w, tt.wantWarning) {
				t.Errorf("Warnings = %q, want %q", w, tt.wantWarning)
			}
		})
	}
}

func TestFixtureHasNoWarnings(t *testing.T) {
	c, err := Load(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("the fixture's config warns: %q", w)
	}
	if d := c.DefaultedShapeKeys(); len(d) != 0 {
		t.Errorf("the fixture's config defaults shape keys: %q", d)
	}
}

// A validation error names the keys that took defaults: the cause of a
// bad dimension is often a key that is not there.
func TestValidationNamesDefaults(t *testing.T) {
	_, err := Parse("config.json", []byte(`{"model_type":"lfm2_moe","num_hidden_layers":2,"layer_types":["conv","full_attention"],"num_heads":4,"num_attention_heads":3}`))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *config.Error", err)
	}
	if !strings.Contains(err.Error(), "does not set") || !strings.Contains(err.Error(), "hidden_size=2048") {
		t.Errorf("err = %q, want it to name the defaulted hidden_size", err)
	}
}

func TestExplainShapes(t *testing.T) {
	c, err := Parse("config.json", []byte(`{"model_type":"lfm2_moe","num_hidden_layers":2,"layer_types":["conv","full_attention"],"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_experts":8,"num_experts_per_tok":2}`))
	if err != nil {
		t.Fatal(err)
	}
	inner := &Error{File: "x", Field: "f", Msg: "shape"}
	got := c.ExplainShapes(fmt.Errorf("wrapped: %w", inner))
	var ce *Error
	if !errors.As(got, &ce) || ce != inner {
		t.Errorf("ExplainShapes lost the wrapped error: %v", got)
	}
	if !strings.Contains(got.Error(), "vocab_size=65536") || strings.Contains(got.Error(), "max_position_embeddings") {
		t.Errorf("ExplainShapes = %q, want the defaulted shape keys only", got)
	}
}

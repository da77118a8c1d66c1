package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const denseFixtureDir = "../../testdata/tiny-lfm2/model"

// The dense fixture's config uses LFM2-1.2B's legacy keys: block_ff_dim
// 576 auto-adjusted to 384, full_attn_idxs, tie_embedding, a top-level
// rope_theta (its README gives the values).
func TestLoadDenseFixture(t *testing.T) {
	c, err := Load(denseFixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range c.LayerKinds {
		kinds = append(kinds, k.String())
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"dense", c.Dense(), true},
		{"ffn width", c.IntermediateSize, 384},
		{"dense layers", c.NumDenseLayers, 8},
		{"moe layers", c.NumMoELayers(), 0},
		{"experts", c.NumExperts, 0},
		{"kinds", strings.Join(kinds, " "), "conv conv full_attention conv conv full_attention conv full_attention"},
		{"head dim", c.HeadDim, 32},
		{"theta", c.RopeTheta, 1e6},
		{"tied", c.TieWordEmbeddings, true},
		{"eos", fmt.Sprint(c.EOSTokenIDs), "[7]"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	// 2 global + 8 layers × (2 norms + 3 FFN) + 5 conv × 3 + 3 attention × 6.
	if n := len(c.ExpectedTensors()); n != 75 {
		t.Errorf("ExpectedTensors: %d tensors, the fixture has 75", n)
	}
	for i := range c.NumLayers {
		if c.IsMoE(i) {
			t.Errorf("layer %d is MoE in a dense config", i)
		}
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("the fixture's config warns: %q", w)
	}
	if d := c.DefaultedShapeKeys(); len(d) != 0 {
		t.Errorf("the fixture's config defaults shape keys: %q", d)
	}
}

// denseBase is a dense config without the keys the table varies.
const denseBase = `"model_type":"lfm2","vocab_size":100,"hidden_size":64,"num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":128,"norm_eps":1e-5,"conv_L_cache":3,"conv_bias":false,"bos_token_id":1,"eos_token_id":2,"pad_token_id":0`

// TestDenseKeyStyles: each legacy config and the newer one that means the
// same model load to the same engine config.
func TestDenseKeyStyles(t *testing.T) {
	pairs := []struct {
		name, legacy, newer string
		width               int
	}{
		// LFM2-1.2B's own rule: 12288 → int(2·12288/3) = 8192, ×1.0, multiple of 256.
		{"1.2B width rule",
			`"block_ff_dim":12288,"block_auto_adjust_ff_dim":true,"block_ffn_dim_multiplier":1.0,"block_multiple_of":256,"full_attn_idxs":[1,3],"tie_embedding":true,"rope_theta":1000000.0`,
			`"intermediate_size":8192,"block_auto_adjust_ff_dim":false,"layer_types":["conv","full_attention","conv","full_attention"],"tie_word_embeddings":true,"rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"}`,
			8192},
		// LFM2-350M: 6656 → 4437 → rounded up to 4608.
		{"350M rounds up",
			`"block_ff_dim":6656,"block_auto_adjust_ff_dim":true,"block_ffn_dim_multiplier":1.0,"block_multiple_of":256,"full_attn_idxs":[1,3],"tie_embedding":true,"rope_theta":1000000.0`,
			`"intermediate_size":6656,"block_auto_adjust_ff_dim":true,"block_ffn_dim_multiplier":1.0,"block_multiple_of":256,"layer_types":["conv","full_attention","conv","full_attention"],"tie_word_embeddings":true,"rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"}`,
			4608},
		// Hugging Face's defaults: auto-adjust on, multiplier 1.0, multiple of 256.
		{"adjust defaults",
			`"block_ff_dim":576,"full_attn_idxs":[0],"tie_embedding":false,"rope_theta":5000.0`,
			`"intermediate_size":512,"block_auto_adjust_ff_dim":false,"layer_types":["full_attention","conv","conv","conv"],"tie_word_embeddings":false,"rope_parameters":{"rope_theta":5000.0}`,
			512},
		// A multiplier scales before rounding: int(1.5·384) = 576 → 640.
		{"multiplier",
			`"block_ff_dim":576,"block_ffn_dim_multiplier":1.5,"block_multiple_of":128,"full_attn_idxs":[2],"rope_theta":1000000.0`,
			`"intermediate_size":640,"block_auto_adjust_ff_dim":false,"layer_types":["conv","conv","full_attention","conv"]`,
			640},
		// A null multiplier skips the rounding, as in Hugging Face's Lfm2MLP.
		{"null multiplier",
			`"block_ff_dim":500,"block_ffn_dim_multiplier":null,"block_multiple_of":128,"full_attn_idxs":[2]`,
			`"intermediate_size":333,"block_auto_adjust_ff_dim":false,"layer_types":["conv","conv","full_attention","conv"]`,
			333},
		// The init-only keys of the legacy configs are recognised.
		{"init-only keys",
			`"block_ff_dim":96,"block_auto_adjust_ff_dim":false,"full_attn_idxs":[2],"block_dim":64,"conv_dim":64,"conv_dim_out":64,"num_heads":4,"block_norm_eps":1e-5,"block_use_swiglu":true,"block_mlp_init_scale":1,"block_out_init_scale":1,"block_use_xavier_init":true,"conv_use_xavier_init":true,"use_pos_enc":true,"initializer_range":0.02`,
			`"intermediate_size":96,"block_auto_adjust_ff_dim":false,"layer_types":["conv","conv","full_attention","conv"]`,
			96},
	}
	for _, tt := range pairs {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Parse("legacy.json", []byte(`{`+denseBase+`,`+tt.legacy+`}`))
			if err != nil {
				t.Fatal(err)
			}
			b, err := Parse("new.json", []byte(`{`+denseBase+`,`+tt.newer+`}`))
			if err != nil {
				t.Fatal(err)
			}
			if a.IntermediateSize != tt.width {
				t.Errorf("legacy width %d, want %d", a.IntermediateSize, tt.width)
			}
			if got, want := engineView(a), engineView(b); got != want {
				t.Errorf("legacy and new configs differ:\nlegacy %s\n   new %s", got, want)
			}
			for _, c := range []*Config{a, b} {
				if len(c.Unknown) != 0 {
					t.Errorf("unknown keys %v", c.Unknown)
				}
			}
		})
	}
}

// engineView is what the engine reads of a Config (every field but the
// bookkeeping lists).
func engineView(c *Config) string {
	v := *c
	v.Defaulted, v.Unknown = nil, nil
	return fmt.Sprintf("%+v", v)
}

func TestDenseConfigErrors(t *testing.T) {
	types := `"layer_types":["conv","full_attention","conv","conv"]`
	tests := []struct {
		name, json, field string
		contains          []string
	}{
		{"layer_types vs full_attn_idxs", types + `,"full_attn_idxs":[1,3]`, "layer_types",
			[]string{"full_attn_idxs", `layer 3 is "conv" in layer_types but "full_attention"`}},
		{"intermediate_size vs block_ff_dim", types + `,"intermediate_size":384,"block_ff_dim":576`, "intermediate_size",
			[]string{"block_ff_dim", "intermediate_size is 384, block_ff_dim is 576"}},
		{"tie keys", types + `,"tie_word_embeddings":true,"tie_embedding":false`, "tie_word_embeddings",
			[]string{"tie_embedding"}},
		{"block_dim vs hidden_size", types + `,"block_dim":128`, "block_dim", []string{"hidden_size is 64"}},
		{"num_heads vs num_attention_heads", types + `,"num_heads":8`, "num_heads", []string{"num_attention_heads is 4"}},
		{"bad multiplier", types + `,"block_ffn_dim_multiplier":-1`, "block_ffn_dim_multiplier", []string{"positive"}},
		{"multiplier not a number", types + `,"block_ffn_dim_multiplier":"1"`, "block_ffn_dim_multiplier", []string{"a number or null"}},
		{"zero multiple", types + `,"block_multiple_of":0`, "block_multiple_of", []string{"positive"}},
		{"width string", types + `,"block_ff_dim":"576"`, "block_ff_dim", []string{"expected an integer"}},
		{"zero width", types + `,"intermediate_size":0,"block_auto_adjust_ff_dim":false`, "intermediate_size", []string{"positive"}},
		{"auto adjust not a bool", types + `,"block_auto_adjust_ff_dim":1`, "block_auto_adjust_ff_dim", []string{"true or false"}},
		{"no positions", types + `,"use_pos_enc":false`, "use_pos_enc", []string{"not supported"}},
		{"no layer kinds", `"intermediate_size":64`, "layer_types", []string{"missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("config.json", []byte(`{`+denseBase+`,`+tt.json+`}`))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			if ce.Field != tt.field {
				t.Errorf("field %q, want %q (%v)", ce.Field, tt.field, err)
			}
			for _, want := range append(tt.contains, "config.json") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

// A dense config with the MoE keys is told they are unused, and a typo is
// still hinted.
func TestDenseStrictness(t *testing.T) {
	c, err := Parse("config.json", []byte(`{`+denseBase+`,"layer_types":["conv","conv","conv","full_attention"],"intermediate_size":96,"block_auto_adjust_ff_dim":false,"num_experts":8,"tie_word_embedings":true}`))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(c.Warnings(), "\n")
	for _, want := range []string{`"tie_word_embedings", likely a typo of "tie_word_embeddings"`, "ignored: num_experts"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q lack %q", w, want)
		}
	}
	// A new-style config that leaves the adjustment to its defaults is
	// told so: the width is not what intermediate_size says.
	c, err = Parse("config.json", []byte(`{`+denseBase+`,"layer_types":["conv","conv","conv","full_attention"],"intermediate_size":96}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.IntermediateSize != 256 || !strings.Contains(c.ShapeDefaultsNote(), "block_auto_adjust_ff_dim=true") {
		t.Errorf("width %d, note %q; want 256 (int(2·96/3) = 64 rounded up to 256) and the defaulted adjustment named", c.IntermediateSize, c.ShapeDefaultsNote())
	}
}

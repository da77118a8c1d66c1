package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const lfm3FixtureDir = "../../testdata/tiny-lfm3/model"

// The LFM3 fixture's config (its README, "Config"): ten layers of conv,
// full_attention and sliding_attention, a window of 32, θ 1e6 with half the
// head rotating on full layers, θ 1e4 with all of it on sliding ones.
func TestLoadLFM3Fixture(t *testing.T) {
	c, err := Load(lfm3FixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i := range c.NumLayers {
		types = append(types, c.LayerType(i))
	}
	var windows []string
	for i := range c.NumLayers {
		windows = append(windows, fmt.Sprint(c.LayerWindow(i)))
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"model type", c.ModelType, ModelTypeLFM3},
		{"dense", c.Dense(), true},
		{"types", strings.Join(types, " "), "conv conv full_attention conv sliding_attention conv full_attention conv sliding_attention conv"},
		{"windows", strings.Join(windows, " "), "0 0 0 0 32 0 0 0 32 0"},
		{"hidden", c.HiddenSize, 128},
		{"heads", c.NumHeads, 4},
		{"kv heads", c.NumKVHeads, 2},
		{"head dim", c.HeadDim, 32},
		{"ffn width as is", c.IntermediateSize, 384},
		{"dense layers", c.NumDenseLayers, 10},
		{"conv cache", c.ConvLCache, 7},
		{"full rope", c.LayerRoPE(2), RoPEParams{Theta: 1e6, PartialRotaryFactor: 0.5}},
		{"sliding rope", c.LayerRoPE(4), RoPEParams{Theta: 1e4, PartialRotaryFactor: 1}},
		{"full rotated pairs", c.LayerRoPE(6).RotatedPairs(c.HeadDim), 8},
		{"sliding rotated pairs", c.LayerRoPE(8).RotatedPairs(c.HeadDim), 16},
		{"theta", c.RopeTheta, 1e6},
		{"eps", c.NormEps, float32(1e-5)},
		{"tied", c.TieWordEmbeddings, true},
		{"post norms", c.PostNorms, true},
		{"gate", c.AttnGate, true},
		{"eos", fmt.Sprint(c.EOSTokenIDs), "[7]"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("the fixture's config warns: %q", w)
	}
	if d := c.DefaultedShapeKeys(); len(d) != 0 {
		t.Errorf("the fixture's config defaults shape keys: %q", d)
	}
	// The README's tensor table: 2 global + 10 layers × (4 norms + 3
	// FFN) + 6 conv × 3 + 4 attention × 7.
	exp := c.ExpectedTensors()
	if len(exp) != 118 {
		t.Errorf("ExpectedTensors: %d tensors, the fixture has 118", len(exp))
	}
	for name, want := range map[string]string{
		"model.layers.2.self_attn.gate_proj.weight": "[4 128]",
		"model.layers.4.self_attn.o_proj.weight":    "[128 128]",
		"model.layers.4.self_attn.k_norm.weight":    "[32]",
		"model.layers.1.conv.conv.weight":           "[128 1 7]",
		"model.layers.9.post_operator_norm.weight":  "[128]",
		"model.layers.0.post_ffn_norm.weight":       "[128]",
		"model.embedding_norm.weight":               "[128]",
	} {
		if got := exp[name].String(); got != want {
			t.Errorf("ExpectedTensors[%s] = %s, want %s", name, got, want)
		}
	}
	for _, name := range []string{"lm_head.weight", "model.layers.2.self_attn.out_proj.weight", "model.layers.2.self_attn.q_layernorm.weight"} {
		if _, ok := exp[name]; ok {
			t.Errorf("ExpectedTensors has %s", name)
		}
	}
}

// lfm3Base is a small lfm3 config without layer_types, rope_parameters and
// sliding_window, which the tables vary.
const lfm3Base = `"model_type":"lfm3","vocab_size":100,"hidden_size":64,"num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":96,"max_position_embeddings":128,"norm_eps":1e-5,"conv_L_cache":7,"conv_bias":false,"bos_token_id":1,"eos_token_id":2,"pad_token_id":0,"tie_word_embeddings":true`

const (
	lfm3Types   = `"layer_types":["conv","full_attention","conv","sliding_attention"]`
	lfm3Rope    = `"rope_parameters":{"full_attention":{"partial_rotary_factor":0.5,"rope_theta":1000000.0,"rope_type":"default"},"sliding_attention":{"rope_theta":10000,"rope_type":"default"}}`
	lfm3Window  = `"sliding_window":8`
	lfm3Typical = lfm3Types + "," + lfm3Rope + "," + lfm3Window
)

// TestLFM3ConfigErrors: every config.json lfmq cannot run as LFM3 is
// refused with the file and the key at fault, and what was expected.
func TestLFM3ConfigErrors(t *testing.T) {
	tests := []struct {
		name, json, field string
		contains          []string
	}{
		{"bad layer type", `"layer_types":["conv","full_attention","conv","local_attention"],` + lfm3Rope + "," + lfm3Window,
			"layer_types[3]", []string{`"local_attention"`, `"sliding_attention"`}},
		{"no layer types", lfm3Rope + "," + lfm3Window, "layer_types", []string{"missing"}},
		{"legacy attention indices", lfm3Typical + `,"full_attn_idxs":[1]`, "full_attn_idxs", []string{"layer_types"}},
		{"layer count", `"layer_types":["conv","full_attention"],` + lfm3Rope + "," + lfm3Window, "layer_types", []string{"2 entries", "num_hidden_layers is 4"}},
		{"missing sliding rope entry", lfm3Types + `,"rope_parameters":{"full_attention":{"rope_theta":1e6,"rope_type":"default"}},` + lfm3Window,
			"rope_parameters.sliding_attention", []string{"missing", `layer_types[3] is "sliding_attention"`}},
		{"missing full rope entry", lfm3Types + `,"rope_parameters":{"sliding_attention":{"rope_theta":1e4}},` + lfm3Window,
			"rope_parameters.full_attention", []string{"missing", `layer_types[1]`}},
		{"no rope parameters", lfm3Types + "," + lfm3Window, "rope_parameters", []string{"missing", "full_attention"}},
		{"LFM2-style flat rope parameters", lfm3Types + `,"rope_parameters":{"rope_theta":1e6,"rope_type":"default"},` + lfm3Window,
			"rope_parameters.rope_theta", []string{"unknown key", "one entry per attention kind"}},
		{"unknown key in a rope entry", lfm3Types + `,"rope_parameters":{"full_attention":{"rope_theta":1e6,"factor":8},"sliding_attention":{"rope_theta":1e4}},` + lfm3Window,
			"rope_parameters.full_attention.factor", []string{"unknown key", "rope_theta"}},
		{"rope type", lfm3Types + `,"rope_parameters":{"full_attention":{"rope_theta":1e6},"sliding_attention":{"rope_theta":1e4,"rope_type":"yarn"}},` + lfm3Window,
			"rope_parameters.sliding_attention.rope_type", []string{`"yarn"`, "not supported"}},
		{"no theta", lfm3Types + `,"rope_parameters":{"full_attention":{"rope_type":"default"},"sliding_attention":{"rope_theta":1e4}},` + lfm3Window,
			"rope_parameters.full_attention.rope_theta", []string{"missing"}},
		{"theta one", lfm3Types + `,"rope_parameters":{"full_attention":{"rope_theta":1},"sliding_attention":{"rope_theta":1e4}},` + lfm3Window,
			"rope_parameters.full_attention.rope_theta", []string{"above 1"}},
		{"factor zero", lfm3Types + `,"rope_parameters":{"full_attention":{"rope_theta":1e6,"partial_rotary_factor":0},"sliding_attention":{"rope_theta":1e4}},` + lfm3Window,
			"rope_parameters.full_attention.partial_rotary_factor", []string{"(0, 1]"}},
		{"factor rotating nothing", lfm3Types + `,"rope_parameters":{"full_attention":{"rope_theta":1e6,"partial_rotary_factor":0.05},"sliding_attention":{"rope_theta":1e4}},` + lfm3Window,
			"rope_parameters.full_attention.partial_rotary_factor", []string{"head_dim 16", "no pair"}},
		{"top-level theta", lfm3Typical + `,"rope_theta":1e6`, "rope_theta", []string{"not read", "rope_parameters"}},
		{"no window", lfm3Types + "," + lfm3Rope, "sliding_window", []string{"missing", `layer_types[3] is "sliding_attention"`}},
		{"zero window", lfm3Types + "," + lfm3Rope + `,"sliding_window":0`, "sliding_window", []string{"positive"}},
		{"window string", lfm3Types + "," + lfm3Rope + `,"sliding_window":"8"`, "sliding_window", []string{"expected an integer"}},
		{"eps and its alias disagree", lfm3Typical + `,"rms_norm_eps":1e-6`, "norm_eps", []string{"rms_norm_eps", "disagrees"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("lfm3/config.json", []byte(`{`+lfm3Base+`,`+tt.json+`}`))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			if ce.Field != tt.field || ce.File != "lfm3/config.json" {
				t.Errorf("file %q, field %q; want lfm3/config.json, %q (%v)", ce.File, ce.Field, tt.field, err)
			}
			for _, want := range append(tt.contains, "lfm3/config.json", tt.field) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

// TestLFM3ConfigRules: what an lfm3 config may leave out or spell
// otherwise, and the keys it is told it does not use.
func TestLFM3ConfigRules(t *testing.T) {
	parse := func(t *testing.T, extra string) *Config {
		t.Helper()
		c, err := Parse("config.json", []byte(`{`+lfm3Base+`,`+extra+`}`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("alias rms_norm_eps", func(t *testing.T) {
		base := strings.Replace(lfm3Base, `"norm_eps":1e-5,`, "", 1)
		c, err := Parse("config.json", []byte(`{`+base+`,`+lfm3Typical+`,"rms_norm_eps":1e-6}`))
		if err != nil {
			t.Fatal(err)
		}
		if c.NormEps != 1e-6 || len(c.Unknown) != 0 {
			t.Errorf("eps %g, unknown %v; want 1e-6 from rms_norm_eps and no unknown key", c.NormEps, c.Unknown)
		}
	})
	t.Run("proportional is default's other name", func(t *testing.T) {
		c := parse(t, lfm3Types+`,"rope_parameters":{"full_attention":{"partial_rotary_factor":0.5,"rope_theta":1e6,"rope_type":"proportional"},"sliding_attention":{"rope_theta":1e4}},`+lfm3Window)
		if r := c.LayerRoPE(1); r != (RoPEParams{Theta: 1e6, PartialRotaryFactor: 0.5}) {
			t.Errorf("full rope %+v", r)
		}
	})
	t.Run("no sliding layer needs no window or sliding entry", func(t *testing.T) {
		c := parse(t, `"layer_types":["conv","full_attention","conv","full_attention"],"rope_parameters":{"full_attention":{"rope_theta":1e6}}`)
		if c.Sliding != nil || c.SlidingWindow != 0 || c.LayerWindow(3) != 0 {
			t.Errorf("sliding %v, window %d", c.Sliding, c.SlidingWindow)
		}
	})
	t.Run("unused and mistyped keys warn", func(t *testing.T) {
		base := strings.Replace(lfm3Base, `"head_dim":16,`, "", 1)
		c, err := Parse("config.json", []byte(`{`+base+`,`+lfm3Typical+`,"num_experts":8,"block_ff_dim":576,"head_dims":16}`))
		if err != nil {
			t.Fatal(err)
		}
		w := strings.Join(c.Warnings(), "\n")
		for _, want := range []string{`"head_dims", likely a typo of "head_dim"`, "ignored: block_ff_dim, num_experts"} {
			if !strings.Contains(w, want) {
				t.Errorf("warnings %q lack %q", w, want)
			}
		}
	})
	t.Run("defaults are LFM3-1.7B's", func(t *testing.T) {
		c, err := Parse("config.json", []byte(`{"model_type":"lfm3","num_hidden_layers":4,`+lfm3Typical+`}`))
		if err != nil {
			t.Fatal(err)
		}
		if c.HiddenSize != 2048 || c.IntermediateSize != 7680 || c.ConvLCache != 7 || c.NumHeads != 16 || c.NumKVHeads != 4 || c.HeadDim != 128 ||
			c.VocabSize != 128000 || c.MaxPositionEmbeddings != 262144 || c.BOSTokenID != 124894 || fmt.Sprint(c.EOSTokenIDs) != "[124900]" {
			t.Errorf("hidden %d, width %d, conv %d, heads %d/%d, head_dim %d, vocab %d, positions %d, bos %d, eos %v",
				c.HiddenSize, c.IntermediateSize, c.ConvLCache, c.NumHeads, c.NumKVHeads, c.HeadDim, c.VocabSize, c.MaxPositionEmbeddings, c.BOSTokenID, c.EOSTokenIDs)
		}
		if note := c.ShapeDefaultsNote(); !strings.Contains(note, "intermediate_size=7680") {
			t.Errorf("note %q does not name the defaulted width", note)
		}
	})
}

// TestLFM3FixtureConfigFileErrors: Load names the fixture's own path.
func TestLFM3FixtureConfigFileErrors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(lfm3FixtureDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := strings.Replace(string(data), `"sliding_attention",`, `"sliding",`, 1)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) || !strings.Contains(err.Error(), "layer_types[4]") {
		t.Errorf("err = %v; want the file and layer_types[4] named", err)
	}
}

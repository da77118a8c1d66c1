package draft_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/safetensors"
)

// brokenDrafter writes a copy of the fixture's drafter into a temporary
// directory, its config.json passed through editConfig (nil: unchanged;
// the config is deleted when editConfig returns nil) and its tensors
// through editTensors (nil: the file is copied as is; no file when it
// returns nil).
func brokenDrafter(t *testing.T, editConfig func(map[string]any) map[string]any, editTensors func([]safetensors.Tensor) []safetensors.Tensor) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(drafterDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if editConfig != nil {
		var c map[string]any
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		if c = editConfig(c); c == nil {
			b = nil
		} else if b, err = json.Marshal(c); err != nil {
			t.Fatal(err)
		}
	}
	if b != nil {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(drafterDir, "model.safetensors")
	dst := filepath.Join(dir, "model.safetensors")
	if editTensors == nil {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	f, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		data, err := f.Bytes(n)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: n, DType: info.DType, Shape: info.Shape, Data: append([]byte(nil), data...)})
	}
	if ts = editTensors(ts); ts == nil {
		return dir // no weights at all
	}
	if err := safetensors.Write(dst, ts, f.Metadata()); err != nil {
		t.Fatal(err)
	}
	return dir
}

// set returns a config edit that sets key (a dotted path into objects) to
// v, or deletes it when v is del.
func set(key string, v any) func(map[string]any) map[string]any {
	return func(c map[string]any) map[string]any {
		m := c
		parts := strings.Split(key, ".")
		for _, p := range parts[:len(parts)-1] {
			m = m[p].(map[string]any)
		}
		if v == del {
			delete(m, parts[len(parts)-1])
		} else {
			m[parts[len(parts)-1]] = v
		}
		return c
	}
}

// del marks a key to delete in set.
var del = new(int)

// edits applies several config edits in turn.
func edits(fs ...func(map[string]any) map[string]any) func(map[string]any) map[string]any {
	return func(c map[string]any) map[string]any {
		for _, f := range fs {
			c = f(c)
		}
		return c
	}
}

// tensorEdit returns a tensor edit that replaces tensor name by f's
// result (dropped when f returns nil), and appends extra tensors.
func tensorEdit(name string, f func(safetensors.Tensor) *safetensors.Tensor, extra ...safetensors.Tensor) func([]safetensors.Tensor) []safetensors.Tensor {
	return func(ts []safetensors.Tensor) []safetensors.Tensor {
		var out []safetensors.Tensor
		for _, t := range ts {
			if t.Name == name {
				if n := f(t); n != nil {
					out = append(out, *n)
				}
				continue
			}
			out = append(out, t)
		}
		return append(out, extra...)
	}
}

// zeros is a tensor of zero bytes of the given dtype and shape.
func zeros(name string, dt dtype.DType, shape ...int64) safetensors.Tensor {
	n := int64(dt.Size())
	for _, d := range shape {
		n *= d
	}
	return safetensors.Tensor{Name: name, DType: dt, Shape: shape, Data: make([]byte, n)}
}

// TestLoadErrors: a drafter whose config or tensors lfmq cannot run is
// refused with a *ConfigError or *TensorError that names the file, the
// field or tensor, and what was expected, never a panic and never a Go
// type name.
func TestLoadErrors(t *testing.T) {
	m, err := load.Load(targetDir, load.Options{KVCacheDType: kv.F32, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reshape := func(shape ...int64) func(safetensors.Tensor) *safetensors.Tensor {
		return func(t safetensors.Tensor) *safetensors.Tensor {
			z := zeros(t.Name, t.DType, shape...)
			return &z
		}
	}
	drop := func(safetensors.Tensor) *safetensors.Tensor { return nil }
	cases := []struct {
		name    string
		config  func(map[string]any) map[string]any
		tensors func([]safetensors.Tensor) []safetensors.Tensor
		tensor  bool   // a *TensorError rather than a *ConfigError
		other   bool   // neither: the checkpoint reader's error
		field   string // ConfigError.Field or TensorError.Tensor
		file    string // the file the message names
		want    []string
	}{
		{name: "no config.json", config: func(map[string]any) map[string]any { return nil },
			file: "config.json", want: []string{"no config.json", "model.safetensors"}},
		{name: "not DSpark", config: set("architectures", []string{"Qwen3ForCausalLM"}),
			field: "architectures", file: "config.json", want: []string{`"Qwen3ForCausalLM"`, "Lfm2DSparkDraftModel"}},
		{name: "no architectures", config: set("architectures", del),
			field: "architectures", file: "config.json", want: []string{"missing", "Lfm2DSparkDraftModel"}},
		{name: "block_size 0", config: set("block_size", 0),
			field: "block_size", file: "config.json", want: []string{"0; want 1 to 16"}},
		{name: "block_size too big", config: set("block_size", 17),
			field: "block_size", file: "config.json", want: []string{"17; want 1 to 16"}},
		{name: "block_size a string", config: set("block_size", "5"),
			field: "block_size", file: "config.json", want: []string{`"5" is not an integer`}},
		{name: "mask token outside vocab", config: set("dflash_config.mask_token_id", 8192),
			field: "dflash_config.mask_token_id", file: "config.json", want: []string{"8192 is outside the vocabulary; want 0 to 8191"}},
		{name: "mask token negative, top level", config: edits(set("dflash_config.mask_token_id", del), set("mask_token_id", -3)),
			field: "mask_token_id", file: "config.json", want: []string{"-3 is outside the vocabulary; want 0 to 8191"}},
		{name: "mask token missing", config: edits(set("dflash_config.mask_token_id", del), set("mask_token_id", del)),
			field: "dflash_config.mask_token_id", file: "config.json", want: []string{"missing", "0, 8192"}},
		{name: "mask token not a number", config: set("dflash_config.mask_token_id", "four"),
			field: "dflash_config.mask_token_id", file: "config.json", want: []string{`"four" is not an integer`}},
		{name: "dflash_config not an object", config: set("dflash_config", 4),
			field: "dflash_config", file: "config.json", want: []string{"4 is not an object"}},
		{name: "target_layer_ids missing", config: edits(set("dflash_config.target_layer_ids", del), set("target_layer_ids", del)),
			field: "dflash_config.target_layer_ids", file: "config.json", want: []string{"missing or empty", "target's layers"}},
		{name: "tap layer outside the target", config: set("dflash_config.target_layer_ids", []int{1, 3, 4, 8}),
			field: "dflash_config.target_layer_ids", file: "config.json", want: []string{"layer 8 is outside the target's 8 layers; want 0 to 7"}},
		{name: "tap layer negative", config: set("dflash_config.target_layer_ids", []int{-1, 3}),
			field: "dflash_config.target_layer_ids", file: "config.json", want: []string{"layer -1", "0 or more"}},
		{name: "num_target_layers", config: set("dflash_config.num_target_layers", 6),
			field: "dflash_config.num_target_layers", file: "config.json", want: []string{"6, but the target has 8 layers"}},
		{name: "num_target_layers top level", config: edits(set("dflash_config.num_target_layers", del), set("num_target_layers", 16)),
			field: "num_target_layers", file: "config.json", want: []string{"16, but the target has 8 layers"}},
		{name: "hidden_size", config: edits(set("hidden_size", 64), set("target_hidden_size", del)),
			field: "hidden_size", file: "config.json", want: []string{"64, but the target's is 128"}},
		{name: "target_hidden_size", config: set("target_hidden_size", 256),
			field: "target_hidden_size", file: "config.json", want: []string{"256, but the target's hidden_size is 128"}},
		{name: "vocab_size", config: set("vocab_size", 8000),
			field: "vocab_size", file: "config.json", want: []string{"8000, but the target's vocabulary is 8192"}},
		{name: "kv heads", config: set("num_key_value_heads", 3),
			field: "num_key_value_heads", file: "config.json", want: []string{"3 does not divide num_attention_heads 4"}},
		{name: "markov head", config: set("markov_head_type", "gated"),
			field: "markov_head_type", file: "config.json", want: []string{`"gated"`, "vanilla"}},

		{name: "no weights", tensors: func([]safetensors.Tensor) []safetensors.Tensor { return nil }, other: true,
			want: []string{"no model.safetensors"}},
		{name: "missing tensor", tensors: tensorEdit("layers.1.mlp.up_proj.weight", drop), tensor: true,
			field: "layers.1.mlp.up_proj.weight", want: []string{"missing (want shape [384 128])"}},
		{name: "wrong shape", tensors: tensorEdit("fc.weight", reshape(128, 384)), tensor: true,
			field: "fc.weight", file: "model.safetensors", want: []string{"shape [128 384], want [128 512]"}},
		{name: "wrong vector shape", tensors: tensorEdit("norm.weight", reshape(64)), tensor: true,
			field: "norm.weight", file: "model.safetensors", want: []string{"shape [64], want [128]"}},
		{name: "integer dtype", tensors: tensorEdit("hidden_norm.weight", func(safetensors.Tensor) *safetensors.Tensor {
			z := zeros("hidden_norm.weight", dtype.I32, 128)
			return &z
		}), tensor: true, field: "hidden_norm.weight", file: "model.safetensors", want: []string{"dtype I32; want BF16, F16 or F32"}},
		{name: "unexpected tensor", tensors: tensorEdit("", drop, zeros("lm_head.bias", dtype.BF16, 8192)), tensor: true,
			field: "lm_head.bias", file: "model.safetensors", want: []string{"not a tensor of a DSpark drafter"}},
		{name: "a layer too many", tensors: tensorEdit("", drop, zeros("layers.2.input_layernorm.weight", dtype.BF16, 128)), tensor: true,
			field: "layers.2.input_layernorm.weight", file: "model.safetensors", want: []string{"layer 2", "num_hidden_layers is 2"}},
		{name: "confidence head disabled", config: set("enable_confidence_head", false), tensor: true,
			field: "confidence_head.proj.weight", file: "model.safetensors", want: []string{"enable_confidence_head is false"}},
	}
	goTypes := []string{"map[", "json.", "[]int", "[]string", "*draft", "draft.", "struct", "float64", "Go value"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := brokenDrafter(t, c.config, c.tensors)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic: %v", r)
					}
				}()
				var d *draft.Drafter
				d, err = draft.Load(dir, m)
				if err == nil {
					d.Close()
				}
			}()
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			t.Log(msg)
			switch {
			case c.other:
				// Not a finding of this package's: the checkpoint reader's
				// error, which names the directory.
			case c.tensor:
				// Load reports every tensor finding, joined: the one
				// looked for must be among them.
				found := false
				for _, e := range unjoin(err) {
					var te *draft.TensorError
					if errors.As(e, &te) && te.Tensor == c.field {
						found = true
					}
				}
				if !found {
					t.Errorf("no *TensorError for %s in %q", c.field, msg)
				}
			default:
				var ce *draft.ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("%T, want *draft.ConfigError: %v", err, err)
				}
				if ce.Field != c.field || (c.field != "" && !strings.Contains(msg, c.field+":")) {
					t.Errorf("field %q, want %q", ce.Field, c.field)
				}
			}
			if !strings.Contains(msg, c.field) {
				t.Errorf("%q does not name %s", msg, c.field)
			}
			if want := filepath.Join(dir, c.file); !strings.Contains(msg, want) {
				t.Errorf("%q does not name the file %s", msg, want)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			for _, g := range goTypes {
				if strings.Contains(msg, g) {
					t.Errorf("%q names a Go type (%s)", msg, g)
				}
			}
		})
	}
	// The unedited copy loads: the findings above are the edits'.
	d, err := draft.Load(brokenDrafter(t, nil, nil), m)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

// unjoin flattens errors.Join's tree.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// TestParseConfigErrors covers what only a config file can get wrong:
// not JSON, not an object.
func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct {
		data string
		want string
	}{
		{`{`, "not a JSON object"},
		{`[1, 2]`, "a JSON array, not an object of config fields"},
		{`"config"`, "a JSON string, not an object of config fields"},
		{`null`, "null, not an object of config fields"},
		{`{"architectures": "Lfm2DSparkDraftModel"}`, `architectures: "Lfm2DSparkDraftModel" is not a list of strings`},
		{`{"architectures": ["DSparkDraftModel"], "hidden_size": 1.5}`, "hidden_size: 1.5 is not an integer"},
		{`{"architectures": ["DSparkDraftModel"], "hidden_size": 128}`, "intermediate_size: missing"},
	} {
		_, err := draft.ParseConfig("x/config.json", []byte(c.data))
		var ce *draft.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a *ConfigError", c.data, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "drafter x/config.json: ") || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q, want %q", c.data, msg, c.want)
		}
	}
}

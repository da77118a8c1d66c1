package model_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/safetensors"
)

// tinyTensors returns a copy of every tensor of the fixture checkpoint.
func tinyTensors(t *testing.T) map[string]safetensors.Tensor {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(tinyDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]safetensors.Tensor{}
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		data, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: slices.Clone(data)}
	}
	return out
}

// writeCheckpoint writes a Hugging Face checkpoint of the given tensors with
// the fixture's config.json. shards > 1 splits the tensors round-robin over
// that many files with an index.
func writeCheckpoint(t *testing.T, tensors map[string]safetensors.Tensor, shards int) string {
	t.Helper()
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	if shards <= 1 {
		var list []safetensors.Tensor
		for _, n := range names {
			list = append(list, tensors[n])
		}
		if err := safetensors.Write(filepath.Join(dir, hf.SingleFile), list, nil); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	lists := make([][]safetensors.Tensor, shards)
	weightMap := map[string]string{}
	for i, n := range names {
		lists[i%shards] = append(lists[i%shards], tensors[n])
		weightMap[n] = fmt.Sprintf("model-%05d-of-%05d.safetensors", i%shards+1, shards)
	}
	for s, list := range lists {
		if err := safetensors.Write(filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, shards)), list, nil); err != nil {
			t.Fatal(err)
		}
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, hf.IndexFile), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// configVariant returns a checkpoint directory with the fixture's weights
// (linked, not copied) and its config.json edited by edit.
func configVariant(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	if raw, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join(tinyDir, hf.SingleFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(dir, hf.SingleFile)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLoadErrors: every kind of bad checkpoint gives a typed error that
// names the tensor with the expected and actual shape.
func TestLoadErrors(t *testing.T) {
	const q = "model.layers.2.self_attn.q_proj.weight"
	cases := []struct {
		name    string
		edit    func(map[string]safetensors.Tensor)
		problem string
		tensor  string
		want    config.Shape
		got     config.Shape
	}{
		{"missing", func(m map[string]safetensors.Tensor) { delete(m, "model.layers.3.conv.conv.weight") },
			load.ProblemMissing, "model.layers.3.conv.conv.weight", config.Shape{128, 1, 3}, nil},
		{"shape", func(m map[string]safetensors.Tensor) {
			x := m[q]
			x.Shape, x.Data = []int64{64, 128}, x.Data[:64*128*2]
			m[q] = x
		}, load.ProblemShape, q, config.Shape{128, 128}, config.Shape{64, 128}},
		{"transposed", func(m map[string]safetensors.Tensor) {
			n := "model.layers.0.feed_forward.w2.weight"
			x := m[n]
			x.Shape = []int64{384, 128}
			m[n] = x
		}, load.ProblemShape, "model.layers.0.feed_forward.w2.weight", config.Shape{128, 384}, config.Shape{384, 128}},
		{"dtype", func(m map[string]safetensors.Tensor) {
			x := m[q]
			x.DType, x.Data = dtype.U8, x.Data[:128*128]
			m[q] = x
		}, load.ProblemDType, q, nil, nil},
		{"unexpected", func(m map[string]safetensors.Tensor) {
			x := m["model.embed_tokens.weight"]
			x.Name = "lm_head.weight"
			m[x.Name] = x
		}, load.ProblemUnexpected, "lm_head.weight", nil, config.Shape{8192, 128}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := tinyTensors(t)
			c.edit(ts)
			_, err := load.Load(writeCheckpoint(t, ts, 1), load.Options{})
			var te *load.TensorError
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want a *load.TensorError", err)
			}
			t.Log(te)
			if te.Problem != c.problem || te.Tensor != c.tensor || fmt.Sprint(te.Want) != fmt.Sprint(c.want) || fmt.Sprint(te.Got) != fmt.Sprint(c.got) {
				t.Errorf("got %+v, want %s of %s (want %v, got %v)", te, c.problem, c.tensor, c.want, c.got)
			}
			if !strings.Contains(err.Error(), c.tensor) {
				t.Errorf("message does not name the tensor: %v", err)
			}
		})
	}
	t.Run("model_type", func(t *testing.T) {
		dir := configVariant(t, func(c map[string]any) { c["model_type"] = "lfm2_vl" })
		_, err := load.Load(dir, load.Options{})
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Field != "model_type" || !strings.Contains(err.Error(), `"lfm2_vl"`) {
			t.Fatalf("got %v, want a *config.Error for model_type naming the value", err)
		}
		t.Log(err)
	})
	// A key that is missing, or misspelt, leaves a default that does not
	// fit the tensors: the error says the dimension was a default.
	for _, key := range []string{"vocab_size", "hidden_size"} {
		t.Run("defaulted "+key, func(t *testing.T) {
			dir := configVariant(t, func(c map[string]any) {
				if key == "hidden_size" {
					c["hidden_sise"] = c[key]
				}
				delete(c, key)
			})
			_, err := load.Load(dir, load.Options{})
			var te *load.TensorError
			if !errors.As(err, &te) {
				t.Fatalf("got %v, want a *load.TensorError", err)
			}
			if !strings.Contains(err.Error(), "config.json does not set "+key+"=") || !strings.Contains(err.Error(), "defaults") {
				t.Errorf("the error does not say %s was a default: %v", key, err)
			}
		})
	}
	t.Run("not a checkpoint", func(t *testing.T) {
		if _, err := load.Load(t.TempDir(), load.Options{}); err == nil {
			t.Fatal("empty directory loaded")
		}
	})
}

// TestLoadLayouts: a sharded checkpoint, the transformers-v5 fused expert
// layout, the expert_bias.weight alias with an F32 bias, and F32 matrices
// all load to a model with bit-identical logits.
func TestLoadLayouts(t *testing.T) {
	ids := prompts(t)[2].InputIDs
	_, want := forward(t, tiny(t), ids, model.ForwardOptions{Logits: model.AllLogits})
	cfg := tiny(t).Config
	check := func(t *testing.T, dir string) {
		t.Helper()
		m, err := load.Load(dir, load.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		_, got := forward(t, m, ids, model.ForwardOptions{Logits: model.AllLogits})
		requireSame(t, "logits", got, want)
	}
	t.Run("sharded", func(t *testing.T) { check(t, writeCheckpoint(t, tinyTensors(t), 3)) })
	t.Run("fused experts", func(t *testing.T) {
		ts := tinyTensors(t)
		E, H, Fe := cfg.NumExperts, int64(cfg.HiddenSize), int64(cfg.MoEIntermediateSize)
		for l := cfg.NumDenseLayers; l < cfg.NumLayers; l++ {
			p := config.LayerPrefix(l) + "feed_forward.experts."
			var up, down []byte
			for e := range E {
				for _, w := range []string{"w1", "w3"} {
					n := fmt.Sprintf("%s%d.%s.weight", p, e, w)
					up = append(up, ts[n].Data...)
					delete(ts, n)
				}
				n := fmt.Sprintf("%s%d.w2.weight", p, e)
				down = append(down, ts[n].Data...)
				delete(ts, n)
			}
			ts[p+"gate_up_proj"] = safetensors.Tensor{Name: p + "gate_up_proj", DType: dtype.BF16, Shape: []int64{int64(E), 2 * Fe, H}, Data: up}
			ts[p+"down_proj"] = safetensors.Tensor{Name: p + "down_proj", DType: dtype.BF16, Shape: []int64{int64(E), H, Fe}, Data: down}
		}
		check(t, writeCheckpoint(t, ts, 1))
	})
	t.Run("expert_bias.weight F32 and F32 matrices", func(t *testing.T) {
		ts := tinyTensors(t)
		toF32 := func(name, newName string) {
			x := ts[name]
			v := make([]float32, len(x.Data)/2)
			if err := dtype.ToFloat32(dtype.BF16, x.Data, v); err != nil {
				t.Fatal(err)
			}
			b, err := dtype.FromFloat32(dtype.F32, v)
			if err != nil {
				t.Fatal(err)
			}
			delete(ts, name)
			ts[newName] = safetensors.Tensor{Name: newName, DType: dtype.F32, Shape: x.Shape, Data: b}
		}
		for l := cfg.NumDenseLayers; l < cfg.NumLayers; l++ {
			b := config.LayerPrefix(l) + "feed_forward.expert_bias"
			toF32(b, b+".weight")
		}
		for _, n := range []string{"model.layers.2.self_attn.q_proj.weight", "model.layers.4.feed_forward.experts.7.w2.weight", "model.layers.0.conv.in_proj.weight"} {
			toF32(n, n)
		}
		check(t, writeCheckpoint(t, ts, 1))
	})
}

// TestDecodeWeightBytes checks the per-token weight bytes of the BF16
// fixture against a count made from the config's tensor list: every 2-D
// weight but the embedding and the experts, the tied head once more, and
// num_experts_per_tok experts per MoE layer, two bytes per weight.
func TestDecodeWeightBytes(t *testing.T) {
	m := tiny(t)
	c := m.Config
	var want int64
	for name, s := range c.ExpectedTensors() {
		if len(s) != 2 || strings.Contains(name, ".experts.") {
			continue
		}
		want += 2 * s[0] * s[1] // the embedding counts as the tied head
	}
	want += int64(c.NumMoELayers()) * int64(c.NumExpertsPerTok) * 3 * 2 * int64(c.HiddenSize*c.MoEIntermediateSize)
	if got := m.DecodeWeightBytes(); got != want {
		t.Errorf("DecodeWeightBytes = %d, want %d", got, want)
	}
}

package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/lfmq1"
)

func tinyConfig(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Load("../../testdata/tiny-lfm2-moe/model")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hfTensors lists a per-expert HF checkpoint for cfg, all BF16.
func hfTensors(cfg *config.Config) map[string]SourceTensor {
	out := map[string]SourceTensor{}
	for n, s := range cfg.ExpectedTensors() {
		out[n] = SourceTensor{DType: dtype.BF16, Shape: s}
	}
	return out
}

func TestBuildTiny(t *testing.T) {
	cfg := tinyConfig(t)
	p, err := Build(cfg, hfTensors(cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 358 {
		t.Fatalf("%d entries, want 357 source tensors + lm_head.weight", len(p.Entries))
	}
	files := p.Files()
	want := []string{"experts-02.safetensors", "experts-03.safetensors", "experts-04.safetensors", "experts-05.safetensors",
		"experts-06.safetensors", "experts-07.safetensors", "global.safetensors", "layer-00.safetensors", "layer-01.safetensors",
		"layer-02.safetensors", "layer-03.safetensors", "layer-04.safetensors", "layer-05.safetensors", "layer-06.safetensors", "layer-07.safetensors"}
	if fmt.Sprint(files) != fmt.Sprint(want) {
		t.Errorf("files = %v\nwant %v", files, want)
	}
	cases := []struct {
		name   string
		class  Class
		format lfmq1.TensorFormat
		file   string
		source string
	}{
		{"model.embed_tokens.weight", Kept, lfmq1.BF16, "global.safetensors", "model.embed_tokens.weight"},
		{"lm_head.weight", Head, lfmq1.BFP8, "global.safetensors", "model.embed_tokens.weight"},
		{"model.embedding_norm.weight", Kept, lfmq1.BF16, "global.safetensors", ""},
		{"model.layers.0.conv.in_proj.weight", Dense, lfmq1.BFP8, "layer-00.safetensors", ""},
		{"model.layers.0.conv.conv.weight", Kept, lfmq1.BF16, "layer-00.safetensors", ""},
		{"model.layers.1.feed_forward.w2.weight", Dense, lfmq1.BFP8, "layer-01.safetensors", ""},
		{"model.layers.2.self_attn.k_proj.weight", Dense, lfmq1.BFP8, "layer-02.safetensors", ""},
		{"model.layers.2.self_attn.q_layernorm.weight", Kept, lfmq1.BF16, "layer-02.safetensors", ""},
		{"model.layers.2.feed_forward.gate.weight", Kept, lfmq1.BF16, "layer-02.safetensors", ""},
		{"model.layers.2.feed_forward.expert_bias", Kept, lfmq1.F32, "layer-02.safetensors", ""},
		{"model.layers.7.feed_forward.experts.15.w3.weight", Experts, lfmq1.BFP4, "experts-07.safetensors", ""},
		{"model.layers.7.ffn_norm.weight", Kept, lfmq1.BF16, "layer-07.safetensors", ""},
	}
	byName := map[string]Entry{}
	for _, e := range p.Entries {
		byName[e.Name] = e
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, ok := byName[c.name]
			if !ok {
				t.Fatal("not planned")
			}
			src := c.source
			if src == "" {
				src = c.name
			}
			if e.Class != c.class || e.Format != c.format || e.File != c.file || e.Source != src {
				t.Errorf("got %s %s %s from %s, want %s %s %s from %s", e.Class, e.Format, e.File, e.Source, c.class, c.format, c.file, src)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	cfg := tinyConfig(t)
	tests := []struct {
		name   string
		edit   func(map[string]SourceTensor)
		tensor string
		msg    string
	}{
		{"missing", func(m map[string]SourceTensor) { delete(m, "model.layers.4.conv.out_proj.weight") },
			"model.layers.4.conv.out_proj.weight", "missing"},
		{"wrong shape", func(m map[string]SourceTensor) {
			m["model.layers.2.self_attn.v_proj.weight"] = SourceTensor{DType: dtype.BF16, Shape: []int64{128, 128}}
		}, "model.layers.2.self_attn.v_proj.weight", "shape [128 128], the config implies [64 128]"},
		{"unknown", func(m map[string]SourceTensor) {
			m["model.layers.0.self_attn.rotary_emb.inv_freq"] = SourceTensor{DType: dtype.F32, Shape: []int64{16}}
		}, "model.layers.0.self_attn.rotary_emb.inv_freq", "not an LFM2-MoE tensor"},
		{"integer weight", func(m map[string]SourceTensor) {
			m["model.layers.0.conv.in_proj.weight"] = SourceTensor{DType: dtype.I32, Shape: []int64{384, 128}}
		}, "model.layers.0.conv.in_proj.weight", "dtype I32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := hfTensors(cfg)
			tt.edit(src)
			_, err := Build(cfg, src, Options{})
			var pe *Error
			if !errors.As(err, &pe) || pe.Tensor != tt.tensor || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want a plan.Error for %s containing %q", err, tt.tensor, tt.msg)
			}
		})
	}
}

func TestBuildVariants(t *testing.T) {
	cfg := tinyConfig(t)
	t.Run("expert_bias.weight alias and F32 kept", func(t *testing.T) {
		src := hfTensors(cfg)
		n := "model.layers.5.feed_forward.expert_bias"
		src[n+".weight"] = src[n]
		delete(src, n)
		src["model.embedding_norm.weight"] = SourceTensor{DType: dtype.F32, Shape: []int64{128}}
		p, err := Build(cfg, src, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			if e.Name == n && e.Source != n+".weight" {
				t.Errorf("bias source %s", e.Source)
			}
			if e.Name == "model.embedding_norm.weight" && e.Format != lfmq1.F32 {
				t.Errorf("F32 norm planned as %s", e.Format)
			}
		}
	})
	t.Run("fused experts", func(t *testing.T) {
		src := hfTensors(cfg)
		for i := 2; i < 8; i++ {
			p := config.LayerPrefix(i)
			for e := 0; e < 16; e++ {
				for _, w := range []string{"w1", "w2", "w3"} {
					delete(src, fmt.Sprintf("%sfeed_forward.experts.%d.%s.weight", p, e, w))
				}
			}
			src[p+"feed_forward.experts.gate_up_proj"] = SourceTensor{DType: dtype.BF16, Shape: []int64{16, 256, 128}}
			src[p+"feed_forward.experts.down_proj"] = SourceTensor{DType: dtype.BF16, Shape: []int64{16, 128, 128}}
		}
		p, err := Build(cfg, src, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range p.Entries {
			if e.Layer == 3 && e.Expert == 9 {
				got = append(got, fmt.Sprintf("%s<-%s[%d:%d:%d]", e.Name[len("model.layers.3.feed_forward.experts.9."):], e.Source[len("model.layers.3.feed_forward.experts."):], e.Slice.Expert, e.Slice.RowStart, e.Slice.RowEnd))
			}
		}
		want := "[w1.weight<-gate_up_proj[9:0:128] w2.weight<-down_proj[9:0:128] w3.weight<-gate_up_proj[9:128:256]]"
		if fmt.Sprint(got) != want {
			t.Errorf("fused plan %v\nwant %v", got, want)
		}
	})
}

func TestBuildKeepExperts(t *testing.T) {
	cfg := tinyConfig(t)
	p, err := Build(cfg, hfTensors(cfg), Options{KeepExperts: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Entries {
		want := lfmq1.TensorFormat("")
		switch e.Class {
		case Experts:
			want = lfmq1.BF16
		case Dense, Head:
			want = lfmq1.BFP8
		}
		if want != "" && e.Format != want {
			t.Errorf("%s: %s, want %s", e.Name, e.Format, want)
		}
	}
}

// TestBuildDense: a dense LFM2's FFNs are their own class, BFP4 by default
// or BFP8 on request, each layer's in its ffn-NN file; everything else is
// planned as for LFM2-MoE.
func TestBuildDense(t *testing.T) {
	cfg, err := config.Load("../../testdata/tiny-lfm2/model")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opt, want lfmq1.TensorFormat
	}{{"", lfmq1.BFP4}, {lfmq1.BFP4, lfmq1.BFP4}, {lfmq1.BFP8, lfmq1.BFP8}} {
		t.Run(string(tc.want)+"/"+string(tc.opt), func(t *testing.T) {
			p, err := Build(cfg, hfTensors(cfg), Options{FFNFormat: tc.opt})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Entries) != 76 {
				t.Fatalf("%d entries, want 75 source tensors + lm_head.weight", len(p.Entries))
			}
			classes := map[Class]int{}
			for _, e := range p.Entries {
				classes[e.Class]++
				switch {
				case e.Class == FFN:
					if e.Format != tc.want || e.File != lfmq1.FFNFile(e.Layer, 8) || e.Expert != -1 {
						t.Errorf("%s: %s in %s, want %s in %s", e.Name, e.Format, e.File, tc.want, lfmq1.FFNFile(e.Layer, 8))
					}
				case strings.Contains(e.Name, "feed_forward"):
					t.Errorf("%s is %s, want ffn", e.Name, e.Class)
				}
			}
			// 8 layers × 3 FFN; 5 conv × 2 + 3 attention × 4 projections;
			// the head; 2 global + 16 layer norms + 5 conv kernels + 6 q/k norms.
			want := map[Class]int{FFN: 24, Dense: 22, Head: 1, Kept: 29}
			if fmt.Sprint(classes) != fmt.Sprint(want) {
				t.Errorf("classes %v, want %v", classes, want)
			}
			if files := p.Files(); len(files) != 17 || files[0] != "ffn-00.safetensors" || files[8] != "global.safetensors" {
				t.Errorf("files %v, want ffn-00..07, global, layer-00..07", files)
			}
		})
	}
	if _, err := Build(cfg, hfTensors(cfg), Options{FFNFormat: lfmq1.BF16}); err == nil || !strings.Contains(err.Error(), "bf16") {
		t.Errorf("FFN format bf16: err %v, want a refusal naming it", err)
	}
	// An MoE tensor in a dense checkpoint is refused by name.
	src := hfTensors(cfg)
	src["model.layers.3.feed_forward.gate.weight"] = SourceTensor{DType: dtype.BF16, Shape: []int64{4, 128}}
	var pe *Error
	if _, err := Build(cfg, src, Options{}); !errors.As(err, &pe) || pe.Tensor != "model.layers.3.feed_forward.gate.weight" || !strings.Contains(err.Error(), "not an LFM2 tensor") {
		t.Errorf("extra router: err %v", err)
	}
}

// TestBuildLFM3: an LFM3 checkpoint's MLP goes to BFP4, every attention
// and conv projection to BFP8 — o_proj, LFM3's name for the output
// projection, included — and the per-head output gate (4 rows here, 16 in
// LFM3-1.7B: no BFP tile fits) and the norms stay BF16.
func TestBuildLFM3(t *testing.T) {
	cfg, err := config.Load("../../testdata/tiny-lfm3/model")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(cfg, hfTensors(cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lfmq1.TensorFormat{}
	for _, e := range p.Entries {
		if e.Layer == 2 || e.Layer == 1 {
			got[strings.TrimPrefix(strings.TrimPrefix(e.Name, "model.layers.1."), "model.layers.2.")] = e.Format
		}
	}
	for name, want := range map[string]lfmq1.TensorFormat{
		"self_attn.q_proj.weight":    lfmq1.BFP8,
		"self_attn.k_proj.weight":    lfmq1.BFP8,
		"self_attn.v_proj.weight":    lfmq1.BFP8,
		"self_attn.o_proj.weight":    lfmq1.BFP8,
		"self_attn.gate_proj.weight": lfmq1.BF16,
		"self_attn.q_norm.weight":    lfmq1.BF16,
		"post_operator_norm.weight":  lfmq1.BF16,
		"post_ffn_norm.weight":       lfmq1.BF16,
		"conv.in_proj.weight":        lfmq1.BFP8,
		"conv.out_proj.weight":       lfmq1.BFP8,
		"feed_forward.w1.weight":     lfmq1.BFP4,
		"feed_forward.w2.weight":     lfmq1.BFP4,
		"feed_forward.w3.weight":     lfmq1.BFP4,
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
}

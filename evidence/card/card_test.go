package card

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// sampleInput is a small release: two layers, one MoE layer with two
// experts, a tied head. Shapes are those of the tiny fixture model.
func sampleInput() Input {
	t := func(name string, f lfmq1.TensorFormat, dtype string, shape, stored []int64) lfmq1.TensorEntry {
		return lfmq1.TensorEntry{Name: name, Format: f, DType: dtype, Shape: shape, StoredShape: stored, SHA256: sha}
	}
	m := &lfmq1.Manifest{
		Format: "lfmq-1",
		Quantization: lfmq1.Quantization{
			Experts: lfmq1.ClassSpec{Method: "rtn", Formats: []lfmq1.TensorFormat{lfmq1.BFP4}, Tensors: 6},
			Dense:   lfmq1.ClassSpec{Method: "rtn", Formats: []lfmq1.TensorFormat{lfmq1.BFP8}, Tensors: 2},
			Head:    lfmq1.ClassSpec{Method: "rtn", Formats: []lfmq1.TensorFormat{lfmq1.BFP8}, Tensors: 1},
			Kept:    lfmq1.ClassSpec{Method: "none", Formats: []lfmq1.TensorFormat{lfmq1.BF16, lfmq1.F32}, Tensors: 5},
		},
		Tensors: []lfmq1.TensorEntry{
			t("lm_head.weight", lfmq1.BFP8, "U8", []int64{8192, 128}, []int64{1024, 1088}),
			t("model.embed_tokens.weight", lfmq1.BF16, "BF16", []int64{8192, 128}, []int64{8192, 128}),
			t("model.embedding_norm.weight", lfmq1.BF16, "BF16", []int64{128}, []int64{128}),
			t("model.layers.0.conv.conv.weight", lfmq1.BF16, "BF16", []int64{384, 1, 3}, []int64{384, 1, 3}),
			t("model.layers.0.conv.in_proj.weight", lfmq1.BFP8, "U8", []int64{384, 128}, []int64{48, 1088}),
			t("model.layers.1.feed_forward.expert_bias", lfmq1.F32, "F32", []int64{2}, []int64{2}),
			t("model.layers.1.feed_forward.experts.0.w1.weight", lfmq1.BFP4, "U8", []int64{128, 128}, []int64{16, 576}),
			t("model.layers.1.feed_forward.experts.0.w2.weight", lfmq1.BFP4, "U8", []int64{128, 128}, []int64{16, 576}),
			t("model.layers.1.feed_forward.experts.0.w3.weight", lfmq1.BFP4, "U8", []int64{128, 128}, []int64{16, 576}),
			t("model.layers.1.feed_forward.experts.1.w1.weight", lfmq1.BFP4, "U8", []int64{128, 128}, []int64{16, 576}),
			t("model.layers.1.feed_forward.experts.1.w2.weight", lfmq1.BFP4, "U8", []int64{128, 128}, []int64{16, 576}),
			t("model.layers.1.feed_forward.experts.1.w3.weight", lfmq1.BFP4, "U8", []int64{128, 128}, []int64{16, 576}),
			t("model.layers.1.feed_forward.gate.weight", lfmq1.BF16, "BF16", []int64{2, 128}, []int64{2, 128}),
			t("model.layers.1.self_attn.q_proj.weight", lfmq1.BFP8, "U8", []int64{128, 128}, []int64{16, 1088}),
			t("model.layers.1.operator_norm.weight", lfmq1.BF16, "BF16", []int64{128}, []int64{128}),
		},
	}
	return Input{
		ReleaseID: "LFM2-8B-A1B-lfmq1-v1", Revision: "v1", HubRepo: "lfmq/LFM2-8B-A1B-lfmq1",
		BaseModel: "LiquidAI/LFM2-8B-A1B", BaseRevision: "0123456789abcdef0123456789abcdef01234567",
		LfmqVersion: "1.0.0", Manifest: m, ManifestSHA256: sha,
		Source: Runtime{Path: "runtime/lfmq-src.tar.gz", Size: 100, SHA256: sha},
		Runtime: []Runtime{
			{Platform: "darwin/arm64", Path: "runtime/lfmq-darwin-arm64", Size: 10, SHA256: sha},
			{Platform: "linux/amd64", Path: "runtime/lfmq-linux-amd64", Size: 10, SHA256: sha},
		},
		License:  License{ID: "other", Name: "lfm1.0", Link: "LICENSE"},
		Language: []string{"en", "ar", "zh"},
		Notices:  []string{"NOTICE"},
		Evidence: []string{"evidence/fidelity-rtn.json", "evidence/fidelity-gptq.json"},
		Quality:  []string{"### Fidelity\n\n| candidate | KL |\n|---|---:|\n| noise floor | 0.001 |\n| RTN | 0.05 |\n"},
	}
}

func TestGolden(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Input)
	}{
		{"card", func(*Input) {}},
		{"card-no-evidence", func(in *Input) {
			in.Evidence, in.Quality, in.Notices, in.Language, in.HubRepo, in.BaseRevision = nil, nil, nil, nil, "", ""
			in.License = License{ID: "apache-2.0"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput()
			tt.edit(&in)
			got, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Render(in)
			if !bytes.Equal(got, again) {
				t.Fatal("Render is not deterministic")
			}
			golden := filepath.Join("testdata", tt.name+".golden.md")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("card differs from %s (run go test -update and review the diff):\n%s", golden, got)
			}
		})
	}
}

// TestFrontMatterFields checks the front matter against release.md §5
// independently of the golden file.
func TestFrontMatterFields(t *testing.T) {
	out, err := Render(sampleInput())
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	head, _, ok := strings.Cut(strings.TrimPrefix(s, "---\n"), "\n---\n")
	if !strings.HasPrefix(s, "---\n") || !ok {
		t.Fatalf("no front matter:\n%s", s)
	}
	for _, want := range []string{
		"license: other", "license_name: lfm1.0", "license_link: LICENSE",
		"base_model: LiquidAI/LFM2-8B-A1B", "base_model_relation: quantized",
		"pipeline_tag: text-generation", "language:\n- en\n- ar\n- zh",
		"tags:\n- lfm2\n- lfm2_moe\n- moe\n- quantized\n- lfmq\n- bfp4\n- bfp8\n- tenstorrent",
	} {
		if !strings.Contains(head, want) {
			t.Errorf("front matter lacks %q", want)
		}
	}
	if strings.Contains(head, "library_name") {
		t.Error("front matter has library_name")
	}
	// The card's front matter reads back with our own reader.
	fm, err := ParseFrontMatter(out)
	if err != nil || fm.License != (License{"other", "lfm1.0", "LICENSE"}) || len(fm.Language) != 3 {
		t.Errorf("read back: %+v, %v", fm, err)
	}
	for _, want := range []string{
		"| routed experts (w1, w3, w2) | `bfp4_b` | 6 | 98304 | 4.50 |",
		"| LM head | `bfp8_b` | 1 | 1048576 | 8.50 |",
		"| expert biases | `f32` | 1 | 2 | 32.00 | 8 B |",
		"lfmq verify --release-dir .", "sha256sum -c SHA256SUMS",
		"quantized derivative of `LiquidAI/LFM2-8B-A1B`", "| noise floor | 0.001 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("card lacks %q", want)
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	for name, edit := range map[string]func(*Input){
		"no release id":  func(in *Input) { in.ReleaseID = "" },
		"bad base model": func(in *Input) { in.BaseModel = "x y" },
		"no manifest":    func(in *Input) { in.Manifest = nil },
		"no licence":     func(in *Input) { in.License = License{} },
		"other unnamed":  func(in *Input) { in.License = License{ID: "other"} },
		"yaml in tables": func(in *Input) { in.Quality = []string{"a\n---\nb"} },
	} {
		in := sampleInput()
		edit(&in)
		var ce *Error
		if _, err := Render(in); !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want *card.Error", name, err)
		}
	}
	// Odd values are quoted, not injected.
	in := sampleInput()
	in.License = License{ID: "other", Name: "a: b\nc", Link: "true"}
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `license_name: "a: b\nc"`) || !strings.Contains(string(out), `license_link: "true"`) {
		t.Errorf("values not quoted:\n%s", out[:300])
	}
}

func TestParseFrontMatter(t *testing.T) {
	card := `---
library_name: transformers
license: other
license_name: lfm1.0
license_link: "LICENSE"
language:
- en
- 'ar'
- zh # Chinese
pipeline_tag: text-generation
tags:
  - liquid
extra:
  nested: [1, 2]
---

# LFM2
`
	fm, err := ParseFrontMatter([]byte(card))
	if err != nil {
		t.Fatal(err)
	}
	if fm.License != (License{"other", "lfm1.0", "LICENSE"}) || strings.Join(fm.Language, ",") != "en,ar,zh" {
		t.Errorf("got %+v", fm)
	}
	fm, err = ParseFrontMatter([]byte("---\nlicense: mit\nlanguage: [en, fr]\n---\n"))
	if err != nil || fm.License.ID != "mit" || strings.Join(fm.Language, ",") != "en,fr" {
		t.Errorf("flow list: %+v %v", fm, err)
	}
	if fm, err := ParseFrontMatter([]byte("# no front matter\n")); err != nil || fm.License.ID != "" {
		t.Errorf("no front matter: %+v %v", fm, err)
	}
	for name, bad := range map[string]string{
		"unclosed":    "---\nlicense: mit\n",
		"bad quote":   "---\nlicense: \"mit\n---\n",
		"no colon":    "---\nlicense\n---\n",
		"flow object": "---\nlicense: {a: b}\n---\n",
		"not utf-8":   "---\nlanguage: [\x90]\n---\n", // found by FuzzParseFrontMatter
	} {
		if _, err := ParseFrontMatter([]byte(bad)); !errors.Is(err, ErrFrontMatter) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestDetectLicense(t *testing.T) {
	for text, want := range map[string]string{
		"LFM Open License v1.0\n...": "other",
		"                                 Apache License\n                           Version 2.0, January 2004": "apache-2.0",
		"MIT License\n\nCopyright": "mit",
	} {
		if l, ok := DetectLicense([]byte(text)); !ok || l.ID != want {
			t.Errorf("%q: %+v %v", text[:10], l, ok)
		}
	}
	if _, ok := DetectLicense([]byte("All rights reserved.")); ok {
		t.Error("an unknown licence was recognised")
	}
}

// FuzzParseFrontMatter checks that the source-card reader never panics and
// that what it accepts renders into a card whose front matter reads back the
// same.
func FuzzParseFrontMatter(f *testing.F) {
	f.Add([]byte("---\nlicense: other\nlicense_name: lfm1.0\nlanguage:\n- en\n---\n"))
	f.Add([]byte("---\nlanguage: [en, \"fr\"]\n---\n"))
	f.Add([]byte("---\nlicense: 'it''s'\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fm, err := ParseFrontMatter(data)
		if err != nil {
			if !errors.Is(err, ErrFrontMatter) {
				t.Fatalf("error without ErrFrontMatter: %v", err)
			}
			return
		}
		in := sampleInput()
		in.Language = nil
		for _, l := range fm.Language {
			if l != "" && !strings.ContainsAny(l, "\n\r") {
				in.Language = append(in.Language, l)
			}
		}
		out, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseFrontMatter(out)
		if err != nil {
			t.Fatalf("rendered card does not read back: %v", err)
		}
		if strings.Join(back.Language, "\x00") != strings.Join(in.Language, "\x00") {
			t.Fatalf("languages %q read back as %q", in.Language, back.Language)
		}
	})
}

package card

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
		Evidence: []string{"evidence/fidelity-rtn.json", "evidence/fidelity-gptq.json", "evidence/kl-chat.svg"},
		Plots:    []Plot{{Path: "evidence/kl-chat.svg", Alt: "KL(BF16 ‖ candidate) per token: chat, 2,917 tokens"}},
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
			in.Evidence, in.Plots, in.Quality, in.Notices, in.Language, in.BaseRevision = nil, nil, nil, nil, nil, ""
			in.License = License{ID: "apache-2.0"}
		}},
		// Evidence files without the quality hook: listed, plots shown.
		{"card-evidence-only", func(in *Input) { in.Quality = nil }},
		// A release with a drafter: the drafter section, its pin and
		// its licence line.
		{"card-drafter", func(in *Input) { in.Drafter = sampleDrafter() }},
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

// TestFrontMatterFields checks the front matter against
// docs/release.md, "The model card" independently of the golden file.
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
		"| routed experts (w1, w3, w2) | `bfp4_b` | 6 | 98,304 | 4.50 |",
		"| LM head | `bfp8_b` | 1 | 1,048,576 | 8.50 |",
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
	for _, tt := range []struct {
		name, field string
		edit        func(*Input)
	}{
		{"no release id", "ReleaseID", func(in *Input) { in.ReleaseID = "" }},
		{"bad base model", "BaseModel", func(in *Input) { in.BaseModel = "x y" }},
		// The download commands must name a real repo, never a placeholder.
		{"no hub repo", "HubRepo", func(in *Input) { in.HubRepo = "" }},
		{"bad hub repo", "HubRepo", func(in *Input) { in.HubRepo = "OWNER REPO" }},
		{"no manifest", "Manifest", func(in *Input) { in.Manifest = nil }},
		{"no licence", "License.ID", func(in *Input) { in.License = License{} }},
		{"unknown licence", "License.ID", func(in *Input) { in.License = License{ID: "foo"} }},
		{"licence id case", "License.ID", func(in *Input) { in.License = License{ID: "Apache-2.0"} }},
		{"other unnamed", "License.Name", func(in *Input) { in.License = License{ID: "other"} }},
		{"yaml in tables", "Quality[0]", func(in *Input) { in.Quality = []string{"a\n---\nb"} }},
		{"plot not an image", "Plots[0].Path", func(in *Input) {
			in.Evidence = append(in.Evidence, "evidence/kl.json")
			in.Plots[0].Path = "evidence/kl.json"
		}},
		{"plot path escapes", "Plots[0].Path", func(in *Input) { in.Plots[0].Path = "../kl-chat.svg" }},
		{"plot absolute", "Plots[0].Path", func(in *Input) { in.Plots[0].Path = "/evidence/kl-chat.svg" }},
		{"plot url", "Plots[0].Path", func(in *Input) { in.Plots[0].Path = "https://example.com/kl.svg" }},
		{"plot not evidence", "Plots[0].Path", func(in *Input) { in.Plots[0].Path = "evidence/other.svg" }},
		{"plot without alt", "Plots[0].Alt", func(in *Input) { in.Plots[0].Alt = " \n\t" }},
		{"drafter without manifest", "Drafter.Manifest", func(in *Input) { in.Drafter = sampleDrafter(); in.Drafter.Manifest = nil }},
		{"drafter bad identity", "Drafter.ManifestSHA256", func(in *Input) { in.Drafter = sampleDrafter(); in.Drafter.ManifestSHA256 = "x" }},
		// Acceptance measured on another model says nothing of this one.
		{"drafter of another model", "Drafter.Acceptance", func(in *Input) {
			in.Drafter = sampleDrafter()
			in.Drafter.Acceptance.TargetManifestSHA256 = strings.Repeat("f", 64)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput()
			tt.edit(&in)
			out, err := Render(in)
			var ce *Error
			if !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("err = %v, want a *card.Error for %s", err, tt.field)
			}
			if out != nil {
				t.Error("a card was returned with the error")
			}
		})
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

// TestPlots checks that plots are Markdown images with relative links and
// alternative text that cannot break out of the brackets.
func TestPlots(t *testing.T) {
	for _, tt := range []struct {
		name  string
		plots []Plot
		want  []string
	}{
		{"one", []Plot{{"evidence/kl-chat.svg", "KL per token: chat"}},
			[]string{"### Plots\n\n![KL per token: chat](evidence/kl-chat.svg)\n\n## Download"}},
		{"in order", []Plot{{"evidence/kl-code.svg", "code"}, {"evidence/kl-chat.svg", "chat"}},
			[]string{"![code](evidence/kl-code.svg)\n\n![chat](evidence/kl-chat.svg)\n"}},
		{"png", []Plot{{"evidence/kl.png", "a plot"}}, []string{"![a plot](evidence/kl.png)"}},
		{"alt escaped", []Plot{{"evidence/kl-chat.svg", "a ](x) [b]\n  c \\ <img>"}},
			[]string{`![a \](x) \[b\] c \\ \<img>](evidence/kl-chat.svg)`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput()
			in.Plots = tt.plots
			for _, p := range tt.plots {
				if !slices.Contains(in.Evidence, p.Path) {
					in.Evidence = append(in.Evidence, p.Path)
				}
			}
			out, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("card lacks %q:\n%s", w, out)
				}
			}
		})
	}
	in := sampleInput()
	in.Plots = nil
	if out, _ := Render(in); strings.Contains(string(out), "![") || strings.Contains(string(out), "### Plots") {
		t.Error("a card without plots shows images")
	}
}

// TestCountsFormatted checks that every count in the card's tables has
// thousands separators, like the quality tables of evidence/report.
func TestCountsFormatted(t *testing.T) {
	out, err := Render(sampleInput())
	if err != nil {
		t.Fatal(err)
	}
	bare := regexp.MustCompile(`^[0-9]{4,}$`)
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, cell := range strings.Split(line, "|") {
			if bare.MatchString(strings.TrimSpace(cell)) {
				t.Errorf("count without separators in %q", line)
			}
		}
	}
	for _, want := range []string{"| **total** |  | 15 | 2,262,658 | 11.81 | 3.34 MB |"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("card lacks %q", want)
		}
	}
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {7, "7"}, {999, "999"}, {1000, "1,000"}, {98304, "98,304"},
		{1048576, "1,048,576"}, {-1234, "-1,234"}, {-999, "-999"},
	} {
		if got := count(tt.n); got != tt.want {
			t.Errorf("count(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestKnownLicense(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{"apache-2.0", true}, {"mit", true}, {"other", true}, {"llama3.1", true}, {"openrail++", true},
		{"", false}, {"foo", false}, {"Apache-2.0", false}, {"lfm1.0", false},
	} {
		if got := KnownLicense(tt.id); got != tt.want {
			t.Errorf("KnownLicense(%q) = %v", tt.id, got)
		}
	}
	seen := map[string]bool{}
	for _, id := range LicenseIDs {
		if seen[id] || id != strings.ToLower(id) {
			t.Errorf("LicenseIDs: %q duplicated or not lower case", id)
		}
		seen[id] = true
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

// TestExponentNote: the card says which exponent rules made the
// checkpoint, and points to max when another rule was used; a manifest
// without the rules (the sample's) gets no note.
func TestExponentNote(t *testing.T) {
	for _, tt := range []struct {
		settings string
		want     []string
		not      []string
	}{
		{``, nil, []string{"Shared exponents"}},
		{`{"exponent_rule":"max","dense_exponent_rule":"max"}`,
			[]string{"routed experts `max`, the largest exponent of each group (tt-metal's packer); BFP8 tensors `max`"},
			[]string{"one flag away"}},
		{`{"act_order":true,"exponent_rule":"search","dense_exponent_rule":"max"}`,
			[]string{"routed experts `search`, tt-metal's exponent search", "BFP8 tensors `max`",
				"The plain rule `max`, the reference release's method, is one flag away: `lfmq quantize --exponent-rule max --dense-exponent-rule max`."},
			nil},
	} {
		in := sampleInput()
		in.Manifest.Quantization.Settings = []byte(tt.settings)
		if tt.settings == "" {
			in.Manifest.Quantization.Settings = nil
		}
		out, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("settings %s: card lacks %q", tt.settings, w)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(string(out), w) {
				t.Errorf("settings %s: card has %q", tt.settings, w)
			}
		}
	}
}

// TestWindowsRun: a release with a Windows runtime shows how to run it
// there (a backslash path to the .exe); one without says nothing of it.
func TestWindowsRun(t *testing.T) {
	in := sampleInput()
	got, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(got, []byte("On Windows")) {
		t.Error("a release without a Windows runtime mentions Windows")
	}
	in.Runtime = append(in.Runtime, Runtime{Platform: "windows/amd64", Path: "runtime/lfmq-windows-amd64.exe", Size: 10, SHA256: in.Runtime[1].SHA256})
	if got, err = Render(in); err != nil {
		t.Fatal(err)
	}
	if want := "On Windows: `runtime\\lfmq-windows-amd64.exe launch --release-dir . --sampling-preset agentic --port 8000`.\n"; !bytes.Contains(got, []byte(want)) {
		t.Errorf("card lacks %q", want)
	}
}

// sampleDrafter is a drafter quantized from a hub repository, measured on
// two corpora of sampleInput's model.
func sampleDrafter() *Drafter {
	d := &Drafter{
		Manifest: &lfmq1.Manifest{Format: "lfmq-1", Architecture: "dspark",
			Source: lfmq1.Source{Repo: "LiquidAI/LFM2-8B-A1B-DSpark", Commit: "89abcdef0123456789abcdef0123456789abcdef", ConfigSHA256: sha}},
		ManifestSHA256: strings.Repeat("a", 64),
	}
	a := &d.Acceptance
	a.Setup.Records, a.Setup.PromptTokens, a.Setup.NewTokens = 24, 96, 48
	a.TargetManifestSHA256 = sha
	a.Corpora = []DrafterCorpus{
		{Name: "chat", Records: 24, BF16: AcceptanceRun{455, 2.5604}, Quantized: AcceptanceRun{460, 2.5313}},
		{Name: "code", Records: 24, BF16: AcceptanceRun{425, 2.7482}, Quantized: AcceptanceRun{425, 2.7482}},
	}
	a.BF16, a.Quantized = AcceptanceRun{880, 2.6511}, AcceptanceRun{885, 2.6362}
	return d
}

// TestDrafterSection: the card names the drafter (hub id and commit, or
// the digest of a local one's config), its identity and, per corpus and
// overall, the tokens per verify step of both drafters and the change,
// computed here from the input rather than read from the golden file.
func TestDrafterSection(t *testing.T) {
	for _, tt := range []struct {
		name  string
		edit  func(*Drafter)
		wants []string
	}{
		{"hub", func(*Drafter) {}, []string{
			"[LiquidAI/LFM2-8B-A1B-DSpark](https://huggingface.co/LiquidAI/LFM2-8B-A1B-DSpark) (commit `89abcdef0123456789abcdef0123456789abcdef`)",
			"| drafter manifest sha256 | `" + strings.Repeat("a", 64) + "` |",
			"| chat | 24 | 2.560 | 2.531 | " + fmt.Sprintf("%+.1f%%", 100*(2.5313/2.5604-1)) + " |",
			"| code | 24 | 2.748 | 2.748 | +0.0% |",
			"| all | 48 | 2.651 | 2.636 | " + fmt.Sprintf("%+.1f%%", 100*(2.6362/2.6511-1)) + " |",
			"24 records per corpus", "first 96 tokens", "48 new tokens",
			"- `drafter/`:", "quantized derivative of `LiquidAI/LFM2-8B-A1B-DSpark`", "`--drafter off`",
		}},
		{"local", func(d *Drafter) { d.Manifest.Source = lfmq1.Source{ConfigSHA256: sha} }, []string{
			"read from a local directory (its `config.json` has sha256\n`" + sha + "`)", "quantized derivative of its source drafter",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInput()
			in.Drafter = sampleDrafter()
			tt.edit(in.Drafter)
			out, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(string(out), w) {
					t.Errorf("card lacks %q", w)
				}
			}
		})
	}
	// Without a drafter the card says nothing of one.
	out, err := Render(sampleInput())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(out)), "drafter") {
		t.Error("a card without a drafter mentions one")
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/tokenizer"
	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// lfm3Model is the LFM3 fixture (model_type "lfm3", docs/lfm3.md): the MoE
// fixture's tokenizer, template and prompts, with sliding-window and gated
// attention.
const lfm3Model = "../../testdata/tiny-lfm3/model"

// quantizeLFM3GPTQ writes a GPTQ checkpoint of the LFM3 fixture through the
// command line on 16 windows of the MoE fixture's calibration set (the
// same tokenizer), and checks what its manifest records: the MLP solved by
// GPTQ in BFP4, the conv and attention projections and the head in BFP8,
// the per-head output gates kept.
func quantizeLFM3GPTQ(t *testing.T) string {
	t.Helper()
	out, m, _ := quantizeGPTQ(t, lfm3Model)
	q := m.Quantization
	if m.Architecture != "lfm3" || q.FFN == nil || q.FFN.Method != "gptq" || q.FFN.Tensors != 30 || q.Dense.Tensors != 28 || q.Head.Tensors != 1 {
		t.Fatalf("manifest: architecture %q, ffn %+v, dense %+v, head %+v", m.Architecture, q.FFN, q.Dense, q.Head)
	}
	for _, e := range m.Tensors {
		if strings.HasSuffix(e.Name, ".self_attn.gate_proj.weight") && e.Format != lfmq1.BF16 {
			t.Errorf("%s: %s, want bf16 (one row per head)", e.Name, e.Format)
		}
	}
	return out
}

// TestGenerateLFM3: generate on the BF16 LFM3 fixture, with the float32
// cache of its reference, prints the text of the reference's greedy
// continuation of plain_code (10 tokens past the sliding window before the
// first generated one); on an RTN checkpoint, the engine's own greedy
// tokens.
func TestGenerateLFM3(t *testing.T) {
	ref := fixturePrompt(t, "plain_code")
	tok, err := tokenizer.Load(lfm3Model)
	if err != nil {
		t.Fatal(err)
	}
	rtn, _ := quantizeRTN(t, lfm3Model)
	for _, tc := range []struct {
		name, dir string
		want      []int
	}{
		{"bf16", lfm3Model, referenceGreedy(t, lfm3Model, "plain_code")},
		{"rtn", rtn, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGenerate(t, tok, tc.dir, ref.RenderedText, ref.InputIDs, tc.want)
		})
	}
}

// TestGenerateStatsLFM3: generate --stats counts an LFM3's KV memory as
// it is kept, by hand for the fixture's f32 cache: its two full attention
// layers' keys and values, 2·2·(2 heads·32)·4 = 1,024 bytes per token; its
// two sliding layers, as many bytes a position in window pages of 64, at
// most the pages of 32−1+64+1 = 96 positions plus one (3, 196,608 bytes)
// while decoding, however long the sequence.
func TestGenerateStatsLFM3(t *testing.T) {
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"generate", "--model", lfm3Model, "--prompt", "package main", "--max-tokens", "2", "--stats", "--kv-cache-dtype", "f32"}, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "KV cache f32: 1024 bytes per token in the full attention layers; the sliding layers (window 32) keep at most 196608 bytes when decoding"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stats lack %q:\n%s", want, stderr)
	}
}

// TestScoreLFM3: lfmq score of the LFM3 fixture's RTN and GPTQ checkpoints
// against its BF16 model: GPTQ's KL is below RTN's on each corpus and at
// most 0.7× RTN's over all of them (issue 44's bar). Then the GPTQ
// checkpoint, served, scores over HTTP as it does in process, every field
// equal, and eval's choice task gives the same scores through the server
// as in process.
func TestScoreLFM3(t *testing.T) {
	rtn, _ := quantizeRTN(t, lfm3Model)
	gptq := quantizeLFM3GPTQ(t)
	corpora := []string{"chat", "code"}
	res := scoreResultsOf(t, lfm3Model, []string{"--candidate", "rtn=" + rtn, "--candidate", "gptq=" + gptq}, corpora, "4")
	for _, c := range append(corpora, evidence.AllCorpora) {
		r, g := res["rtn/"+c], res["gptq/"+c]
		t.Logf("%s: KL mean RTN %.5f, GPTQ %.5f (%.3fx) over %d tokens", c, r.KLMean, g.KLMean, g.KLMean/r.KLMean, g.Tokens)
		if g.Tokens == 0 || g.KLMean >= r.KLMean {
			t.Errorf("%s: KL mean GPTQ %v, RTN %v over %d tokens; want GPTQ below", c, g.KLMean, r.KLMean, g.Tokens)
		}
	}
	if r, g := res["rtn/"+evidence.AllCorpora], res["gptq/"+evidence.AllCorpora]; g.KLMean > 0.7*r.KLMean {
		t.Errorf("KL mean over all corpora: GPTQ %v is %.3fx RTN's %v; want at most 0.7x", g.KLMean, g.KLMean/r.KLMean, r.KLMean)
	}

	base, stop := startServe(t, "--model", gptq, "--api-key", "k")
	res = scoreResultsOf(t, lfm3Model, []string{"--candidate", "served=" + base, "--candidate", "gptq=" + gptq, "--api-key", "k"}, []string{"chat"}, "2")
	checkSameResult(t, "", res["served/chat"], res["gptq/chat"])

	t.Setenv("LFMQ_API_KEY", "k")
	a, b := evalChoiceLocalAndServed(t, gptq, base)
	for i, x := range a.Runs[0].Items {
		y := b.Runs[0].Items[i]
		if len(x.Scores) < 2 || !slices.Equal(x.Scores, y.Scores) || x.Answer != y.Answer || x.Correct != y.Correct {
			t.Errorf("item %s: in process %+v, served %+v", x.ID, x, y)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d", code)
	}
}

// TestReleaseLFM3: a release of the LFM3 fixture's RTN checkpoint builds
// reproducibly (two quantizations and two builds give the same bytes),
// verifies, and fails verification with one byte of a layer file flipped;
// its card names lfm3 and keeps the output gates apart; it publishes to
// the test hub, downloads by hub id and launches from the download: the
// release's runtime serves it.
func TestReleaseLFM3(t *testing.T) {
	releases := buildReleasePair(t, lfm3Model, "tiny-lfm3")
	card, _ := os.ReadFile(filepath.Join(releases[0], "README.md"))
	for _, want := range []string{"tags:\n- lfm3\n- quantized\n", "the FFN weights in BFP4", "| ffn | rtn | bfp4_b | 30 |", "| dense | rtn | bfp8_b | 28 |",
		"| attention output gates (one row per head) | `bf16` | 4 |", "| attention q/k/v/out projections | `bfp8_b` | 16 |"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	for _, bad := range []string{"- lfm2\n", "lfm2_moe", "routed experts", "projections | `bf16`"} {
		if strings.Contains(string(card), bad) {
			t.Errorf("README.md of an lfm3 release says %q", bad)
		}
	}

	// One flipped byte in the second build's attention layer file.
	p := filepath.Join(releases[1], "checkpoint", "layer-02.safetensors")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	os.WriteFile(p, data, 0o644)
	ios, stdout, _ := testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", releases[1]}, ios); code != exitMismatch || !strings.Contains(stdout.String(), "hash      checkpoint/layer-02.safetensors") {
		t.Errorf("verify of a flipped byte: exit %d, want %d:\n%s", code, exitMismatch, stdout)
	}

	// The release's runtime serves the lfm3 checkpoint.
	publishAndLaunch(t, filepath.Join(releases[0], "checkpoint"))
}

// TestHubIDLFM3: the LFM3 fixture given by its hub id is fetched into the
// Hugging Face cache; quantize of it makes the tensors that quantize of
// its directory makes, its manifest naming the repository and commit, and
// generate of it, offline from the cache, prints what generate of the
// directory prints.
func TestHubIDLFM3(t *testing.T) {
	const repo = "LiquidAI/tiny-lfm3"
	url, commit, _ := hubWithModel(t, repo, lfm3Model)
	tmp := t.TempDir()
	for _, tc := range []struct{ model, out string }{{repo, "hub"}, {lfm3Model, "dir"}} {
		ios, _, stderr := testStreams()
		if code := run(context.Background(), []string{"quantize", "--model", tc.model, "--endpoint", url, "--out", filepath.Join(tmp, tc.out), "--method", "rtn"}, ios); code != 0 {
			t.Fatalf("quantize --model %s: exit %d: %s", tc.model, code, stderr)
		}
	}
	hub, _ := readManifest(t, filepath.Join(tmp, "hub"))
	dir, _ := readManifest(t, filepath.Join(tmp, "dir"))
	if hub.Architecture != "lfm3" || hub.Source.Repo != repo || hub.Source.Commit != commit || !slices.Equal(hub.Source.Files, dir.Source.Files) {
		t.Errorf("manifest of --model %s: architecture %q, source %+v", repo, hub.Architecture, hub.Source)
	}
	if len(hub.Tensors) != len(dir.Tensors) {
		t.Fatalf("%d tensors from the hub, %d from the directory", len(hub.Tensors), len(dir.Tensors))
	}
	for i := range hub.Tensors {
		if a, b := hub.Tensors[i], dir.Tensors[i]; a.Name != b.Name || a.SHA256 != b.SHA256 || a.Format != b.Format {
			t.Errorf("tensor %s (%s) from the hub, %s (%s) from the directory", a.Name, a.Format, b.Name, b.Format)
		}
	}

	gen := []string{"--prompt", "package main", "--max-tokens", "12"}
	var outs []string
	for _, model := range []string{lfm3Model, repo} {
		ios, stdout, stderr := testStreams()
		if code := run(context.Background(), append([]string{"generate", "--model", model, "--endpoint", "http://127.0.0.1:1"}, gen...), ios); code != 0 {
			t.Fatalf("generate --model %s: exit %d: %s", model, code, stderr)
		}
		outs = append(outs, stdout.String())
	}
	if outs[0] == "" || outs[0] != outs[1] {
		t.Errorf("generate of the directory %q, of the hub id %q", outs[0], outs[1])
	}
}

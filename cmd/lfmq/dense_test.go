package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/tokenizer"
	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
)

// denseReference returns the dense fixture's reference greedy ids of the
// named prompt (its prompts have the MoE fixture's input ids).
func denseReference(t *testing.T, name string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(denseModel, "..", "reference", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Prompts []struct {
			Name      string `json:"name"`
			InputIDs  []int  `json:"input_ids"`
			GreedyIDs []int  `json:"greedy_ids"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	for _, p := range ref.Prompts {
		if p.Name == name {
			if !slices.Equal(p.InputIDs, fixturePrompt(t, name).InputIDs) {
				t.Fatalf("%s: the fixtures' input ids differ", name)
			}
			return p.GreedyIDs
		}
	}
	t.Fatalf("no prompt %q", name)
	return nil
}

// quantizeDenseGPTQ writes a GPTQ checkpoint of the dense fixture through
// the command line, on 16 calibration windows.
func quantizeDenseGPTQ(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gptq")
	args := []string{"quantize", "--model", denseModel, "--out", out, "--calib", filepath.Join(tinyModel, "..", "calibration", "calibration.jsonl"),
		"--calib-seqs", "16", "--calib-len", "256"}
	for _, c := range []string{"chat", "instruct", "code", "book"} {
		args = append(args, "--eval-corpus", c+"="+filepath.Join(tinyCorpora, c+".jsonl"))
	}
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), args, ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout.String(), "GPTQ loss / RTN loss under the same Hessian (each layer's FFN), 4096 calibration tokens") {
		t.Errorf("quantize output lacks the GPTQ summary:\n%s", stdout)
	}
	m, _, err := lfmq1.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Architecture != "lfm2" || m.Quantization.FFN == nil || m.Quantization.FFN.Method != "gptq" {
		t.Fatalf("manifest: architecture %q, ffn %+v", m.Architecture, m.Quantization.FFN)
	}
	return out
}

// TestGenerateDense: generate on the BF16 dense fixture, with the float32
// cache of the reference mode, prints the text of its float32 reference's
// greedy continuation; on a GPTQ checkpoint of it, the engine's own greedy
// tokens.
func TestGenerateDense(t *testing.T) {
	ref := fixturePrompt(t, "plain_code")
	greedy := denseReference(t, "plain_code")
	tok, err := tokenizer.Load(denseModel)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		want      []int
	}{
		{"bf16", denseModel, greedy},
		{"gptq", quantizeDenseGPTQ(t), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = engineGreedy(t, tc.dir, ref.InputIDs, 32)
			}
			text, err := tok.Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			ios, stdout, stderr := testStreams()
			if code := run(context.Background(), []string{"generate", "--model", tc.dir, "--prompt", ref.RenderedText, "--max-tokens", "32", "--kv-cache-dtype", "f32"}, ios); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := strings.TrimSuffix(stdout.String(), "\n"); got != text {
				t.Errorf("generate\n got %q\nwant %q", got, text)
			}
			if tc.name == "gptq" {
				agree := teacherForcedAgreement(t, tc.dir, ref.InputIDs, greedy)
				t.Logf("GPTQ argmax agrees with the BF16 reference continuation at %d of %d positions", agree, len(greedy))
			}
		})
	}
}

// TestScoreDense: lfmq score of the dense fixture's RTN and GPTQ checkpoints:
// GPTQ's KL to the BF16 model is below RTN's on every corpus. Then the GPTQ
// checkpoint served over HTTP scores as it does in process.
func TestScoreDense(t *testing.T) {
	rtn, _ := quantizeRTN(t, denseModel)
	gptq := quantizeDenseGPTQ(t)
	corpora := []string{"chat", "instruct", "code", "book"}
	res := scoreResults(t, []string{"--candidate", "rtn=" + rtn, "--candidate", "gptq=" + gptq}, corpora, "4")
	for _, c := range append(corpora, evidence.AllCorpora) {
		r, g := res["rtn/"+c], res["gptq/"+c]
		t.Logf("%s: KL mean RTN %.5f, GPTQ %.5f over %d tokens", c, r.KLMean, g.KLMean, g.Tokens)
		if g.Tokens == 0 || g.KLMean >= r.KLMean {
			t.Errorf("%s: KL mean GPTQ %v, RTN %v over %d tokens; want GPTQ below", c, g.KLMean, r.KLMean, g.Tokens)
		}
	}

	base, stop := startServe(t, "--model", gptq, "--api-key", "k")
	res = scoreResults(t, []string{"--candidate", "served=" + base, "--candidate", "gptq=" + gptq, "--api-key", "k"}, []string{"chat"}, "2")
	{
		s, g := res["served/chat"], res["gptq/chat"]
		s.Candidate, g.Candidate = "", ""
		sj, _ := json.Marshal(s)
		gj, _ := json.Marshal(g)
		if string(sj) != string(gj) || g.Tokens == 0 {
			t.Errorf("served\n%s\nin process\n%s", sj, gj)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d", code)
	}
}

// scoreResults runs lfmq score of the dense fixture with the arguments
// extra (its candidates) on the fixture corpora named, records records of
// each at context 128, and returns the results by "candidate/corpus".
func scoreResults(t *testing.T, extra, corpora []string, records string) map[string]evidence.Result {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ev.json")
	args := append([]string{"score", "--reference", denseModel, "--ctx", "128", "--max-records", records, "--out", out}, extra...)
	for _, c := range corpora {
		args = append(args, "--corpus", c+"="+filepath.Join(tinyCorpora, c+".jsonl"))
	}
	ios, _, stderr := testStreams()
	if code := run(context.Background(), args, ios); code != 0 {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	f, err := evidence.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]evidence.Result{}
	for _, r := range f.Results {
		res[r.Candidate+"/"+r.Corpus] = r
	}
	return res
}

// TestReleaseDense: a release of the dense fixture builds reproducibly (two
// quantizations and two builds give the same bytes), verifies, has a card
// for a dense model, publishes to the test hub, downloads from it and
// launches from the download: the release's runtime serves it.
func TestReleaseDense(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	if runtime.GOOS == "windows" {
		t.Skip("exec replaces the process on unix only")
	}
	tmp := t.TempDir()
	lic := filepath.Join(tmp, "LICENSE")
	os.WriteFile(lic, []byte(bundletest.License), 0o644)
	src := bundletest.Source(t)
	var releases [2]string
	for i := range releases {
		ckpt, _ := quantizeRTN(t, denseModel)
		releases[i] = filepath.Join(tmp, fmt.Sprint("release", i))
		ios, stdout, stderr := testStreams()
		args := []string{"release", "build", "--checkpoint", ckpt, "--out", releases[i], "--license", lic,
			"--base-model", "test/tiny-lfm2", "--hub-repo", "test/tiny-lfm2-lfmq1", "--platforms", "linux/amd64", "--source", src}
		if code := run(context.Background(), args, ios); code != 0 {
			t.Fatalf("release build exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout.String(), "release id       tiny-lfm2-lfmq1-v1") {
			t.Errorf("release build output:\n%s", stdout)
		}
	}
	a, _ := os.ReadFile(filepath.Join(releases[0], "SHA256SUMS"))
	b, _ := os.ReadFile(filepath.Join(releases[1], "SHA256SUMS"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("two builds differ:\n%s\n%s", a, b)
	}
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", releases[0]}, ios); code != 0 {
		t.Fatalf("verify exit %d: %s", code, stderr)
	}
	card, _ := os.ReadFile(filepath.Join(releases[0], "README.md"))
	for _, want := range []string{"- lfm2\n- quantized\n", "the FFN weights in BFP4", "| ffn | rtn | bfp4_b | 24 |", "| dense FFN (w1, w3, w2) | `bfp4_b` | 24 |"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	for _, bad := range []string{"lfm2_moe", "routed experts"} {
		if strings.Contains(string(card), bad) {
			t.Errorf("README.md of a dense release says %q", bad)
		}
	}

	// Publish a release whose runtime is this build, download it, and
	// launch the download: the built binary execs the release's runtime,
	// which serves the dense checkpoint.
	rel := servingReleaseOf(t, filepath.Join(releases[0], "checkpoint"))
	h := newTestHub(t)
	t.Setenv("HF_TOKEN", publishToken)
	t.Setenv("SSH_AUTH_SOCK", "")
	cache := t.TempDir()
	for _, args := range [][]string{
		{"publish", "--release-dir", rel, "--repo", publishRepo, "--endpoint", h.url, "--create"},
		{"download", h.url + "/" + publishRepo, "--revision", "v1", "--cache-root", cache},
	} {
		ios, _, stderr := testStreams()
		if code := run(context.Background(), args, ios); code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, stderr)
		}
	}
	port := freePort(t)
	launchServes(t, port, "launch", "--cache-root", cache, "--repo", publishRepo, "--revision", "v1", "--port", fmt.Sprint(port))
}

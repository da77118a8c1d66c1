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

// referenceGreedy returns the reference greedy ids of the named prompt of
// the fixture model (the dense or the LFM3 one, whose prompts have the MoE
// fixture's input ids, checked here).
func referenceGreedy(t *testing.T, model, name string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(model, "..", "reference", "prompts.json"))
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

// quantizeGPTQ writes a GPTQ checkpoint of model through the command line
// on 16 windows of the MoE fixture's calibration set (the fixtures share
// its tokenizer), with the arguments extra, and returns its directory, its
// manifest and what quantize printed.
func quantizeGPTQ(t *testing.T, model string, extra ...string) (string, *lfmq1.Manifest, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "gptq")
	args := []string{"quantize", "--model", model, "--out", out, "--calib", filepath.Join(tinyModel, "..", "calibration", "calibration.jsonl"),
		"--calib-seqs", "16", "--calib-len", "256"}
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), append(args, extra...), ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	m, _, err := lfmq1.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, m, stdout.String()
}

// quantizeDenseGPTQ writes a GPTQ checkpoint of the dense fixture through
// the command line, on 16 calibration windows.
func quantizeDenseGPTQ(t *testing.T) string {
	t.Helper()
	var corpora []string
	for _, c := range []string{"chat", "instruct", "code", "book"} {
		corpora = append(corpora, "--eval-corpus", c+"="+filepath.Join(tinyCorpora, c+".jsonl"))
	}
	out, m, stdout := quantizeGPTQ(t, denseModel, corpora...)
	if !strings.Contains(stdout, "GPTQ loss / RTN loss under the same Hessian (each layer's FFN), 4096 calibration tokens") {
		t.Errorf("quantize output lacks the GPTQ summary:\n%s", stdout)
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
	greedy := referenceGreedy(t, denseModel, "plain_code")
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
			checkGenerate(t, tok, tc.dir, ref.RenderedText, ref.InputIDs, tc.want)
			if tc.name == "gptq" {
				agree := teacherForcedAgreement(t, tc.dir, ref.InputIDs, greedy)
				t.Logf("GPTQ argmax agrees with the BF16 reference continuation at %d of %d positions", agree, len(greedy))
			}
		})
	}
}

// checkGenerate: generate on the checkpoint dir, with a float32 KV cache,
// prints 32 tokens of the text of want, the greedy continuation of the
// prompt rendered (whose ids are ids); nil want is the engine's own greedy
// tokens.
func checkGenerate(t *testing.T, tok *tokenizer.Tokenizer, dir, rendered string, ids, want []int) {
	t.Helper()
	if want == nil {
		want = engineGreedy(t, dir, ids, 32)
	}
	text, err := tok.Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), []string{"generate", "--model", dir, "--prompt", rendered, "--max-tokens", "32", "--kv-cache-dtype", "f32"}, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := strings.TrimSuffix(stdout.String(), "\n"); got != text {
		t.Errorf("generate\n got %q\nwant %q", got, text)
	}
}

// TestScoreDense: lfmq score of the dense fixture's RTN and GPTQ checkpoints:
// GPTQ's KL to the BF16 model is below RTN's on every corpus. Then the GPTQ
// checkpoint served over HTTP scores as it does in process.
func TestScoreDense(t *testing.T) {
	rtn, _ := quantizeRTN(t, denseModel)
	gptq := quantizeDenseGPTQ(t)
	corpora := []string{"chat", "instruct", "code", "book"}
	res := scoreResultsOf(t, denseModel, []string{"--candidate", "rtn=" + rtn, "--candidate", "gptq=" + gptq}, corpora, "4")
	for _, c := range append(corpora, evidence.AllCorpora) {
		r, g := res["rtn/"+c], res["gptq/"+c]
		t.Logf("%s: KL mean RTN %.5f, GPTQ %.5f over %d tokens", c, r.KLMean, g.KLMean, g.Tokens)
		if g.Tokens == 0 || g.KLMean >= r.KLMean {
			t.Errorf("%s: KL mean GPTQ %v, RTN %v over %d tokens; want GPTQ below", c, g.KLMean, r.KLMean, g.Tokens)
		}
	}

	base, stop := startServe(t, "--model", gptq, "--api-key", "k")
	res = scoreResultsOf(t, denseModel, []string{"--candidate", "served=" + base, "--candidate", "gptq=" + gptq, "--api-key", "k"}, []string{"chat"}, "2")
	checkSameResult(t, "", res["served/chat"], res["gptq/chat"])
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d", code)
	}
}

// scoreResultsOf runs lfmq score of the reference model with the
// arguments extra (its candidates) on the fixture corpora named, records
// records of each at context 128, and returns the results by
// "candidate/corpus".
func scoreResultsOf(t *testing.T, reference string, extra, corpora []string, records string) map[string]evidence.Result {
	t.Helper()
	args := append([]string{"score", "--reference", reference, "--ctx", "128", "--max-records", records}, extra...)
	for _, c := range corpora {
		args = append(args, "--corpus", c+"="+filepath.Join(tinyCorpora, c+".jsonl"))
	}
	res := map[string]evidence.Result{}
	for _, r := range scoreFile(t, args...).Results {
		res[r.Candidate+"/"+r.Corpus] = r
	}
	return res
}

// scoreFile runs lfmq with args (a score command) and --out a temporary
// file, and returns the file it wrote.
func scoreFile(t *testing.T, args ...string) *evidence.File {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ev.json")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), append(args, "--out", out), ios); code != 0 {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	f, err := evidence.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkSameResult: a served candidate's result equals the in-process one's
// (but for the name) and counts tokens; what prefixes the message.
func checkSameResult(t *testing.T, what string, served, local evidence.Result) {
	t.Helper()
	served.Candidate, local.Candidate = "", ""
	sj, _ := json.Marshal(served)
	lj, _ := json.Marshal(local)
	if string(sj) != string(lj) || local.Tokens == 0 {
		t.Errorf("%sserved\n%s\nin process\n%s", what, sj, lj)
	}
}

// TestReleaseDense: a release of the dense fixture builds reproducibly (two
// quantizations and two builds give the same bytes), verifies, has a card
// for a dense model, publishes to the test hub, downloads from it and
// launches from the download: the release's runtime serves it.
func TestReleaseDense(t *testing.T) {
	releases := buildReleasePair(t, denseModel, "tiny-lfm2")
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

	// The release's runtime serves the dense checkpoint.
	publishAndLaunch(t, filepath.Join(releases[0], "checkpoint"))
}

// buildReleasePair quantizes model by RTN and builds a release of it
// (base model test/name, hub repository test/name-lfmq1) twice, each from
// its own quantization: the two releases' SHA256SUMS must be equal and the
// first must verify. It skips the test without a go command (the release
// builds its runtime) or on windows (the launch that follows execs).
func buildReleasePair(t *testing.T, model, name string) [2]string {
	t.Helper()
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
		ckpt, _ := quantizeRTN(t, model)
		releases[i] = filepath.Join(tmp, fmt.Sprint("release", i))
		ios, stdout, stderr := testStreams()
		args := []string{"release", "build", "--checkpoint", ckpt, "--out", releases[i], "--license", lic,
			"--base-model", "test/" + name, "--hub-repo", "test/" + name + "-lfmq1", "--platforms", "linux/amd64", "--source", src}
		if code := run(context.Background(), args, ios); code != 0 {
			t.Fatalf("release build exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout.String(), "release id       "+name+"-lfmq1-v1") {
			t.Errorf("release build output:\n%s", stdout)
		}
	}
	a, _ := os.ReadFile(filepath.Join(releases[0], "SHA256SUMS"))
	b, _ := os.ReadFile(filepath.Join(releases[1], "SHA256SUMS"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("two builds differ:\n%s\n%s", a, b)
	}
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", releases[0]}, ios); code != exitOK {
		t.Fatalf("verify exit %d: %s", code, stderr)
	}
	return releases
}

// publishAndLaunch publishes a release of the checkpoint ckpt whose
// runtime is this build to the test hub, downloads it by hub id and
// launches the download: the built binary execs the release's runtime,
// which must serve.
func publishAndLaunch(t *testing.T, ckpt string) {
	t.Helper()
	rel := servingReleaseOf(t, ckpt)
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

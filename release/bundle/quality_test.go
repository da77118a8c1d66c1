package bundle_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/task"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
)

// TestRenderQuality checks the card's quality hook: evidence JSON files
// become evidence/report tables naming this checkpoint's rows, plots are
// skipped, a bad file or one that never scored this checkpoint is an error.
func TestRenderQuality(t *testing.T) {
	sha := strings.Repeat("c", 64)
	data := bundletest.ScoreEvidence(t, sha)
	out, err := bundle.RenderQuality([]bundle.EvidenceFile{{Path: "evidence/fidelity.json", Data: data}, {Path: "evidence/kl.svg", Data: []byte("<svg/>")}}, sha)
	if err != nil {
		t.Fatal(err)
	}
	want := "### `evidence/fidelity.json`\n\nThis release's checkpoint (manifest sha256 `" + sha + "`) is the one candidate below, `rtn`.\n\n| corpus |"
	if len(out) != 1 || !strings.HasPrefix(out[0], want) || !strings.Contains(out[0], "| chat | 1,234 |") {
		t.Errorf("rendered %q", out)
	}
	if _, err := bundle.RenderQuality([]bundle.EvidenceFile{{Path: "evidence/x.json", Data: []byte(`{"format": "other"}`)}}, sha); err == nil {
		t.Error("a file that is not evidence was rendered")
	}
	// Several candidates: the ones with this manifest are named.
	f, _ := evidence.Parse("x", data)
	f.Receipts.Candidates = append(f.Receipts.Candidates, evidence.Checkpoint{Name: "gptq", Identity: strings.Repeat("d", 64)},
		evidence.Checkpoint{Name: "served", Identity: sha})
	f.Results = append(f.Results, evidence.Result{Candidate: "gptq", Kind: evidence.KindCandidate, Corpus: "chat", Stats: f.Results[0].Stats})
	two, _ := evidence.Marshal(f)
	out, err = bundle.RenderQuality([]bundle.EvidenceFile{{Path: "evidence/ablation.json", Data: two}}, sha)
	if err != nil || !strings.Contains(out[0], "is `rtn` and `served` below.") {
		t.Errorf("rendered %q, %v", out, err)
	}
	// Another checkpoint's evidence is refused, naming what it scored.
	_, err = bundle.RenderQuality([]bundle.EvidenceFile{{Path: "evidence/ablation.json", Data: two}}, strings.Repeat("e", 64))
	var ie *bundle.InputError
	if !errors.As(err, &ie) || !ie.Option || !strings.Contains(err.Error(), "rtn (cccccccccccc…), gptq (dddddddddddd…), served (cccccccccccc…)") {
		t.Errorf("another checkpoint's evidence: %v", err)
	}
}

// TestRenderQualityTasks: task results and gate files become the card's
// task table (this release's runs marked, others named by their
// checkpoint) and gate table.
func TestRenderQualityTasks(t *testing.T) {
	sha := strings.Repeat("c", 64)
	seed := uint64(1)
	temp := evidence.Float(0.6)
	items := []task.ItemResult{{ID: "1", Correct: true, GeneratedTokens: 12, Answer: "9"}, {ID: "2", Truncated: true, GeneratedTokens: 8}}
	mine := &task.File{Format: task.Format, Task: task.GSM8K,
		Settings: task.Settings{Label: "c1", Concurrency: 1, MaxTokens: 64, SamplingPreset: "reasoning", Sampling: task.Sampling{Temperature: &temp}, Seeds: []uint64{1}},
		Receipts: task.Receipts{Checkpoint: &evidence.Checkpoint{ManifestSHA256: sha}, Server: task.Server{Model: "m", Models: []byte("null")}},
		Runs:     []task.Run{{Seed: &seed, Items: items, Summary: task.Summarize(items, 2)}}}
	bf16 := *mine
	bf16.Settings.Label = "bf16"
	bf16.Settings.Concurrency = 16
	bf16.Receipts = task.Receipts{Server: task.Server{URL: "http://h", Model: "ref",
		Models: []byte(`{"data":[{"id":"ref","lfmq":{"checkpoint_identity":"` + strings.Repeat("b", 64) + `"}}]}`)}}
	a, _ := task.Marshal(mine)
	b, _ := task.Marshal(&bf16)
	// The gate compares runs of this checkpoint (runs of another, such
	// as bf16, cannot be compared).
	c16 := *mine
	c16.Settings.Label, c16.Settings.Concurrency = "c16", 16
	c, _ := task.Marshal(&c16)
	g, err := task.Compare([]string{"evidence/c1.json", "evidence/c16.json"}, []*task.File{mine, &c16}, [][]byte{a, c})
	if err != nil {
		t.Fatal(err)
	}
	gate, _ := task.MarshalGate(g)
	out, err := bundle.RenderQuality([]bundle.EvidenceFile{{Path: "evidence/bf16.json", Data: b}, {Path: "evidence/c1.json", Data: a}, {Path: "evidence/gate.json", Data: gate}}, sha)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("%d sections: %q", len(out), out)
	}
	for _, want := range []string{
		"| c1 | this release | gsm8k | 2 | 1 | reasoning | 64 | 1 | 50.0% (9.5–90.5) | 1 | 10.0 | `evidence/c1.json` |",
		"| bf16 | `bbbbbbbbbbbb` | gsm8k | 2 | 16 | reasoning | 64 | 1 | 50.0% (9.5–90.5) | 1 | 10.0 | `evidence/bf16.json` |",
	} {
		if !strings.Contains(out[0], want) {
			t.Errorf("task table lacks %q:\n%s", want, out[0])
		}
	}
	if want := "| `evidence/gate.json` | c1 (concurrency 1), c16 (concurrency 16) | 2 | 1 | same texts, byte for byte |"; !strings.Contains(out[1], want) {
		t.Errorf("gate table lacks %q:\n%s", want, out[1])
	}
}

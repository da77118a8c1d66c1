package quant

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/lfmq1"
)

const (
	tinyDrafter  = "../testdata/tiny-lfm2-moe-dspark/model"
	tinyCorpora  = "../testdata/tiny-lfm2-moe/corpora"
	dsparkRefDir = "../testdata/tiny-lfm2-moe-dspark/reference"
)

// corpusIDs reads a corpus's input_ids records.
func corpusIDs(t *testing.T, name string) [][]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tinyCorpora, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			InputIDs []int `json:"input_ids"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.InputIDs)
	}
	return out
}

// TestMeasureAcceptanceReference: MeasureAcceptance and HeldOutPrompts with
// the default setup reproduce the fixture's held-out acceptance, made by
// an independent float32 implementation (reference/acceptance.json): the
// published drafter on the BF16 target with a float32 KV cache gives the
// same verify steps, histogram of accepted drafts and tokens per verify
// step.
func TestMeasureAcceptanceReference(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(dsparkRefDir, "acceptance.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Corpora map[string]struct {
			Records       int     `json:"records"`
			VerifySteps   int     `json:"verify_steps"`
			AcceptHist    []int   `json:"accept_hist"`
			TokensPerStep float64 `json:"mean_tokens_per_verify_step"`
		} `json:"corpora"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	m, err := load.Load(tinyModel, load.Options{KVCacheDType: kv.F32, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, err := draft.Load(tinyDrafter, m)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// One corpus keeps the test short; engine/draft's
	// TestHeldOutAcceptance runs all four.
	for _, corpus := range []string{"code"} {
		t.Run(corpus, func(t *testing.T) {
			want := ref.Corpora[corpus]
			prompts := HeldOutPrompts(corpusIDs(t, corpus), AcceptanceSetup{})
			if len(prompts) != want.Records {
				t.Fatalf("%d prompts, reference %d", len(prompts), want.Records)
			}
			got, err := MeasureAcceptance(context.Background(), m, d, prompts, DefaultAcceptanceSetup.NewTokens)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d verify steps, accepted %v, %.4f tokens per verify step", got.VerifySteps, got.AcceptHist, got.TokensPerStep)
			if got.VerifySteps != want.VerifySteps || !slices.Equal(got.AcceptHist, want.AcceptHist) || math.Abs(got.TokensPerStep-want.TokensPerStep) > 1e-12 {
				t.Errorf("%d steps, %v, %.6f tokens per step; reference %d, %v, %.6f", got.VerifySteps, got.AcceptHist, got.TokensPerStep, want.VerifySteps, want.AcceptHist, want.TokensPerStep)
			}
		})
	}
}

var (
	drafterOnce sync.Once
	drafterRes  *DrafterResult
	drafterErr  error
)

// tinyDrafterQ quantizes the fixture's drafter for the RTN target once per
// test binary, measuring its acceptance on 6 records of the code corpus.
func tinyDrafterQ(t *testing.T) *DrafterResult {
	t.Helper()
	target := tinyRTN(t)
	drafterOnce.Do(func() {
		drafterRes, drafterErr = QuantizeDrafter(context.Background(), DrafterOptions{
			SourceDir: tinyDrafter, TargetDir: target, OutDir: filepath.Join(testRoot, "drafter"), CreatedBy: "test",
			EvalCorpora: []EvalCorpus{{Name: "code", Path: filepath.Join(tinyCorpora, "code.jsonl")}},
			Setup:       AcceptanceSetup{Records: 6},
		})
	})
	if drafterErr != nil {
		t.Fatal(drafterErr)
	}
	return drafterRes
}

// TestQuantizeDrafter: the drafter checkpoint holds every tensor of the
// published drafter in the format docs/lfmq-1.md gives it, with the BFP8
// rounding error of a plain packer; draft.Load reads it back (its files
// hashed against its manifest) and drafts as the measurement in memory
// did (the recorded acceptance, measured again from disk); and the cost
// of quantizing it is small: tokens per verify step within 0.25 of the
// BF16 drafter's on the same quantized target.
func TestQuantizeDrafter(t *testing.T) {
	res := tinyDrafterQ(t)
	ck, err := lfmq1.Open(res.OutDir, lfmq1.CheckTensors)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	man := ck.Manifest
	if man.Architecture != draft.Architecture || man.Quantization.Dense.Method != "rtn" {
		t.Errorf("architecture %q, dense method %q", man.Architecture, man.Quantization.Dense.Method)
	}
	for _, c := range []struct {
		tensor string
		format lfmq1.TensorFormat
	}{
		{"fc.weight", lfmq1.BFP8},
		{"hidden_norm.weight", lfmq1.BF16},
		{"layers.0.self_attn.q_proj.weight", lfmq1.BFP8},
		{"layers.1.self_attn.k_proj.weight", lfmq1.BFP8},
		{"layers.1.self_attn.v_proj.weight", lfmq1.BFP8},
		{"layers.0.self_attn.o_proj.weight", lfmq1.BFP8},
		{"layers.0.self_attn.q_norm.weight", lfmq1.BF16},
		{"layers.1.mlp.gate_proj.weight", lfmq1.BFP8},
		{"layers.1.mlp.up_proj.weight", lfmq1.BFP8},
		{"layers.1.mlp.down_proj.weight", lfmq1.BFP8},
		{"layers.1.input_layernorm.weight", lfmq1.BF16},
		{"norm.weight", lfmq1.BF16},
		{"markov_head.markov_w1.weight", lfmq1.BF16},
		{"markov_head.markov_w2.weight", lfmq1.BFP8},
		{"confidence_head.proj.weight", lfmq1.BF16},
		{"confidence_head.proj.bias", lfmq1.BF16},
	} {
		e, ok := man.Tensor(c.tensor)
		if !ok || e.Format != c.format || e.File != draft.CheckpointFile {
			t.Errorf("%s: %+v (present %v), want format %s in %s", c.tensor, e, ok, c.format, draft.CheckpointFile)
		}
	}
	var metrics struct {
		Tensors    map[string]TensorMetric `json:"tensors"`
		Acceptance DrafterAcceptance       `json:"acceptance"`
	}
	if err := json.Unmarshal(man.Metrics, &metrics); err != nil {
		t.Fatal(err)
	}
	if len(metrics.Tensors) != man.Quantization.Dense.Tensors || man.Quantization.Dense.Tensors != 2+7*2 {
		t.Errorf("%d tensor metrics, %d BFP8 tensors; want 16", len(metrics.Tensors), man.Quantization.Dense.Tensors)
	}
	for name, tm := range metrics.Tensors {
		// BFP8 keeps 7 bits of magnitude under a shared exponent: about
		// 2^-8 of the group's largest value, a few 1e-3 relative.
		if tm.RelError <= 0 || tm.RelError > 0.02 {
			t.Errorf("%s: relative error %g, want (0, 0.02]", name, tm.RelError)
		}
	}
	acc := res.Acceptance
	rec, _ := json.Marshal(metrics.Acceptance)
	mine, _ := json.Marshal(acc)
	if string(rec) != string(mine) {
		t.Errorf("manifest records %s\nresult says %s", rec, mine)
	}
	t.Logf("tokens per verify step: BF16 drafter %.4f (%v), BFP8 drafter %.4f (%v)", acc.BF16.TokensPerStep, acc.BF16.AcceptHist, acc.Quantized.TokensPerStep, acc.Quantized.AcceptHist)
	if len(acc.Corpora) != 1 || acc.Corpora[0].Records != 6 || acc.BF16.VerifySteps == 0 || acc.TargetManifestSHA256 != targetManifest(t) {
		t.Errorf("acceptance record %+v", acc)
	}
	if math.Abs(acc.BF16.TokensPerStep-acc.Quantized.TokensPerStep) > 0.25 || acc.Quantized.TokensPerStep < 1.5 {
		t.Errorf("tokens per verify step: BF16 %.3f, quantized %.3f", acc.BF16.TokensPerStep, acc.Quantized.TokensPerStep)
	}

	// Loaded from disk, the quantized drafter drafts what it drafted in
	// memory.
	m, err := load.Load(tinyRTN(t), load.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, err := draft.Load(res.OutDir, m)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	prompts := HeldOutPrompts(corpusIDs(t, "code"), AcceptanceSetup{Records: 6})
	again, err := MeasureAcceptance(context.Background(), m, d, prompts, DefaultAcceptanceSetup.NewTokens)
	if err != nil {
		t.Fatal(err)
	}
	if again.VerifySteps != acc.Quantized.VerifySteps || !slices.Equal(again.AcceptHist, acc.Quantized.AcceptHist) {
		t.Errorf("loaded from disk: %+v; measured in memory %+v", again, acc.Quantized)
	}
}

func targetManifest(t *testing.T) string {
	_, sum, err := lfmq1.ReadManifest(tinyRTN(t))
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestQuantizedDrafterDamaged: a quantized drafter whose bytes differ from
// its manifest, whose manifest is gone, or whose manifest is a model's is
// refused by draft.Load naming the file.
func TestQuantizedDrafterDamaged(t *testing.T) {
	res := tinyDrafterQ(t)
	for _, c := range []struct {
		name  string
		edit  func(t *testing.T, dir string)
		wants []string
	}{
		{"flipped byte", func(t *testing.T, dir string) {
			p := filepath.Join(dir, draft.CheckpointFile)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)-100] ^= 1
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{draft.CheckpointFile, "hash"}},
		{"no manifest", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, lfmq1.ManifestFile)); err != nil {
				t.Fatal(err)
			}
		}, []string{draft.CheckpointFile, "manifest.json is missing"}},
		{"a model's manifest", func(t *testing.T, dir string) {
			os.RemoveAll(dir)
			copyDir(t, tinyRTN(t), dir)
			copyFile(t, filepath.Join(tinyDrafter, "config.json"), filepath.Join(dir, "config.json"))
		}, []string{"not a drafter", `"lfm2_moe"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "drafter")
			copyDir(t, res.OutDir, dir)
			c.edit(t, dir)
			m, err := load.Load(tinyRTN(t), load.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			d, err := draft.Load(dir, m)
			if err == nil {
				d.Close()
				t.Fatal("loaded")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestQuantizeDrafterErrors: options that cannot work are refused before
// anything is written.
func TestQuantizeDrafterErrors(t *testing.T) {
	target := tinyRTN(t)
	code := []EvalCorpus{{Name: "code", Path: filepath.Join(tinyCorpora, "code.jsonl")}}
	for _, c := range []struct {
		name string
		opts DrafterOptions
		want string
	}{
		{"no corpus", DrafterOptions{SourceDir: tinyDrafter, TargetDir: target}, "at least one eval corpus"},
		{"bad rule", DrafterOptions{SourceDir: tinyDrafter, TargetDir: target, EvalCorpora: code, ExponentRule: ExponentHessian}, "max or search"},
		{"bad date", DrafterOptions{SourceDir: tinyDrafter, TargetDir: target, EvalCorpora: code, ChatDate: "today"}, "YYYY-MM-DD"},
		{"short records", DrafterOptions{SourceDir: tinyDrafter, TargetDir: target, EvalCorpora: code, Setup: AcceptanceSetup{PromptTokens: 100000}}, "no record of 100016 tokens"},
		{"not a drafter", DrafterOptions{SourceDir: tinyModel, TargetDir: target, EvalCorpora: code}, "config.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.OutDir = filepath.Join(t.TempDir(), "out")
			_, err := QuantizeDrafter(context.Background(), c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if _, serr := os.Stat(c.opts.OutDir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("%s written", c.opts.OutDir)
			}
		})
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			copyFile(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
		}
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestQuantizedDrafterBlocks: the quantized drafter drafts the blocks of
// the published one within BFP8's rounding. At every verify step of the
// fixture's six reference prompts (the reference's own contexts, fed to
// the RTN model with both drafters attached to their own copy), the
// drafts agree in most rows and, where the rows before agree (so that the
// Markov head sees the same previous token), the confidence logits stay
// close; exact equality is not expected of a rounded drafter.
func TestQuantizedDrafterBlocks(t *testing.T) {
	res := tinyDrafterQ(t)
	data, err := os.ReadFile(filepath.Join(dsparkRefDir, "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Prompts []struct {
			InputIDs []int `json:"input_ids"`
			Steps    []struct {
				Anchor   int   `json:"anchor"`
				Appended []int `json:"appended"`
			} `json:"steps"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	pair := func(dir string) (*model.Model, *draft.Drafter) {
		m, err := load.Load(tinyRTN(t), load.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		d, err := draft.Load(dir, m)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(); m.Close() })
		return m, d
	}
	mb, db := pair(tinyDrafter)
	mq, dq := pair(res.OutDir)
	rows, same, prefix, worst, sum := 0, 0, 0, 0.0, 0.0
	for _, p := range spec.Prompts {
		sb, sq := mb.NewSequence(), mq.NewSequence()
		ctx := slices.Clone(p.InputIDs)
		for _, st := range p.Steps {
			for _, c := range []struct {
				m   *model.Model
				seq *model.Sequence
			}{{mb, sb}, {mq, sq}} {
				if _, err := c.m.Forward(context.Background(), []*model.Sequence{c.seq}, [][]int{ctx[c.seq.Len():]}, model.ForwardOptions{Logits: model.NoLogits}); err != nil {
					t.Fatal(err)
				}
			}
			bb, err := db.Propose([]*model.Sequence{sb}, []int{st.Anchor}, false)
			if err != nil {
				t.Fatal(err)
			}
			bq, err := dq.Propose([]*model.Sequence{sq}, []int{st.Anchor}, false)
			if err != nil {
				t.Fatal(err)
			}
			agree := true // the drafts before row k agree: its Markov input is the same
			for k, tok := range bb.Draft(0) {
				rows++
				if agree {
					prefix++
					d := math.Abs(float64(bb.Conf(0)[k] - bq.Conf(0)[k]))
					worst, sum = max(worst, d), sum+d
				}
				if bq.Draft(0)[k] == tok {
					same++
				} else {
					agree = false
				}
			}
			// The next context: the anchor and what the step kept.
			ctx = append(ctx, st.Anchor)
			ctx = append(ctx, st.Appended[:len(st.Appended)-1]...)
		}
		sb.Free()
		sq.Free()
	}
	frac := float64(same) / float64(rows)
	t.Logf("%d of %d drafted rows the same (%.1f%%); over the %d rows with the same Markov input, confidence logits differ by %.3g at most, %.3g on average",
		same, rows, 100*frac, prefix, worst, sum/float64(prefix))
	if frac < 0.95 || worst > 0.25 {
		t.Errorf("%d of %d drafted rows the same, confidence logits within %.3g; want ≥ 95%%, ≤ 0.25", same, rows, worst)
	}
}

package quant

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/calib"
	"github.com/lfmq/lfmq/version"
)

// DrafterDir is where lfmq quantize --drafter puts the quantized drafter:
// a sub-directory of the target's checkpoint, itself an lfmq-1 checkpoint
// (docs/lfmq-1.md, "A drafter").
const DrafterDir = lfmq1.DrafterDir

// DrafterOptions configures QuantizeDrafter.
type DrafterOptions struct {
	// SourceDir is the published DSpark drafter (config.json and BF16
	// safetensors); TargetDir the quantized target it drafts for (an
	// lfmq-1 checkpoint: its acceptance is measured on it); OutDir the
	// drafter checkpoint to create (it must not exist, or be empty).
	SourceDir, TargetDir, OutDir string
	// CreatedBy is recorded in the manifest (see Options.CreatedBy).
	CreatedBy string
	// Workers is the engine's threads for the acceptance runs; 0 means
	// GOMAXPROCS. Nothing written depends on it.
	Workers int
	// ExponentRule chooses the BFP8 exponents (max or search; empty means
	// max), as Options.DenseExponentRule does for the target's.
	ExponentRule ExponentRule
	// EvalCorpora are the held-out texts the acceptance is measured on
	// (at least one); ChatDate (YYYY-MM-DD, empty for the default) the day
	// a chat record's template sees.
	EvalCorpora []EvalCorpus
	ChatDate    string
	// Setup is the held-out run; zero fields take DefaultAcceptanceSetup's.
	Setup AcceptanceSetup
}

// DrafterResult summarises a quantized drafter.
type DrafterResult struct {
	OutDir         string
	ManifestSHA256 string
	Tensors        int
	// Bytes and SourceBytes count tensor data, as Result's do.
	Bytes, SourceBytes int64
	Acceptance         DrafterAcceptance
}

// AcceptanceSetup is a held-out acceptance run: per corpus, Records
// records evenly spaced over those with at least PromptTokens+16 ids, the
// first PromptTokens ids the prompt, NewTokens new tokens by greedy
// speculative decoding with every draft of the block verified.
type AcceptanceSetup struct {
	Records      int `json:"records"`
	PromptTokens int `json:"prompt_tokens"`
	NewTokens    int `json:"new_tokens"`
}

// DefaultAcceptanceSetup is the setup of the DSpark fixture's reference
// acceptance (testdata/tiny-lfm2-moe-dspark/reference/acceptance.json), so
// that lfmq's figure for a published drafter compares with its trainer's.
var DefaultAcceptanceSetup = AcceptanceSetup{Records: 24, PromptTokens: 96, NewTokens: 48}

// withDefaults fills zero fields from DefaultAcceptanceSetup.
func (s AcceptanceSetup) withDefaults() AcceptanceSetup {
	if s.Records == 0 {
		s.Records = DefaultAcceptanceSetup.Records
	}
	if s.PromptTokens == 0 {
		s.PromptTokens = DefaultAcceptanceSetup.PromptTokens
	}
	if s.NewTokens == 0 {
		s.NewTokens = DefaultAcceptanceSetup.NewTokens
	}
	return s
}

// AcceptanceRun is the outcome of greedy speculative decoding over
// held-out prompts: the verify steps, the histogram of accepted drafts per
// step (index a counts the steps that kept a drafts) and the tokens each
// verify step produced on average, the accepted drafts plus the target's
// own token.
type AcceptanceRun struct {
	VerifySteps   int     `json:"verify_steps"`
	AcceptHist    []int   `json:"accept_hist"`
	TokensPerStep float64 `json:"tokens_per_verify_step"`
}

// add counts other's steps into r.
func (r *AcceptanceRun) add(o AcceptanceRun) {
	r.VerifySteps += o.VerifySteps
	if len(r.AcceptHist) < len(o.AcceptHist) {
		r.AcceptHist = append(r.AcceptHist, make([]int, len(o.AcceptHist)-len(r.AcceptHist))...)
	}
	for a, n := range o.AcceptHist {
		r.AcceptHist[a] += n
	}
	r.TokensPerStep = tokensPerStep(r.AcceptHist, r.VerifySteps)
}

func tokensPerStep(hist []int, steps int) float64 {
	if steps == 0 {
		return 0
	}
	kept := 0
	for a, n := range hist {
		kept += a * n
	}
	return float64(kept)/float64(steps) + 1
}

// CorpusAcceptance is one corpus's acceptance, with the BF16 drafter and
// with the quantized one, both on the quantized target.
type CorpusAcceptance struct {
	Name      string        `json:"name"`
	SHA256    string        `json:"sha256"`
	Records   int           `json:"records"`
	BF16      AcceptanceRun `json:"bf16"`
	Quantized AcceptanceRun `json:"quantized"`
}

// DrafterAcceptance is the acceptance cost of quantizing a drafter, as its
// manifest's metrics record it ("acceptance"): the same held-out run with
// the published BF16 drafter and with the quantized one, both drafting for
// the quantized target named by TargetManifestSHA256.
type DrafterAcceptance struct {
	Setup                AcceptanceSetup    `json:"setup"`
	TargetManifestSHA256 string             `json:"target_manifest_sha256"`
	Corpora              []CorpusAcceptance `json:"corpora"`
	BF16                 AcceptanceRun      `json:"bf16"`
	Quantized            AcceptanceRun      `json:"quantized"`
}

// DrafterInputError is a drafter quantization that cannot start as asked:
// What names the option.
type DrafterInputError struct{ What, Msg string }

func (e *DrafterInputError) Error() string {
	return fmt.Sprintf("quant: drafter: %s: %s", e.What, e.Msg)
}

// drafterBFP8 reports whether the drafter tensor name is a linear weight
// that QuantizeDrafter stores in BFP8: fc, the layers' attention and MLP
// projections and markov_w2, all read as matrix products. markov_w1 is a
// lookup table of one row per previous token: like the target's
// embedding, which lfmq-1 keeps in BF16, it is read a row at a time, so
// BFP8 would save disk but no decode time, and would round each token's
// Markov input; it stays as published. Norms and the confidence head are
// vectors and stay too.
func drafterBFP8(name string) bool {
	if name == "fc.weight" || name == "markov_head.markov_w2.weight" {
		return true
	}
	if !strings.HasPrefix(name, "layers.") {
		return false
	}
	for _, s := range []string{".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight", ".self_attn.o_proj.weight",
		".mlp.gate_proj.weight", ".mlp.up_proj.weight", ".mlp.down_proj.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// drafterSkipped are tensors a drafter may carry that it does not use: a
// copy of the target's embedding or head (draft.Load ignores them too).
func drafterSkipped(name string) bool {
	return name == "embed_tokens.weight" || name == "lm_head.weight" || name == "model.embed_tokens.weight"
}

// QuantizeDrafter quantizes the DSpark drafter in opts.SourceDir for the
// quantized target in opts.TargetDir and writes it to opts.OutDir as an
// lfmq-1 checkpoint of architecture draft.Architecture: its linear weights
// in BFP8 rounded to nearest (docs/bfp.md), the rest as published. Before
// anything is written it measures the acceptance cost (DrafterAcceptance)
// over the held-out corpora, with the published drafter and with the
// quantized one loaded from memory, and records it in the manifest's
// metrics. The checkpoint appears in OutDir only when complete.
func QuantizeDrafter(ctx context.Context, opts DrafterOptions) (*DrafterResult, error) {
	if len(opts.EvalCorpora) == 0 {
		return nil, &DrafterInputError{"EvalCorpora", "the drafter's acceptance is measured on held-out text; give at least one eval corpus"}
	}
	rule := opts.ExponentRule.orMax()
	if rule != ExponentMax && rule != ExponentSearch {
		return nil, &DrafterInputError{"ExponentRule", fmt.Sprintf("%q; a drafter's BFP8 exponents are max or search", rule)}
	}
	if opts.ChatDate == "" {
		opts.ChatDate = DefaultGPTQOptions().ChatDate
	}
	if !ValidChatDate(opts.ChatDate) {
		return nil, &DrafterInputError{"ChatDate", fmt.Sprintf("%q; want a day as YYYY-MM-DD", opts.ChatDate)}
	}
	setup := opts.Setup.withDefaults()
	if setup.Records < 1 || setup.PromptTokens < 1 || setup.NewTokens < 1 {
		return nil, &DrafterInputError{"Setup", fmt.Sprintf("%+v; records, prompt and new tokens must be positive", setup)}
	}
	cfg, err := draft.LoadConfig(opts.SourceDir)
	if err != nil {
		return nil, err
	}
	src, err := hf.Open(opts.SourceDir)
	if err != nil {
		return nil, fmt.Errorf("quant: drafter: %w", err)
	}
	defer src.Close()
	m, err := load.Load(opts.TargetDir, load.Options{Threads: opts.Workers})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := cfg.CheckTarget(filepath.Join(opts.SourceDir, "config.json"), m.Config); err != nil {
		return nil, err
	}

	res := &DrafterResult{OutDir: opts.OutDir}
	var tensors []lfmq1.Tensor
	metrics := tensorMetrics{}
	dense, kept := lfmq1.ClassSpec{Method: string(RTN)}, lfmq1.ClassSpec{Method: "none"}
	for _, name := range src.Names() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, _ := src.Info(name)
		res.SourceBytes += info.End - info.Begin
		if drafterSkipped(name) {
			continue
		}
		t, metric, err := drafterTensor(src, name, rule)
		if err != nil {
			return nil, err
		}
		if metric != nil {
			metrics[name] = *metric
			addFormat(&dense, t.Format)
		} else {
			addFormat(&kept, t.Format)
		}
		res.Bytes += int64(len(t.Data))
		tensors = append(tensors, t)
	}
	res.Tensors = len(tensors)

	corpora, err := heldOutCorpora(opts, m, setup)
	if err != nil {
		return nil, err
	}
	acc := DrafterAcceptance{Setup: setup, TargetManifestSHA256: m.ManifestSHA256}
	bf16, err := draft.Load(opts.SourceDir, m)
	if err != nil {
		return nil, err
	}
	runs, err := measureCorpora(ctx, m, bf16, corpora, setup.NewTokens)
	bf16.Close()
	if err != nil {
		return nil, err
	}
	qd, err := draft.FromTensors(cfg, opts.SourceDir, m, tensors)
	if err != nil {
		return nil, err
	}
	qruns, err := measureCorpora(ctx, m, qd, corpora, setup.NewTokens)
	if err != nil {
		return nil, err
	}
	for i, c := range corpora {
		acc.Corpora = append(acc.Corpora, CorpusAcceptance{Name: c.name, SHA256: c.sha256, Records: len(c.prompts), BF16: runs[i], Quantized: qruns[i]})
		acc.BF16.add(runs[i])
		acc.Quantized.add(qruns[i])
	}
	res.Acceptance = acc

	w, err := lfmq1.Create(opts.OutDir)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			w.Abort()
		}
	}()
	if err := w.WriteFile(draft.CheckpointFile, tensors); err != nil {
		return nil, err
	}
	if err := w.CopyFile(filepath.Join(opts.SourceDir, "config.json"), "config.json"); err != nil {
		return nil, err
	}
	source, err := describeSource(opts.SourceDir)
	if err != nil {
		return nil, err
	}
	q := lfmq1.Quantization{
		Experts: lfmq1.ClassSpec{Method: "none", Formats: []lfmq1.TensorFormat{}},
		Head:    lfmq1.ClassSpec{Method: "none", Formats: []lfmq1.TensorFormat{}},
		Dense:   dense, Kept: kept,
	}
	if q.Settings, err = canonjson.Marshal(RuleSettings{ExponentRule: string(rule), DenseExponentRule: string(rule)}); err != nil {
		return nil, err
	}
	man := &lfmq1.Manifest{LfmqVersion: version.Version, Architecture: draft.Architecture, CreatedBy: opts.CreatedBy, Source: source, Quantization: q}
	sum, err := w.Commit(man, map[string]any{"tensors": metrics, "acceptance": acc})
	if err != nil {
		return nil, err
	}
	committed = true
	res.ManifestSHA256 = sum
	return res, nil
}

// addFormat counts a tensor of format f into s.
func addFormat(s *lfmq1.ClassSpec, f lfmq1.TensorFormat) {
	s.Tensors++
	for _, g := range s.Formats {
		if g == f {
			return
		}
	}
	s.Formats = append(s.Formats, f)
	sort.Slice(s.Formats, func(i, j int) bool { return s.Formats[i] < s.Formats[j] })
}

// drafterTensor is the stored form of the drafter's tensor name: BFP8 with
// its weight error for a linear weight, else the published values (BF16
// or F32 as given; F16, which lfmq-1 has no format for, widened exactly
// to F32).
func drafterTensor(src *hf.Checkpoint, name string, rule ExponentRule) (lfmq1.Tensor, *TensorMetric, error) {
	info, _ := src.Info(name)
	t := lfmq1.Tensor{Name: name, Shape: info.Shape}
	raw, err := src.Bytes(name)
	if err != nil {
		return t, nil, fmt.Errorf("quant: drafter: %w", err)
	}
	n := 1
	for _, d := range info.Shape {
		n *= int(d)
	}
	bfp8 := drafterBFP8(name) && len(info.Shape) == 2
	switch {
	case !bfp8 && info.DType == dtype.BF16:
		t.Format, t.DType, t.StoredShape, t.Data = lfmq1.BF16, dtype.BF16, info.Shape, raw
		return t, nil, nil
	case info.DType != dtype.BF16 && info.DType != dtype.F16 && info.DType != dtype.F32:
		return t, nil, fmt.Errorf("quant: drafter tensor %q: dtype %s; want BF16, F16 or F32", name, info.DType)
	}
	w := make([]float32, n)
	if err := dtype.ToFloat32(info.DType, raw, w); err != nil {
		return t, nil, fmt.Errorf("quant: drafter tensor %q: %w", name, err)
	}
	if i := firstNonFinite(w); i >= 0 {
		return t, nil, &NonFiniteError{Tensor: name, Index: i, Value: w[i]}
	}
	if !bfp8 {
		data, err := dtype.FromFloat32(dtype.F32, w)
		if err != nil {
			return t, nil, err
		}
		t.Format, t.DType, t.StoredShape, t.Data = lfmq1.F32, dtype.F32, info.Shape, data
		return t, nil, nil
	}
	out, in := int(info.Shape[0]), int(info.Shape[1])
	packed, err := bfp.PackMatrixRule(bfp.BFP8, rule.packRule(), w, out, in)
	if err != nil {
		return t, nil, fmt.Errorf("quant: drafter tensor %q: %w", name, err)
	}
	q, err := bfp.UnpackMatrix(bfp.BFP8, packed, out, in)
	if err != nil {
		return t, nil, fmt.Errorf("quant: drafter tensor %q: %w", name, err)
	}
	metric := weightError(w, q)
	t.Format, t.DType, t.Data = lfmq1.BFP8, dtype.U8, packed
	t.StoredShape = []int64{int64(bfp.NumTiles(out, in)), int64(bfp.BFP8.TileBytes())}
	return t, &metric, nil
}

// heldOut is one corpus's held-out prompts.
type heldOut struct {
	name, sha256 string
	prompts      [][]int
}

// heldOutCorpora reads the eval corpora with the target's tokenizer and
// picks each one's prompts (HeldOutPrompts), sorted by name.
func heldOutCorpora(opts DrafterOptions, m *model.Model, setup AcceptanceSetup) ([]heldOut, error) {
	date, _ := time.Parse(time.DateOnly, opts.ChatDate)
	enc, err := calib.NewEncoder(opts.TargetDir, m.Config.VocabSize, date)
	if err != nil {
		return nil, err
	}
	var out []heldOut
	for _, ec := range opts.EvalCorpora {
		c, err := calib.LoadCorpus(ec.Name, ec.Path, enc)
		if err != nil {
			return nil, err
		}
		recs := make([][]int, len(c.Records))
		for i, r := range c.Records {
			recs[i] = r.IDs
		}
		prompts := HeldOutPrompts(recs, setup)
		if len(prompts) == 0 {
			return nil, &DrafterInputError{"eval corpus " + ec.Path, fmt.Sprintf("no record of %d tokens or more to measure the drafter's acceptance on", setup.PromptTokens+16)}
		}
		out = append(out, heldOut{name: ec.Name, sha256: c.SHA256, prompts: prompts})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// HeldOutPrompts picks the prompts of a held-out run from a corpus's
// records: of those with at least setup.PromptTokens+16 ids, setup.Records
// evenly spaced (numpy.linspace(0, n-1, Records) rounded half to even, as
// the DSpark fixture's reference picks them; all of them when there are
// fewer), each cut to its first setup.PromptTokens ids.
func HeldOutPrompts(records [][]int, setup AcceptanceSetup) [][]int {
	setup = setup.withDefaults()
	var long [][]int
	for _, r := range records {
		if len(r) >= setup.PromptTokens+16 {
			long = append(long, r[:setup.PromptTokens])
		}
	}
	if len(long) <= setup.Records {
		return long
	}
	if setup.Records == 1 {
		return long[:1]
	}
	step := float64(len(long)-1) / float64(setup.Records-1)
	out := make([][]int, setup.Records)
	for j := range out {
		i := int(math.RoundToEven(float64(j) * step))
		if j == setup.Records-1 {
			i = len(long) - 1 // linspace's endpoint is exact
		}
		out[j] = long[i]
	}
	return out
}

// measureCorpora runs MeasureAcceptance over each corpus.
func measureCorpora(ctx context.Context, m *model.Model, d *draft.Drafter, corpora []heldOut, newTokens int) ([]AcceptanceRun, error) {
	out := make([]AcceptanceRun, len(corpora))
	for i, c := range corpora {
		r, err := MeasureAcceptance(ctx, m, d, c.prompts, newTokens)
		if err != nil {
			return nil, fmt.Errorf("quant: drafter acceptance on %s: %w", c.name, err)
		}
		out[i] = r
	}
	return out, nil
}

// MeasureAcceptance decodes newTokens tokens after each prompt by greedy
// speculative decoding with d, attached to m: each step drafts a block
// from the pending token, verifies every draft with one forward of m and
// keeps the longest prefix that agrees with m's own greedy tokens, then
// m's token (docs/drafting.md). A prompt's run stops at the first step
// that brings its new tokens to newTokens or more, and that step counts
// whole, as in the fixture's reference (engine/draft's
// TestHeldOutAcceptance runs the same loop).
func MeasureAcceptance(ctx context.Context, m *model.Model, d *draft.Drafter, prompts [][]int, newTokens int) (AcceptanceRun, error) {
	B := d.Config.BlockSize
	run := AcceptanceRun{AcceptHist: make([]int, B+1)}
	for _, prompt := range prompts {
		if err := ctx.Err(); err != nil {
			return run, err
		}
		if err := func() error {
			seq := m.NewSequence()
			defer seq.Free()
			out, err := m.Forward(ctx, []*model.Sequence{seq}, [][]int{prompt}, model.ForwardOptions{})
			if err != nil {
				return err
			}
			anchor, got := kernels.Argmax(out[0]), 1
			for got < newTokens {
				st, err := d.GreedyStep(ctx, seq, anchor, false)
				if err != nil {
					return err
				}
				a := st.Accepted
				anchor = st.Next()
				run.VerifySteps++
				run.AcceptHist[a]++
				got += a + 1
			}
			return nil
		}(); err != nil {
			return run, err
		}
	}
	run.TokensPerStep = tokensPerStep(run.AcceptHist, run.VerifySteps)
	return run, nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/internal/progress"
	"github.com/lfmq/lfmq/quant"
	"github.com/lfmq/lfmq/quant/hessian"
)

type quantizeOptions struct {
	IO    *IOStreams
	Model string
	Out   string
	// Endpoint is the hub of a --model given as OWNER/NAME[@REVISION].
	Endpoint string
	Method   quant.Method
	Experts  string
	Workers  int
	// GPTQ holds the GPTQ settings (used with --method gptq).
	GPTQ quant.GPTQOptions
	// ExponentRule and DenseExponentRule choose the BFP exponents of the
	// routed experts and of the BFP8 dense tensors.
	ExponentRule, DenseExponentRule quant.ExponentRule
	// FFNFormat is a dense LFM2's FFN format (--ffn-format): bfp4 (empty)
	// or bfp8.
	FFNFormat lfmq1.TensorFormat
	// DenseMethod is how the BFP8 dense tensors and the head are
	// quantized (--dense-method): rtn (empty) or gptq.
	DenseMethod quant.Method
	// Drafter is --drafter as given: a published DSpark drafter for the
	// model, quantized into Out/drafter after the model (empty for none);
	// drafterDir its directory (a hub id resolved). DrafterRecords is
	// --drafter-records; EvalCorpora the parsed --eval-corpus values.
	Drafter        string
	drafterDir     string
	DrafterRecords int
	EvalCorpora    []quant.EvalCorpus
	// DrafterOnly is --drafter-only: --out is the model's checkpoint,
	// made earlier from --model, and only the drafter is quantized.
	DrafterOnly bool

	// flags holds the flags as typed, before validate reads them into
	// the fields above.
	flags quantizeFlags
}

// quantizeFlags are quantize's flags whose values validate parses and
// checks into quantizeOptions.
type quantizeFlags struct {
	method, w2Weight, expRule, denseRule, ffnFormat, denseMethod string
	evalCorpora                                                  []string
	solveMiB                                                     int64
}

// expertGPTQFlags are the GPTQ flags of the routed experts' solves alone.
var expertGPTQFlags = []string{"damp-w13", "damp-w2", "shrink", "w2-weight"}

// gptqFlags are the flags that only --method gptq uses; --eval-corpus and
// --chat-date serve --drafter too.
var gptqFlags = []string{"calib", "calib-seqs", "calib-len", "seed", "damp-w13", "damp-w2",
	"block-size", "act-order", "shrink", "w2-weight", "sequential", "resume", "strict", "solve-memory", "damp-dense"}

func newQuantizeCmd(ios *IOStreams, runF func(*quantizeOptions) error) *cobra.Command {
	opts := &quantizeOptions{IO: ios, GPTQ: quant.DefaultGPTQOptions()}
	cmd := &cobra.Command{
		Use:   "quantize --model DIR|OWNER/NAME[@REV] --out DIR [--method gptq --calib FILE | --method rtn] [--drafter DIR|OWNER/NAME[@REV] --eval-corpus FILE]",
		Short: "Quantize a BF16 LFM2-MoE or dense LFM2 checkpoint to an lfmq-1 checkpoint",
		Long: `Quantize reads a Hugging Face LFM2-MoE checkpoint (model_type lfm2_moe; BF16
safetensors, single or sharded) and writes an lfmq-1 checkpoint:

  routed experts                               BFP4 (bfloat4_b)
  attention, short-conv, dense FFN, LM head    BFP8 (bfloat8_b)
  embedding, norms, conv kernels, router        BF16, expert bias F32

A dense LFM2 (model_type lfm2) has no experts: its FFN w1/w3/w2 take their
place, in BFP4 by --method (GPTQ solves them against the Hessian of the FFN
input), or with --ffn-format bfp8 in BFP8 by RTN.

--method gptq (the default) quantizes the routed experts with GPTQ: the model
runs on the calibration windows of --calib, and each expert's matrices are
solved against the router-weighted Hessian of their inputs, layer by layer
with the layers below already quantized. The Hessians of w1/w3 and of w2 are
damped by 0.01 of their mean diagonal (--damp-w13, --damp-w2; the reference
release damped w2 by 1). The BFP8 tensors and the head are solved with GPTQ
too (--dense-method gptq, the default with GPTQ experts; rtn rounds them to
nearest, as the reference release does). --calib is JSONL ({"text": …},
{"messages": […]} or {"input_ids": […]} records) or a safetensors token-id
file. A calibration set that shares any 32-token window without a
control token with an --eval-corpus is refused. --method rtn rounds every block to nearest (the
plain BFP packer) and needs no calibration.

--exponent-rule chooses the shared exponent of each 16-weight group of the
routed experts: max (the largest exponent, tt-metal's packer, the default),
search (tt-metal's exponent search: one less when that lowers the group's
squared error) or hessian (GPTQ only: the least GPTQ loss among the largest
exponent and the two below it). --dense-exponent-rule does the same for the
BFP8 tensors (max or search). The rule is recorded in the manifest; see
docs/bfp.md. On the fixture neither search nor hessian lowers the KL to the
BF16 model, so max stays the default.

--model is a directory, or a model on the hub by its id, OWNER/NAME or
OWNER/NAME@REVISION (a branch, tag or commit; default main), read from the
Hugging Face cache that huggingface_hub keeps ($HF_HUB_CACHE, else
$HF_HOME/hub, else ~/.cache/huggingface/hub). A snapshot there that holds
config.json, tokenizer.json and every weight file is used without the
network; otherwise the missing files are fetched from --endpoint into the
same cache (resumed after an interruption, each checked against the size and
digest the hub lists), with $HF_TOKEN. A string that names an existing
directory is that directory. The manifest records the repository and commit
of a source read from the cache, by id or by a snapshot's path.

The output directory must not exist or be empty; it appears only when
complete. A GPTQ run keeps each finished MoE layer in a hidden
.NAME.partial directory beside it; after an interruption, the same command
with --resume continues from there and writes the same bytes as an
uninterrupted run (a damaged layer there is computed again; a damaged
progress record is refused). The bytes written never depend on --workers,
--block-size or --solve-memory, and neither does the manifest: its created_by and settings
hold the effective settings that shape the result, however they were typed.
A chat template that calls strftime_now sees the day of --chat-date (at
00:00 UTC), not today, so a run gives the same bytes on any day.

--drafter also quantizes the model's DSpark drafter (a directory or hub id,
as --model) into DIR/drafter, an lfmq-1 checkpoint of its own that lfmq
serve --drafter and lfmq release build take: its linear weights (fc, q/k/v/o,
gate/up/down, markov_w2) in BFP8 rounded to nearest, markov_w1, norms and the
confidence head as published. What that costs is measured first: greedy
speculative decoding over held-out records of each --eval-corpus (required;
--drafter-records evenly spaced records of 112 tokens or more, the first 96
the prompt, 48 new tokens) with the published drafter and with the
quantized one, both on the quantized model. Their tokens per verify step
are printed and recorded in the drafter's manifest. DIR appears when the
model is complete, DIR/drafter when the drafter is. --drafter-only quantizes
the drafter alone, for the checkpoint already in --out (made from --model):
a drafter for a checkpoint made earlier, or after an interrupted drafter step.

--solve-memory bounds the scratch memory of the expert solves running at
once (about 215 MiB per w1/w3 solve and 160 MiB per w2 solve at
LFM2-8B-A1B's shapes): fewer solves then run together, each on more of the
--workers, so the peak memory does not grow with the number of workers. The
default, 0, allows as much as one MoE layer's w1/w3 statistics take
(experts × hidden² × 8 bytes: 1 GiB for LFM2-8B-A1B).`,
		Example: `  lfmq quantize --model ./LFM2-8B-A1B --out ./LFM2-8B-A1B-lfmq1 --calib calib.jsonl \
      --eval-corpus chat=eval/chat.jsonl --eval-corpus code=eval/code.jsonl
  lfmq quantize --model ./LFM2-8B-A1B --out ./LFM2-8B-A1B-rtn --method rtn
  lfmq quantize --model LiquidAI/LFM2-8B-A1B --out ./LFM2-8B-A1B-rtn --method rtn`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return quantizeRun(cmd, opts)
		},
	}
	addQuantizeFlags(cmd, opts)
	return cmd
}

// addQuantizeFlags defines quantize's flags and their completions.
func addQuantizeFlags(cmd *cobra.Command, opts *quantizeOptions) {
	fl := &opts.flags
	g := &opts.GPTQ
	f := cmd.Flags()
	f.StringVar(&opts.Model, "model", "", "source Hugging Face checkpoint: a directory, or a hub id OWNER/NAME[@REVISION] found in or fetched into the Hugging Face cache (required)")
	f.StringVar(&opts.Endpoint, "endpoint", "", hubEndpointUsage)
	f.StringVar(&opts.Out, "out", "", "output lfmq-1 checkpoint directory (required)")
	f.StringVar(&fl.method, "method", string(quant.GPTQ), "quantization method for the routed experts: gptq or rtn")
	f.StringVar(&fl.ffnFormat, "ffn-format", "bfp4", "dense LFM2 only: FFN w1/w3/w2 as bfp4 (by --method) or bfp8 (RTN; --method then defaults to rtn)")
	f.StringVar(&opts.Experts, "experts", "quantize", "routed experts: quantize (BFP4 by --method) or keep (BF16, an ablation)")
	f.IntVar(&opts.Workers, "workers", 0, "goroutines for tensors and experts (0 = all cores)")
	f.StringVar(&g.Calib, "calib", "", "calibration file: JSONL of text, chat or input_ids records, or a .safetensors token-id file (required for gptq)")
	f.IntVar(&g.CalibSeqs, "calib-seqs", g.CalibSeqs, "calibration windows to use")
	f.IntVar(&g.CalibLen, "calib-len", g.CalibLen, "tokens per window cut from text and chat records (input_ids records are used as given)")
	f.Uint64Var(&g.Seed, "seed", g.Seed, "seed of the choice of windows when the file yields more than --calib-seqs")
	f.StringVar(&g.ChatDate, "chat-date", g.ChatDate, "day (YYYY-MM-DD) a chat template's strftime_now sees when calibration and eval records are rendered")
	f.StringArrayVar(&fl.evalCorpora, "eval-corpus", nil, "eval corpus NAME=FILE (or FILE) the calibration set must not overlap, and the held-out text --drafter's acceptance is measured on; repeatable")
	f.StringVar(&opts.Drafter, "drafter", "", "also quantize the model's DSpark drafter (a directory, or a hub id OWNER/NAME[@REVISION]) into --out's drafter/, measuring its acceptance on --eval-corpus")
	f.BoolVar(&opts.DrafterOnly, "drafter-only", false, "quantize only --drafter, for the lfmq-1 checkpoint already in --out (made from --model), into its drafter/")
	f.IntVar(&opts.DrafterRecords, "drafter-records", quant.DefaultAcceptanceSetup.Records, "records per --eval-corpus the drafter's acceptance is measured on")
	f.Float64Var(&g.DampW13, "damp-w13", g.DampW13, "relative damping of w1/w3 (fraction of the mean Hessian diagonal)")
	f.Float64Var(&g.DampW2, "damp-w2", g.DampW2, fmt.Sprintf("relative damping of w2 (the reference release used %g)", quant.ReferenceDampW2))
	f.IntVar(&g.BlockSize, "block-size", g.BlockSize, "GPTQ lazy block size (changes speed, not bytes)")
	f.BoolVar(&g.ActOrder, "act-order", g.ActOrder, "quantize input indices by decreasing Hessian diagonal")
	f.Float64Var(&g.Shrink, "shrink", g.Shrink, "pseudo-count (effective tokens) shrinking each expert's Hessian toward its layer's pool")
	f.StringVar(&fl.w2Weight, "w2-weight", string(g.W2Weight), "Hessian weight of a routed token for w2: g (router weight) or g2 (its square)")
	f.BoolVar(&g.Sequential, "sequential", g.Sequential, "calibrate each layer with the layers below already quantized (--sequential=false: on the BF16 model)")
	f.StringVar(&fl.expRule, "exponent-rule", string(quant.ExponentMax), "shared exponent of each 16-weight BFP group of the routed experts: max (the plain packer), search (tt-metal's search: E−1 when it lowers the group's error) or hessian (gptq only: E, E−1 or E−2 by GPTQ loss)")
	f.StringVar(&fl.denseMethod, "dense-method", "", "BFP8 dense tensors and head: gptq (each solved against its input's Hessian; needs --method gptq) or rtn (round to nearest); default gptq when GPTQ quantizes the experts, else rtn")
	f.Float64Var(&g.DampDense, "damp-dense", g.DampDense, "relative damping of the BFP8 dense tensors and the head with --dense-method gptq")
	f.StringVar(&fl.denseRule, "dense-exponent-rule", string(quant.ExponentMax), "shared exponent rule of the BFP8 dense tensors and the head: max or search")
	f.BoolVar(&g.Resume, "resume", false, "continue an interrupted run of the same command")
	f.BoolVar(&g.Strict, "strict", false, "fail instead of falling back to RTN for a matrix GPTQ cannot solve")
	f.Int64Var(&fl.solveMiB, "solve-memory", 0, "MiB of scratch the GPTQ expert solves running at once may hold (0 = one layer's w1/w3 statistics size; changes speed and memory, not bytes)")
	cmd.MarkFlagDirname("model")
	cmd.MarkFlagDirname("out")
	cmd.MarkFlagDirname("drafter")
	cmd.MarkFlagFilename("calib", "jsonl", "safetensors")
	cmd.RegisterFlagCompletionFunc("method", cobra.FixedCompletions([]string{"gptq", "rtn"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("exponent-rule", cobra.FixedCompletions([]string{"max", "search", "hessian"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("dense-exponent-rule", cobra.FixedCompletions([]string{"max", "search"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("dense-method", cobra.FixedCompletions([]string{"rtn", "gptq"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("ffn-format", cobra.FixedCompletions([]string{"bfp4", "bfp8"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("experts", cobra.FixedCompletions([]string{"quantize", "keep"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("w2-weight", cobra.FixedCompletions([]string{"g", "g2"}, cobra.ShellCompDirectiveNoFileComp))
}

// validate checks the command line and reads the flags into o (usage
// errors, exit 2).
func (o *quantizeOptions) validate(cmd *cobra.Command) error {
	if err := requireFlags("model", o.Model, "out", o.Out); err != nil {
		return err
	}
	if o.DrafterOnly {
		return o.validateDrafterOnly(cmd)
	}
	m, err := quant.ParseMethod(o.flags.method)
	if err != nil {
		return &usageError{err}
	}
	o.Method = m
	switch o.flags.ffnFormat {
	case "bfp4":
		if cmd.Flags().Changed("ffn-format") {
			o.FFNFormat = lfmq1.BFP4 // refused for an LFM2-MoE, which has no FFN class
		}
	case "bfp8":
		// BFP8 is packed by RTN: the default method follows, a
		// typed gptq is a contradiction.
		if cmd.Flags().Changed("method") && m == quant.GPTQ {
			return &usageError{errors.New("--ffn-format bfp8 stores the FFN by RTN; GPTQ would have nothing to solve: drop --method gptq")}
		}
		o.Method, o.FFNFormat = quant.RTN, lfmq1.BFP8
		m = quant.RTN
	default:
		return &usageError{fmt.Errorf("--ffn-format must be bfp4 or bfp8, got %q", o.flags.ffnFormat)}
	}
	if o.Experts != "quantize" && o.Experts != "keep" {
		return &usageError{fmt.Errorf("--experts must be quantize or keep, got %q", o.Experts)}
	}
	if o.Workers < 0 {
		return &usageError{fmt.Errorf("--workers must be 0 (all cores) or positive, got %d", o.Workers)}
	}
	if err := parseExponentRules(o, m, o.flags.expRule, o.flags.denseRule); err != nil {
		return &usageError{err}
	}
	switch dm := quant.Method(o.flags.denseMethod); dm {
	case "":
		o.DenseMethod = defaultDenseMethod(m, o.Experts)
	case quant.RTN:
		o.DenseMethod = dm
	case quant.GPTQ:
		if m != quant.GPTQ {
			return &usageError{errors.New("--dense-method gptq needs --method gptq (its calibration statistics)")}
		}
		o.DenseMethod = dm
	default:
		return &usageError{fmt.Errorf("--dense-method must be rtn or gptq, got %q", o.flags.denseMethod)}
	}
	useGPTQ := m == quant.GPTQ && (o.Experts == "quantize" || o.DenseMethod == quant.GPTQ)
	for _, f := range gptqFlags {
		if !useGPTQ && cmd.Flags().Changed(f) {
			return &usageError{fmt.Errorf("--%s applies to --method gptq with --experts quantize or --dense-method gptq", f)}
		}
	}
	// Within a GPTQ run, a flag of a part that is not solved would
	// be ignored without a word.
	for _, f := range expertGPTQFlags {
		if useGPTQ && o.Experts != "quantize" && cmd.Flags().Changed(f) {
			return &usageError{fmt.Errorf("--%s applies to the routed experts' GPTQ; --experts keep leaves them in BF16", f)}
		}
	}
	if useGPTQ && o.DenseMethod != quant.GPTQ && cmd.Flags().Changed("damp-dense") {
		return &usageError{errors.New("--damp-dense applies to --dense-method gptq; with --dense-method rtn the BFP8 tensors are rounded to nearest")}
	}
	if err := o.validateDrafter(cmd, useGPTQ); err != nil {
		return err
	}
	if useGPTQ {
		if err := parseGPTQFlags(o, o.flags.w2Weight, o.flags.evalCorpora, o.flags.solveMiB); err != nil {
			return &usageError{err}
		}
	}
	return nil
}

// validateDrafter checks --drafter and the flags that serve it: its
// acceptance needs held-out text, and --eval-corpus and --chat-date mean
// something without GPTQ only with it.
func (o *quantizeOptions) validateDrafter(cmd *cobra.Command, useGPTQ bool) error {
	if o.Drafter == "" {
		if cmd.Flags().Changed("drafter-records") {
			return &usageError{errors.New("--drafter-records applies to --drafter")}
		}
		for _, f := range []string{"eval-corpus", "chat-date"} {
			if !useGPTQ && cmd.Flags().Changed(f) {
				return &usageError{fmt.Errorf("--%s applies to --method gptq with --experts quantize or --dense-method gptq, or to --drafter", f)}
			}
		}
		return nil
	}
	if len(o.flags.evalCorpora) == 0 {
		return &usageError{errors.New("--drafter needs --eval-corpus: the held-out text the quantized drafter's acceptance is measured on")}
	}
	if o.DrafterRecords < 1 {
		return &usageError{fmt.Errorf("--drafter-records must be at least 1, got %d", o.DrafterRecords)}
	}
	if !quant.ValidChatDate(o.GPTQ.ChatDate) {
		return &usageError{fmt.Errorf("--chat-date must be a day written YYYY-MM-DD, got %q", o.GPTQ.ChatDate)}
	}
	var err error
	if o.EvalCorpora, err = parseEvalCorpora(o.flags.evalCorpora); err != nil {
		return &usageError{err}
	}
	return nil
}

// drafterOnlyFlags are the flags --drafter-only reads: the drafter's, and
// what checks the checkpoint in --out against --model.
var drafterOnlyFlags = map[string]bool{"model": true, "out": true, "endpoint": true, "workers": true, "drafter": true, "drafter-only": true,
	"drafter-records": true, "eval-corpus": true, "chat-date": true, "dense-exponent-rule": true}

// validateDrafterOnly checks a --drafter-only command line: the model is
// not quantized, so a flag that shapes its quantization is a mistake.
func (o *quantizeOptions) validateDrafterOnly(cmd *cobra.Command) error {
	if o.Drafter == "" {
		return &usageError{errors.New("--drafter-only needs --drafter: the drafter to quantize for --out's checkpoint")}
	}
	var stray string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if stray == "" && !drafterOnlyFlags[f.Name] {
			stray = f.Name
		}
	})
	if stray != "" {
		return &usageError{fmt.Errorf("--%s shapes the model's quantization; --drafter-only quantizes the drafter alone, for the checkpoint already in --out", stray)}
	}
	if o.Workers < 0 {
		return &usageError{fmt.Errorf("--workers must be 0 (all cores) or positive, got %d", o.Workers)}
	}
	d, err := quant.ParseExponentRule(o.flags.denseRule)
	if err != nil || d == quant.ExponentHessian {
		return &usageError{fmt.Errorf("--dense-exponent-rule must be max or search (hessian is a rule of the routed experts only), got %q", o.flags.denseRule)}
	}
	o.DenseExponentRule = d
	return o.validateDrafter(cmd, false)
}

// parseEvalCorpora parses the --eval-corpus values: NAME=FILE, or FILE
// named by its base name without extension; each name once.
func parseEvalCorpora(values []string) ([]quant.EvalCorpus, error) {
	var out []quant.EvalCorpus
	seen := map[string]bool{}
	for _, s := range values {
		name, path, ok := strings.Cut(s, "=")
		if !ok {
			path = s
			name = strings.TrimSuffix(filepath.Base(s), filepath.Ext(s))
		}
		if name == "" || path == "" {
			return nil, fmt.Errorf("--eval-corpus %q: want NAME=FILE or FILE", s)
		}
		if seen[name] {
			return nil, fmt.Errorf("--eval-corpus: the name %q is given twice", name)
		}
		seen[name] = true
		out = append(out, quant.EvalCorpus{Name: name, Path: path})
	}
	return out, nil
}

// parseExponentRules checks --exponent-rule and --dense-exponent-rule:
// hessian needs GPTQ's Hessian, which RTN, kept experts and the dense
// tensors do not have.
func parseExponentRules(opts *quantizeOptions, m quant.Method, expRule, denseRule string) error {
	r, err := quant.ParseExponentRule(expRule)
	if err != nil {
		return fmt.Errorf("--exponent-rule must be max, search or hessian, got %q", expRule)
	}
	if r == quant.ExponentHessian && (m != quant.GPTQ || opts.Experts != "quantize") {
		return errors.New("--exponent-rule hessian needs --method gptq with --experts quantize (RTN has no Hessian; use max or search)")
	}
	d, err := quant.ParseExponentRule(denseRule)
	if err != nil || d == quant.ExponentHessian {
		return fmt.Errorf("--dense-exponent-rule must be max or search (hessian is a rule of the routed experts only), got %q", denseRule)
	}
	opts.ExponentRule, opts.DenseExponentRule = r, d
	return nil
}

// finiteNonNegative reports whether v is a number a damping or a
// pseudo-count can be: not NaN, not infinite, not negative.
func finiteNonNegative(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// solveMemoryMaxMiB is the largest --solve-memory: 1 PiB, far above any
// machine, and small enough that the byte count cannot overflow.
const solveMemoryMaxMiB = 1 << 30

// parseGPTQFlags completes and checks the GPTQ options from the flags.
func parseGPTQFlags(opts *quantizeOptions, w2Weight string, evalCorpora []string, solveMiB int64) error {
	g := &opts.GPTQ
	if g.Calib == "" {
		return errors.New("--calib is required with --method gptq (or use --method rtn)")
	}
	g.W2Weight = hessian.Weighting(w2Weight)
	if !g.W2Weight.Valid() {
		return fmt.Errorf("--w2-weight must be g or g2, got %q", w2Weight)
	}
	var err error
	if g.EvalCorpora, err = parseEvalCorpora(evalCorpora); err != nil {
		return err
	}
	switch {
	case g.CalibSeqs < 1:
		return fmt.Errorf("--calib-seqs must be at least 1, got %d", g.CalibSeqs)
	case g.CalibLen < 2:
		return fmt.Errorf("--calib-len must be at least 2, got %d", g.CalibLen)
	case !quant.ValidChatDate(g.ChatDate):
		return fmt.Errorf("--chat-date must be a day written YYYY-MM-DD, got %q", g.ChatDate)
	case !finiteNonNegative(g.DampW13):
		return fmt.Errorf("--damp-w13 must be a finite number ≥ 0, got %v", g.DampW13)
	case !finiteNonNegative(g.DampW2):
		return fmt.Errorf("--damp-w2 must be a finite number ≥ 0, got %v", g.DampW2)
	case !finiteNonNegative(g.DampDense):
		return fmt.Errorf("--damp-dense must be a finite number ≥ 0, got %v", g.DampDense)
	case g.BlockSize < 1:
		return fmt.Errorf("--block-size must be at least 1, got %d", g.BlockSize)
	case !finiteNonNegative(g.Shrink):
		return fmt.Errorf("--shrink must be a finite number ≥ 0, got %v", g.Shrink)
	case solveMiB < 0 || solveMiB > solveMemoryMaxMiB:
		return fmt.Errorf("--solve-memory must be 0 (automatic) or a number of MiB up to %d, got %d", solveMemoryMaxMiB, solveMiB)
	}
	g.SolveMemory = solveMiB << 20
	return nil
}

func quantizeRun(cmd *cobra.Command, opts *quantizeOptions) error {
	if opts.DrafterOnly {
		return drafterOnlyRun(cmd, opts)
	}
	if err := quantizeInputs(cmd, opts); err != nil {
		return err
	}
	start := time.Now()
	res, err := quantizeWork(cmd.Context(), opts)
	if err != nil {
		return err
	}
	writeQuantizeSummary(opts.IO, res, time.Since(start))
	if opts.drafterDir == "" {
		return nil
	}
	start = time.Now()
	dres, err := quantizeDrafter(cmd.Context(), opts)
	if err != nil {
		return fmt.Errorf("%w (the model's checkpoint %s is complete, its drafter is not: once the cause is fixed, the same command with --drafter-only quantizes the drafter alone)", err, opts.Out)
	}
	writeDrafterSummary(opts.IO, dres, time.Since(start))
	return nil
}

// drafterOnlyRun quantizes --drafter for the checkpoint in --out, which
// must be an lfmq-1 checkpoint made from --model without a drafter yet: a
// drafter added to a checkpoint made earlier, or one whose drafter step
// was interrupted, without quantizing the model again.
func drafterOnlyRun(cmd *cobra.Command, opts *quantizeOptions) error {
	if isHubID(opts.Model) && !dirExists(opts.Model) {
		dir, err := resolveHubModel(cmd, opts.IO, "--model", opts.Model, opts.Endpoint)
		if err != nil {
			return err
		}
		opts.Model = dir
	}
	if err := requireCheckpoint("--model", opts.Model, opts.Model); err != nil {
		return err
	}
	if err := requireLFMQ1("--out", opts.Out); err != nil {
		return err
	}
	if d := filepath.Join(opts.Out, quant.DrafterDir); dirExists(d) {
		return &usageError{fmt.Errorf("--out %s already has a drafter (%s); remove it to quantize the drafter again", opts.Out, d)}
	}
	man, _, err := lfmq1.ReadManifest(opts.Out)
	if err != nil {
		return err
	}
	sum, _, err := lfmq1.HashFile(filepath.Join(opts.Model, "config.json"))
	if err != nil {
		return err
	}
	if man.Source.ConfigSHA256 != sum {
		return &usageError{fmt.Errorf("--out %s was not quantized from --model %s: its manifest's source config.json has sha256 %s, --model's %s", opts.Out, opts.Model, man.Source.ConfigSHA256, sum)}
	}
	files := []string{}
	for _, c := range opts.EvalCorpora {
		files = append(files, "--eval-corpus "+c.Name+"="+c.Path, c.Path)
	}
	if err := requireFiles(files...); err != nil {
		return err
	}
	if err := checkDrafter(cmd, opts); err != nil {
		return err
	}
	start := time.Now()
	dres, err := quantizeDrafter(cmd.Context(), opts)
	if err != nil {
		return err
	}
	writeDrafterSummary(opts.IO, dres, time.Since(start))
	return nil
}

// dirExists reports whether path is a directory.
func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// quantizeDrafter quantizes --drafter into --out's drafter directory, for
// the model just written there.
func quantizeDrafter(ctx context.Context, opts *quantizeOptions) (*quant.DrafterResult, error) {
	opts.IO.Errorf("quantizing the drafter %s and measuring its acceptance\n", opts.Drafter)
	return quant.QuantizeDrafter(ctx, quant.DrafterOptions{
		SourceDir: opts.drafterDir, TargetDir: opts.Out, OutDir: filepath.Join(opts.Out, quant.DrafterDir),
		CreatedBy: drafterCreatedBy(opts), Workers: opts.Workers, ExponentRule: opts.DenseExponentRule,
		EvalCorpora: opts.EvalCorpora, ChatDate: opts.GPTQ.ChatDate,
		Setup: quant.AcceptanceSetup{Records: opts.DrafterRecords},
	})
}

// drafterCreatedBy is the drafter manifest's created_by: as createdBy,
// the settings that change its bytes (the exponent rule) or its recorded
// acceptance (the corpora by name, the records, the chat date), not paths.
func drafterCreatedBy(opts *quantizeOptions) string {
	s := "lfmq quantize --drafter"
	if r := opts.DenseExponentRule; r != "" && r != quant.ExponentMax {
		s += " --dense-exponent-rule " + string(r)
	}
	names := make([]string, len(opts.EvalCorpora))
	for i, c := range opts.EvalCorpora {
		names[i] = c.Name
	}
	slices.Sort(names)
	for _, n := range names {
		s += " --eval-corpus " + n
	}
	if opts.DrafterRecords != quant.DefaultAcceptanceSetup.Records {
		s += " --drafter-records " + strconv.Itoa(opts.DrafterRecords)
	}
	if d := quant.DefaultGPTQOptions().ChatDate; opts.GPTQ.ChatDate != d {
		s += " --chat-date " + opts.GPTQ.ChatDate
	}
	return s
}

// writeDrafterSummary prints what the drafter step wrote and what
// quantizing the drafter cost in tokens per verify step.
func writeDrafterSummary(ios *IOStreams, res *quant.DrafterResult, elapsed time.Duration) {
	out := ios.Out
	acc := res.Acceptance
	fmt.Fprintf(out, "wrote lfmq-1 drafter %s\n", res.OutDir)
	fmt.Fprintf(out, "  tensors         %d\n", res.Tensors)
	fmt.Fprintf(out, "  size            %s of tensor data (source %s, %s)\n", units.Bytes(res.Bytes), units.Bytes(res.SourceBytes), sizeChange(res.Bytes, res.SourceBytes))
	fmt.Fprintf(out, "  manifest sha256 %s\n", res.ManifestSHA256)
	fmt.Fprintf(out, "  time            %s\n", elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "\ntokens per verify step on the quantized model (%d records per corpus, %d-token prompts, %d new tokens, greedy):\n",
		acc.Setup.Records, acc.Setup.PromptTokens, acc.Setup.NewTokens)
	t := &table{}
	t.add("corpus", "records", "BF16 drafter", "BFP8 drafter", "change")
	row := func(name string, records int, b, q quant.AcceptanceRun) {
		t.add(name, strconv.Itoa(records), ratio(b.TokensPerStep), ratio(q.TokensPerStep), fmt.Sprintf("%+.1f%%", 100*(q.TokensPerStep/b.TokensPerStep-1)))
	}
	n := 0
	for _, c := range acc.Corpora {
		row(c.Name, c.Records, c.BF16, c.Quantized)
		n += c.Records
	}
	row("all", n, acc.BF16, acc.Quantized)
	t.write(out)
}

// quantizeInputs checks the model, the output and the calibration files
// before anything is read, and resolves a model named by its hub id into
// opts.Model.
func quantizeInputs(cmd *cobra.Command, opts *quantizeOptions) error {
	checkModel := func() error {
		if has := lfmq1Has(opts.Model); has != "" {
			// Quantizing an lfmq-1 checkpoint again is a mix-up of directories;
			// the loader would only say that it is not a Hugging Face one.
			return &usageError{fmt.Errorf("--model %s: an lfmq-1 checkpoint (it has %s); quantize takes the BF16 Hugging Face checkpoint it came from", opts.Model, has)}
		}
		return requireCheckpoint("--model", opts.Model, opts.Model)
	}
	// A model named by its hub id is looked up (and perhaps fetched) only
	// once the rest of the command line has passed its checks.
	hub := isHubID(opts.Model)
	if !hub {
		if err := checkModel(); err != nil {
			return err
		}
	}
	// The output is checked before the calibration set, the eval corpora
	// and the model are read, which takes a while on a large model.
	if err := requireOutDir("--out "+opts.Out, opts.Out); err != nil {
		return err
	}
	if entries, err := os.ReadDir(opts.Out); err == nil && len(entries) > 0 {
		return &lfmq1.OutputExistsError{Dir: opts.Out}
	}
	if opts.Method == quant.GPTQ || opts.Drafter != "" {
		var files []string
		if opts.Method == quant.GPTQ {
			files = append(files, "--calib "+opts.GPTQ.Calib, opts.GPTQ.Calib)
		}
		corpora := opts.GPTQ.EvalCorpora
		if opts.Drafter != "" {
			corpora = opts.EvalCorpora
		}
		for _, c := range corpora {
			files = append(files, "--eval-corpus "+c.Name+"="+c.Path, c.Path)
		}
		if err := requireFiles(files...); err != nil {
			return err
		}
	}
	if !hub && opts.Drafter != "" && !isHubID(opts.Drafter) {
		if err := checkDrafter(cmd, opts); err != nil {
			return err
		}
	}
	if hub {
		dir, err := resolveHubModel(cmd, opts.IO, "--model", opts.Model, opts.Endpoint)
		if err != nil {
			return err
		}
		opts.Model = dir
		if err := checkModel(); err != nil {
			return err
		}
	}
	if opts.Drafter != "" && (hub || isHubID(opts.Drafter)) {
		if err := checkDrafter(cmd, opts); err != nil {
			return err
		}
	}
	return nil
}

// checkDrafter resolves --drafter and checks its config against the
// model's before minutes of quantizing the model: a drafter for another
// model, or one already quantized, is the command line's mistake.
func checkDrafter(cmd *cobra.Command, opts *quantizeOptions) error {
	dir, err := resolveDrafterArg(cmd, opts.IO, opts.Drafter, opts.Endpoint)
	if err != nil {
		return err
	}
	if lfmq1.IsCheckpoint(dir) {
		return &usageError{fmt.Errorf("--drafter %s: an lfmq-1 checkpoint (it has %s); quantize takes the published BF16 drafter", opts.Drafter, lfmq1.ManifestFile)}
	}
	dc, err := draft.LoadConfig(dir)
	if err != nil {
		return &usageError{fmt.Errorf("--drafter %s: %w", opts.Drafter, err)}
	}
	mc, err := config.Load(opts.Model)
	if err != nil {
		return err
	}
	if err := dc.CheckTarget(filepath.Join(dir, "config.json"), mc); err != nil {
		return &usageError{fmt.Errorf("--drafter %s: %w", opts.Drafter, err)}
	}
	opts.drafterDir = dir
	return nil
}

// quantizeWork quantizes with progress on the error stream, and maps the
// errors that the command line can settle to usage errors.
func quantizeWork(ctx context.Context, opts *quantizeOptions) (*quant.Result, error) {
	opts.IO.ConfigWarnings(opts.Model)
	prog := progress.NewQuantize(opts.IO.ErrOut, opts.IO.ErrTTY, statusEvery)
	defer prog.Stop()
	res, err := quant.Quantize(ctx, quant.Options{
		ModelDir:    opts.Model,
		OutDir:      opts.Out,
		Method:      opts.Method,
		Workers:     opts.Workers,
		KeepExperts: opts.Experts == "keep",
		CreatedBy:   createdBy(opts),
		Progress:    prog.Progress(),
		GPTQ:        opts.GPTQ,

		ExponentRule:      opts.ExponentRule,
		DenseExponentRule: opts.DenseExponentRule,
		FFNFormat:         opts.FFNFormat,
		DenseMethod:       opts.DenseMethod,
	})
	// The status lines end before anything else is written.
	if err := prog.Finish(err == nil); err != nil {
		return nil, err
	}
	// An interrupted run's partial directory, met without --resume or
	// with other settings, is the command line's to settle, like an output
	// directory that is not empty: the right flags make it work.
	var pe *lfmq1.PartialExistsError
	if errors.As(err, &pe) {
		return nil, &usageError{fmt.Errorf("--out %s: %s holds an interrupted run; rerun with --resume to continue it, or remove %s to start over", pe.Dir, pe.Partial, pe.Partial)}
	}
	var rm *quant.ResumeMismatchError
	var ae *quant.ArchitectureError
	if errors.As(err, &rm) {
		return nil, &usageError{err}
	}
	if errors.As(err, &ae) {
		return nil, &usageError{architectureMessage(ae)}
	}
	return res, err
}

// writeQuantizeSummary prints what a run wrote and, for GPTQ, its
// per-layer table.
func writeQuantizeSummary(ios *IOStreams, res *quant.Result, elapsed time.Duration) {
	out := ios.Out
	fmt.Fprintf(out, "wrote lfmq-1 checkpoint %s\n", res.OutDir)
	fmt.Fprintf(out, "  tensors         %d\n", res.Tensors)
	fmt.Fprintf(out, "  size            %s of tensor data (source %s, %s)\n", units.Bytes(res.Bytes), units.Bytes(res.SourceBytes), sizeChange(res.Bytes, res.SourceBytes))
	fmt.Fprintf(out, "  manifest sha256 %s\n", res.ManifestSHA256)
	fmt.Fprintf(out, "  time            %s\n", elapsed.Round(time.Millisecond))
	if res.GPTQ != nil {
		writeGPTQSummary(ios, res.GPTQ)
	}
}

// architectureMessage says which flag the checkpoint's architecture has no
// use for, in the command line's terms.
func architectureMessage(ae *quant.ArchitectureError) error {
	switch ae.Option {
	case "KeepExperts":
		return fmt.Errorf("--experts keep: --model is a dense LFM2 (model_type %q), which has no routed experts", ae.ModelType)
	case "FFNFormat":
		return fmt.Errorf("--ffn-format: --model is model_type %q; only dense LFM2 checkpoints (model_type \"lfm2\") have an FFN class to format", ae.ModelType)
	}
	return ae
}

// writeGPTQSummary prints the per-layer table of a GPTQ run (mean GPTQ/RTN
// loss ratio per projection), the time split and the throughput.
func writeGPTQSummary(ios *IOStreams, r *quant.GPTQReport) {
	out := ios.Out
	over, tokens := "mean over experts", "tokens/expert min/med/max"
	if r.FFN {
		over, tokens = "each layer's FFN", "tokens"
	}
	fmt.Fprintf(out, "\nGPTQ loss / RTN loss under the same Hessian (%s), %d calibration tokens:\n", over, r.CalibTokens)
	t := &table{}
	t.add("layer", tokens, "w1", "w3", "w2", "mean", "max", "fallbacks", "forward", "statistics", "solve")
	var fwd, stats, solve, up, down time.Duration
	var upF, downF, solveF float64
	var sum, worst float64
	n := 0
	for _, l := range r.Layers {
		m := l.Metrics
		note := ""
		if l.Resumed {
			note = " (resumed)"
		}
		toks := fmt.Sprintf("%d/%g/%d", m.TokensMin, m.TokensMedian, m.TokensMax)
		if r.FFN {
			toks = strconv.Itoa(m.TokensMax) // every token reaches the one FFN
		}
		t.add(strconv.Itoa(l.Layer)+note, toks,
			ratio(m.MeanRatioW1), ratio(m.MeanRatioW3), ratio(m.MeanRatioW2), ratio(m.MeanRatio), ratio(m.MaxRatio),
			strconv.Itoa(m.Fallbacks), seconds(l.Forward), seconds(l.UpStats+l.DownStats), seconds(l.SolveW13+l.SolveW2))
		fwd += l.Forward
		stats += l.UpStats + l.DownStats
		solve += l.SolveW13 + l.SolveW2
		if !l.Resumed {
			up, down = up+l.UpStats, down+l.DownStats
			upF += l.UpHessianFLOP
			downF += l.DownHessianFLOP + l.DownInputFLOP
			solveF += l.SolveFLOP
		}
		sum += m.MeanRatio
		worst = max(worst, m.MaxRatio)
		n++
	}
	if n > 0 {
		// Every layer has the same number of expert matrices, so the mean of
		// the layer means is the mean over all matrices.
		t.add("all", "", "", "", "", ratio(sum/float64(n)), ratio(worst), strconv.Itoa(r.Fallbacks), seconds(fwd), seconds(stats), seconds(solve))
	}
	t.write(out)
	fmt.Fprintf(out, "time: dense RTN %s, calibration forward %s, statistics %s, solves %s\n",
		seconds(r.Dense), seconds(fwd), seconds(stats), seconds(solve))
	if r.DenseGPTQ > 0 {
		fmt.Fprintf(out, "dense GPTQ (the BFP8 tensors' forwards, statistics and solves): %s (forwards and statistics %s, solves and packing %s; the head's file %s of it)\n",
			seconds(r.DenseGPTQ), seconds(r.DenseStats), seconds(r.DenseGPTQ-r.DenseStats), seconds(r.HeadGPTQ))
	}
	if r.MemoryBudget > 0 {
		fmt.Fprintf(out, "memory budget: %s of live heap (the collector's soft limit is an eighth more) and %s of mapped file pages\n", units.Bytes(r.MemoryBudget), units.Bytes(r.MappedBudget))
	}
	if up > 0 && down > 0 && solve > 0 {
		fmt.Fprintf(out, "throughput: w1/w3 Hessians %.2f GFLOP/s, w2 inputs and Hessians %.2f GFLOP/s, solves and loss metrics %.2f GFLOP/s\n",
			upF/up.Seconds()/1e9, downF/down.Seconds()/1e9, solveF/solve.Seconds()/1e9)
	}
	if r.Fallbacks > 0 {
		fmt.Fprintf(out, "%d matrices fell back to RTN\n", r.Fallbacks)
	}
	// Each warning was shown as it happened too; the summary repeats them
	// after the figures, where they are not scrolled away.
	for _, w := range r.Warnings {
		ios.Errorf("warning: %s\n", w)
	}
}

// defaultDenseMethod is --dense-method when it is not given: gptq when GPTQ
// quantizes the experts (the calibration statistics are gathered anyway, and
// solving the BFP8 tensors too lowered KL on every corpus of the fixture,
// issue 23), rtn otherwise, so that --method rtn and the --experts keep
// ablation need no calibration set.
func defaultDenseMethod(m quant.Method, experts string) quant.Method {
	if m == quant.GPTQ && experts == "quantize" {
		return quant.GPTQ
	}
	return quant.RTN
}

func ratio(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s" }

// createdBy is the manifest's created_by: the command line that makes the
// checkpoint, written from the effective settings rather than from the flags
// as typed, because the manifest is the checkpoint's identity and must not
// change with how a setting was spelled (a default typed out, a flag order).
// It holds the method and, in a fixed order, every setting that can change
// the bytes and differs from its default. Left out: paths, which belong to
// the machine (the manifest identifies the files by their digests);
// --workers, --block-size, --solve-memory and --resume, which change speed
// (and memory) only; and
// --strict, which can refuse a result but never changes one.
func createdBy(opts *quantizeOptions) string {
	// The rules are named only when they differ from max, so the manifest
	// of a default run reads as it did before the flags existed.
	dense := ""
	if r := opts.DenseExponentRule; r != "" && r != quant.ExponentMax {
		dense = " --dense-exponent-rule " + string(r)
	}
	denseGPTQ := opts.DenseMethod == quant.GPTQ
	denseDefault := defaultDenseMethod(opts.Method, opts.Experts) == quant.GPTQ
	if opts.Experts != "quantize" && !denseGPTQ {
		// The method and the experts' rule are not used when the experts
		// are kept.
		return "lfmq quantize --experts " + opts.Experts + dense
	}
	s := "lfmq quantize --method " + string(opts.Method)
	if opts.Experts != "quantize" {
		s += " --experts " + opts.Experts
	}
	if opts.FFNFormat == lfmq1.BFP8 {
		s += " --ffn-format bfp8"
	}
	if r := opts.ExponentRule; r != "" && r != quant.ExponentMax && opts.Experts == "quantize" {
		s += " --exponent-rule " + string(r)
	}
	switch {
	case denseGPTQ && !denseDefault:
		s += " --dense-method gptq"
	case !denseGPTQ && denseDefault:
		s += " --dense-method rtn"
	}
	s += dense
	if opts.Method != quant.GPTQ {
		return s
	}
	g, d := opts.GPTQ, quant.DefaultGPTQOptions()
	add := func(changed bool, flag, value string) {
		if changed {
			s += " " + flag + value
		}
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	add(g.CalibSeqs != d.CalibSeqs, "--calib-seqs ", strconv.Itoa(g.CalibSeqs))
	add(g.CalibLen != d.CalibLen, "--calib-len ", strconv.Itoa(g.CalibLen))
	add(g.Seed != d.Seed, "--seed ", strconv.FormatUint(g.Seed, 10))
	add(g.ChatDate != d.ChatDate, "--chat-date ", g.ChatDate)
	names := make([]string, len(g.EvalCorpora))
	for i, c := range g.EvalCorpora {
		names[i] = c.Name
	}
	slices.Sort(names)
	for _, n := range names {
		add(true, "--eval-corpus ", n)
	}
	add(g.DampW13 != d.DampW13, "--damp-w13 ", num(g.DampW13))
	add(g.DampW2 != d.DampW2, "--damp-w2 ", num(g.DampW2))
	add(g.ActOrder != d.ActOrder, "--act-order=", strconv.FormatBool(g.ActOrder))
	add(g.Shrink != d.Shrink, "--shrink ", num(g.Shrink))
	add(g.W2Weight != d.W2Weight, "--w2-weight ", string(g.W2Weight))
	add(g.Sequential != d.Sequential, "--sequential=", strconv.FormatBool(g.Sequential))
	add(denseGPTQ && g.DampDense != d.DampDense, "--damp-dense ", num(g.DampDense))
	return s
}

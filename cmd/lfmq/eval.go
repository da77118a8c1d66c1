package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/engine/api"
	"github.com/lfmq/lfmq/engine/device/pick"
	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/serve"
	"github.com/lfmq/lfmq/engine/tokenizer"
	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/task"
	"github.com/lfmq/lfmq/hub/hfcache"
	"github.com/lfmq/lfmq/hub/hubapi"
	"github.com/lfmq/lfmq/internal/progress"
	"github.com/lfmq/lfmq/version"
)

type evalOptions struct {
	IO          *IOStreams
	URL         string
	APIKeyFile  string
	ServedModel string
	Model       string
	Drafter     string
	DraftDepth  int
	Threads     int
	Device      string
	Task        string
	Dataset     string
	Tokenizer   string
	Limit       int
	MaxTokens   int
	Preset      string
	Temperature float64
	TopP        float64
	TopK        int
	MinP        float64
	RepPenalty  float64
	Seeds       []uint
	Repeat      int
	Concurrency int
	Timeout     time.Duration
	Label       string
	Out         string
	Items       string
	// sampling holds the fields sent, from --sampling-preset and the
	// explicit flags; seeds the runs' seeds.
	sampling task.Sampling
	seeds    []uint64
	kind     task.Kind
	command  string
	// maxTokensGiven is whether --max-tokens was given: if not, the
	// default shrinks to what the model's context leaves.
	maxTokensGiven bool
	// inProcessURL is the loopback URL of the in-process server.
	inProcessURL string
}

func newEvalCmd(ios *IOStreams, runF func(*evalOptions) error) *cobra.Command {
	opts := &evalOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "eval (--url URL | --model DIR) --dataset FILE [--task gsm8k|choice] [--limit N] [--seed S] [--concurrency C] [--out FILE]",
		Short: "Run a task (GSM8K-style word problems, or multiple choice by likelihood) against a server or in process",
		Long: `Eval runs a task's items against a running OpenAI-compatible server (--url; lfmq
serve, vLLM, llama.cpp's server) or in process (--model DIR: the checkpoint is
served by the engine on a loopback port, so the texts are those lfmq serve
would give).

--task gsm8k sends each question as the one user message of a chat (the model's
chat template decides whether it thinks) and takes the answer from the final
answer's last "#### N" line, else its last \boxed{}, else its last number
(docs/eval.md has the rule); the gold answer is the "#### N" line of the item's
solution. --task choice scores each choice of a multiple-choice item by its
log-likelihood after the context: in process from one forked engine state per
item, or over /v1/completions with echo and logprobs (the request
lm-evaluation-harness sends), tokenized with --tokenizer DIR.

Datasets are JSONL: {"question", "answer"} records (GSM8K's format) or
{"context", "choices", "answer": index} records, each with an optional "id";
or parquet files with those columns; or a file of a hub dataset,
datasets/OWNER/NAME[@REVISION]:PATH, read from (or fetched into) the Hugging
Face cache as models are. The file's sha256, and a hub dataset's commit, go
into the receipts.
--limit takes the first N items in file order. Each --seed (or --repeat N seeds
from --seed) is one run; --sampling-preset or the explicit sampling flags set the
fields sent with every request.

The summary (accuracy with a Wilson 95 % interval, truncations, mean new tokens,
wall time) goes to stdout as a table; --out writes it as JSON with every item
and the receipts (server identity from /v1/models, lfmq version, command line,
dataset sha256); --items writes one JSONL line per item. 'lfmq eval compare'
checks that two or more runs gave the same texts.`,
		Example: `  lfmq eval --url http://127.0.0.1:8000 --dataset word-problems.jsonl --limit 20 \
      --seed 1 --concurrency 4 --max-tokens 512 --out c4.json
  lfmq eval --model ./ckpt --dataset word-problems.jsonl --sampling-preset reasoning \
      --seed 1 --repeat 3 --out presets.json
  lfmq eval --model ./ckpt --task choice --dataset choice.jsonl --out choice.json
  lfmq eval --url http://127.0.0.1:8000 --limit 50 --seed 1 --concurrency 16 \
      --dataset datasets/openai/gsm8k:main/test-00000-of-00001.parquet --out c16.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			opts.command = givenFlagsCommandLine(cmd, "lfmq", "eval")
			if runF != nil {
				return runF(opts)
			}
			return evalRun(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.URL, "url", "", "ask the server at this base URL, http://HOST:PORT")
	f.StringVar(&opts.APIKeyFile, "api-key-file", "", "read the server's API key from `FILE` (default $LFMQ_API_KEY)")
	f.StringVar(&opts.ServedModel, "served-model", "", "the model id to ask the server for (default: the one it lists)")
	f.StringVar(&opts.Model, "model", "", "run in process on the checkpoint in `DIR` instead of asking a server")
	f.StringVar(&opts.Drafter, "drafter", "", "in process, decode drafted with this DSpark drafter `DIR` (the texts do not depend on it)")
	f.IntVar(&opts.DraftDepth, "draft-depth", 0, "in process with --drafter, drafts verified per sequence and step (0 = scheduled by cost)")
	f.IntVar(&opts.Threads, "threads", 0, "compute threads in process (0 = all cores); the texts do not depend on it")
	addDeviceFlag(f, &opts.Device)
	f.StringVar(&opts.Task, "task", string(task.GSM8K), "the task: gsm8k or choice")
	f.StringVar(&opts.Dataset, "dataset", "", "the items: a JSONL or parquet `FILE`, or datasets/OWNER/NAME[@REV]:PATH on the hub (required)")
	f.StringVar(&opts.Tokenizer, "tokenizer", "", "checkpoint `DIR` whose tokenizer encodes choice items for --url")
	f.IntVar(&opts.Limit, "limit", 0, "ask only the first N items, in file order (0 = all)")
	f.IntVar(&opts.MaxTokens, "max-tokens", 4096, "new tokens per answer at most, reasoning included (the default shrinks to what the model's context leaves)")
	f.StringVar(&opts.Preset, "sampling-preset", "", "send this preset's sampling fields: "+strings.Join(sample.PresetNames(), ", "))
	f.Float64Var(&opts.Temperature, "temperature", 0, "sampling temperature (over the preset's)")
	f.Float64Var(&opts.TopP, "top-p", 0, "nucleus sampling mass (over the preset's)")
	f.IntVar(&opts.TopK, "top-k", 0, "sample from the K most likely tokens (over the preset's)")
	f.Float64Var(&opts.MinP, "min-p", 0, "minimum probability relative to the top token (over the preset's)")
	f.Float64Var(&opts.RepPenalty, "repetition-penalty", 0, "repetition penalty (over the preset's)")
	f.UintSliceVar(&opts.Seeds, "seed", nil, "seed sent with every request; a list runs once per seed")
	f.IntVar(&opts.Repeat, "repeat", 1, "run N times with seeds --seed, --seed+1, …")
	f.IntVar(&opts.Concurrency, "concurrency", 1, "items in flight at once")
	f.DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "bound on one request")
	f.StringVar(&opts.Label, "label", "", "name of the run in tables (default: the --out file's name)")
	f.StringVar(&opts.Out, "out", "", "write the summary, every item and the receipts as JSON to `FILE`")
	f.StringVar(&opts.Items, "items", "", "write one JSONL line per item to `FILE`")
	cmd.MarkFlagFilename("dataset", "jsonl")
	cmd.MarkFlagFilename("api-key-file")
	cmd.MarkFlagDirname("model")
	cmd.MarkFlagDirname("tokenizer")
	cmd.RegisterFlagCompletionFunc("task", cobra.FixedCompletions([]string{string(task.GSM8K), string(task.Choice)}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("sampling-preset", cobra.FixedCompletions(sample.PresetNames(), cobra.ShellCompDirectiveNoFileComp))
	cmd.AddCommand(newEvalCompareCmd(ios, nil))
	return cmd
}

// validate checks the command line into opts (usage errors, exit 2).
func (o *evalOptions) validate(cmd *cobra.Command) error {
	usage := func(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }
	if err := requireFlags("dataset", o.Dataset); err != nil {
		return err
	}
	kind, err := task.ParseKind(o.Task)
	if err != nil {
		return usage("--task %q: want gsm8k or choice", o.Task)
	}
	o.kind = kind
	switch {
	case o.URL == "" && o.Model == "":
		return usage("give --url (a running server) or --model DIR (in process)")
	case o.URL != "" && o.Model != "":
		return usage("--url and --model exclude each other")
	case o.Limit < 0:
		return usage("--limit must not be negative, got %d", o.Limit)
	case o.MaxTokens < 1:
		return usage("--max-tokens must be at least 1, got %d", o.MaxTokens)
	case o.Concurrency < 1:
		return usage("--concurrency must be at least 1, got %d", o.Concurrency)
	case o.Repeat < 1:
		return usage("--repeat must be at least 1, got %d", o.Repeat)
	case o.Repeat > 1 && len(o.Seeds) > 1:
		return usage("--repeat and a list of --seed values exclude each other")
	case o.Threads < 0:
		return usage("--threads must not be negative, got %d", o.Threads)
	case o.Model == "" && (cmd.Flags().Changed("threads") || cmd.Flags().Changed("device") || o.Drafter != ""):
		return usage("--threads, --device and --drafter are for in-process runs (--model)")
	case o.DraftDepth < 0 || o.DraftDepth > draft.MaxBlockSize:
		return usage("--draft-depth %d is outside [0, %d]", o.DraftDepth, draft.MaxBlockSize)
	case o.DraftDepth != 0 && o.Drafter == "":
		return usage("--draft-depth sets how the drafter runs; give --drafter too")
	case o.Model != "" && (o.APIKeyFile != "" || o.ServedModel != ""):
		return usage("--api-key-file and --served-model are for --url")
	case kind == task.Choice && o.URL != "" && o.Tokenizer == "":
		return usage("--task choice with --url needs --tokenizer DIR: the items are sent as token ids, as lm-evaluation-harness sends them")
	case o.Tokenizer != "" && (kind != task.Choice || o.URL == ""):
		return usage("--tokenizer is for --task choice with --url")
	}
	if o.URL != "" {
		u := strings.TrimRight(o.URL, "/")
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return usage("--url %q: want http://HOST:PORT or https://HOST:PORT", o.URL)
		}
		o.URL = strings.TrimSuffix(u, "/v1")
	}
	if err := pick.Check(o.Device); err != nil {
		return &usageError{err}
	}
	if o.Preset != "" {
		d, err := sample.Preset(o.Preset)
		if err != nil {
			return usage("--sampling-preset: %v", strings.TrimPrefix(err.Error(), "sample: "))
		}
		// A preset is complete: the fields it leaves unset are sent with
		// their neutral values, so that the server's own defaults (lfmq
		// serve's preset, vLLM's generation_config) cannot change the
		// texts.
		n := sample.Neutral()
		o.sampling = task.Sampling{Temperature: orNeutral(d.Temperature, n.Temperature), TopP: orNeutral(d.TopP, n.TopP),
			TopK: d.TopK, MinP: orNeutral(d.MinP, n.MinP), RepetitionPenalty: orNeutral(d.RepetitionPenalty, n.RepetitionPenalty)}
		if o.sampling.TopK == nil {
			off := 0
			o.sampling.TopK = &off
		}
	}
	flags := cmd.Flags()
	o.maxTokensGiven = flags.Changed("max-tokens")
	if flags.Changed("temperature") {
		o.sampling.Temperature = evidence.Ptr(o.Temperature)
	}
	if flags.Changed("top-p") {
		o.sampling.TopP = evidence.Ptr(o.TopP)
	}
	if flags.Changed("top-k") {
		k := o.TopK
		o.sampling.TopK = &k
	}
	if flags.Changed("min-p") {
		o.sampling.MinP = evidence.Ptr(o.MinP)
	}
	if flags.Changed("repetition-penalty") {
		o.sampling.RepetitionPenalty = evidence.Ptr(o.RepPenalty)
	}
	if err := o.samplingParams().Validate(1 << 30); err != nil {
		return &usageError{samplingFlagError(err)}
	}
	if kind == task.Choice && (o.Preset != "" || len(o.Seeds) > 0 || o.Repeat > 1 || flags.Changed("temperature") ||
		flags.Changed("top-p") || flags.Changed("top-k") || flags.Changed("min-p") || flags.Changed("repetition-penalty")) {
		return usage("--task choice scores by likelihood: it samples nothing, so sampling flags, --seed and --repeat do not apply")
	}
	o.seeds = nil
	for _, s := range o.Seeds {
		o.seeds = append(o.seeds, uint64(s))
	}
	if len(o.seeds) == 1 {
		for i := 1; i < o.Repeat; i++ {
			o.seeds = append(o.seeds, o.seeds[0]+uint64(i))
		}
	}
	if len(o.seeds) == 0 && o.Repeat > 1 {
		return usage("--repeat needs --seed: the runs' seeds are --seed, --seed+1, …")
	}
	return nil
}

// samplingParams are the fields sent over neutral ones, in engine/sample's
// terms, so that they are checked against the ranges lfmq serve checks
// before any request.
func (o *evalOptions) samplingParams() sample.Params {
	p := sample.Neutral()
	s := o.sampling
	if s.Temperature != nil {
		p.Temperature = float64(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = float64(*s.TopP)
	}
	if s.TopK != nil {
		p.TopK = *s.TopK
	}
	if s.MinP != nil {
		p.MinP = float64(*s.MinP)
	}
	if s.RepetitionPenalty != nil {
		p.RepetitionPenalty = float64(*s.RepetitionPenalty)
	}
	return p
}

// orNeutral is a preset's value of a field, else the neutral one.
func orNeutral(x *float64, neutral float64) *evidence.Float {
	if x == nil {
		return evidence.Ptr(neutral)
	}
	return evidence.Ptr(*x)
}

func evalRun(cmd *cobra.Command, opts *evalOptions) error {
	items, f, err := evalInputs(cmd, opts)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	var c closers
	defer c.close()
	o, err := evalSetup(ctx, opts, f, items, &c)
	if err == nil {
		err = evalRuns(ctx, opts, o, f)
	}
	if err != nil {
		if opts.inProcessURL != "" {
			return &inProcessError{err: err, url: opts.inProcessURL}
		}
		return err
	}
	return evalOutputs(opts, f)
}

// inProcessError is an error of an in-process run whose message names the
// engine's server as "in-process" rather than by its loopback port, which
// the user never gave and cannot reach.
type inProcessError struct {
	err error
	url string
}

func (e *inProcessError) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.url, "in-process ")
}
func (e *inProcessError) Unwrap() error { return e.err }

// evalInputs checks the dataset, the model, the tokenizer and the output
// paths, reads the items (the first --limit), and starts the file that
// receives the runs with the settings and receipts known before any run.
// A dataset named by its hub id is fetched into the Hugging Face cache
// first when it is not there.
func evalInputs(cmd *cobra.Command, opts *evalOptions) ([]task.Item, *task.File, error) {
	dataset, hubDataset := opts.Dataset, task.Dataset{}
	if hfcache.IsDatasetID(opts.Dataset) {
		if _, err := os.Stat(opts.Dataset); err != nil {
			var err error
			if dataset, hubDataset, err = resolveHubDataset(cmd, opts); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := requireFiles("--dataset "+opts.Dataset, dataset); err != nil {
		return nil, nil, err
	}
	if opts.Drafter != "" {
		if err := requireCheckpoint("--drafter", opts.Drafter, opts.Drafter); err != nil {
			return nil, nil, err
		}
	}
	if opts.Model != "" {
		if err := requireCheckpoint("--model", opts.Model, opts.Model); err != nil {
			return nil, nil, err
		}
	}
	if opts.Tokenizer != "" {
		if err := requireFiles("--tokenizer "+opts.Tokenizer, filepath.Join(opts.Tokenizer, "tokenizer.json")); err != nil {
			return nil, nil, err
		}
	}
	for _, out := range [][2]string{{"--out", opts.Out}, {"--items", opts.Items}} {
		if out[1] != "" {
			if err := requireOutFile(out[0]+" "+out[1], out[1]); err != nil {
				return nil, nil, err
			}
		}
	}
	items, ds, err := readTaskDataset(dataset, opts.kind)
	if err != nil {
		return nil, nil, err
	}
	if hubDataset.Repo != "" {
		ds.Path, ds.Repo, ds.Revision = hubDataset.Path, hubDataset.Repo, hubDataset.Revision
	}
	if opts.Limit > 0 && opts.Limit < len(items) {
		items = items[:opts.Limit]
	}
	started := time.Now().UTC()
	sum, _ := evidence.BinarySHA256()
	f := &task.File{Format: task.Format, Task: opts.kind,
		Settings: task.Settings{Label: opts.label(), Limit: opts.Limit, MaxTokens: opts.MaxTokens, Concurrency: opts.Concurrency,
			SamplingPreset: opts.Preset, Sampling: opts.sampling, Seeds: opts.seeds},
		Receipts: task.Receipts{LfmqVersion: version.Version, BinarySHA256: sum, Command: opts.command,
			Started: started.Format(time.RFC3339), Machine: evidence.CurrentMachine(), Dataset: ds}}
	if opts.kind == task.Choice {
		f.Settings.MaxTokens = 0
	}
	return items, f, nil
}

// closers are the things a run holds open, closed last first.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

func (c *closers) close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// evalSetup chooses how the items are asked (the engine in process, an
// in-process server, or the server at --url; likelihoods in process or
// over /v1/completions) and records the server's or the checkpoint's
// identity in f. What it opens is closed by c.
func evalSetup(ctx context.Context, opts *evalOptions, f *task.File, items []task.Item, c *closers) (*task.Options, error) {
	o := &task.Options{Kind: opts.kind, Items: items, MaxTokens: opts.MaxTokens, Sampling: opts.sampling, Concurrency: opts.Concurrency}
	client := &task.Client{URL: opts.URL, Model: opts.ServedModel, Timeout: opts.Timeout}
	switch {
	case opts.Model != "" && opts.kind == task.Choice:
		ck, err := evidence.IdentifyCheckpoint("model", opts.Model)
		if err != nil {
			return nil, err
		}
		f.Receipts.Checkpoint = &ck
		dev, _, err := pick.Open(opts.Device)
		if err != nil {
			return nil, fmt.Errorf("--device %s: %w", opts.Device, err)
		}
		c.add(func() { closeDevice(dev) })
		// serve's KV cache default, so that the likelihoods are a server's.
		sess, err := generate.Open(opts.Model, load.Options{Threads: opts.Threads, Device: dev, KVCacheDType: kvCacheDType(defaultKVCacheDType), Resident: true})
		if err != nil {
			return nil, err
		}
		c.add(func() { sess.Close() })
		o.Scorer = &task.EngineScorer{Model: sess.Model, Tokenizer: sess.Tokenizer}
		f.Settings.Scoring = "in-process"
		f.Receipts.Server = task.Server{Model: api.DefaultServedModelName(opts.Model), Models: []byte("null")}
	case opts.Model != "":
		ck, err := evidence.IdentifyCheckpoint("model", opts.Model)
		if err != nil {
			return nil, err
		}
		f.Receipts.Checkpoint = &ck
		url, stop, err := serveInProcess(ctx, opts)
		if err != nil {
			return nil, err
		}
		c.add(stop)
		client.URL, opts.inProcessURL = url, url
	default:
		client.APIKey = os.Getenv("LFMQ_API_KEY")
		if opts.APIKeyFile != "" {
			var err error
			if err := requireFiles("--api-key-file "+opts.APIKeyFile, opts.APIKeyFile); err != nil {
				return nil, err
			}
			if client.APIKey, err = readKeyFile(opts.APIKeyFile); err != nil {
				return nil, err
			}
		}
	}
	if o.Scorer == nil {
		srv, err := client.Identify(ctx)
		if err != nil {
			return nil, err
		}
		if opts.Model != "" {
			srv.URL = "" // a loopback port of this process: not a receipt
		}
		f.Receipts.Server = srv
		o.Client = client
		if opts.kind == task.GSM8K {
			if err := fitContext(ctx, opts, client, o, f); err != nil {
				return nil, err
			}
		}
	}
	if opts.kind == task.Choice && opts.URL != "" {
		tok, err := tokenizer.Load(opts.Tokenizer)
		if err != nil {
			return nil, fmt.Errorf("--tokenizer %s: %w", opts.Tokenizer, err)
		}
		tsum, _, err := evidence.HashFile(filepath.Join(opts.Tokenizer, "tokenizer.json"))
		if err != nil {
			return nil, err
		}
		f.Receipts.TokenizerSHA256 = tsum
		o.Scorer = &task.CompletionsScorer{Client: client, Tokenizer: tok}
		f.Settings.Scoring = "completions-echo"
	}
	return o, nil
}

// fitContext checks, before any item runs, that every item's prompt and
// --max-tokens fit the context the server reported in /v1/models
// (max_model_len; nothing is checked when it reports none). Without
// --max-tokens the default shrinks to what the context leaves after the
// longest prompt; a given --max-tokens that cannot fit is a usage error
// with the numbers.
func fitContext(ctx context.Context, opts *evalOptions, c *task.Client, o *task.Options, f *task.File) error {
	ctxLen := c.MaxModelLen
	if ctxLen <= 0 || len(o.Items) == 0 {
		return nil
	}
	id, longest, err := task.LongestPrompt(ctx, c, o.Items, opts.Concurrency)
	var ie *task.ItemError
	var se *task.ServerError
	if errors.As(err, &ie) && errors.As(err, &se) && se.Status == http.StatusBadRequest {
		return fmt.Errorf("--dataset %s: item %s: the prompt does not fit the model's context of %d tokens (max_model_len in /v1/models): %s", opts.Dataset, ie.Item, ctxLen, se.Msg)
	}
	if err != nil {
		return err
	}
	room := ctxLen - longest
	switch {
	case opts.maxTokensGiven && opts.MaxTokens > room:
		return &usageError{fmt.Errorf("--max-tokens %d does not fit the model's context of %d tokens (max_model_len in /v1/models): item %s's prompt has %d tokens, and %d + %d = %d; give --max-tokens %d or less, or leave it out",
			opts.MaxTokens, ctxLen, id, longest, longest, opts.MaxTokens, longest+opts.MaxTokens, max(room, 1))}
	case !opts.maxTokensGiven && opts.MaxTokens > room:
		if room < 1 {
			return fmt.Errorf("--dataset %s: item %s: the prompt has %d tokens, which leaves no room in the model's context of %d tokens (max_model_len in /v1/models)", opts.Dataset, id, longest, ctxLen)
		}
		opts.IO.Errorf("--max-tokens: the default %d does not fit the model's context of %d tokens after the longest prompt (item %s, %d tokens); using %d\n",
			opts.MaxTokens, ctxLen, id, longest, room)
		opts.MaxTokens, o.MaxTokens, f.Settings.MaxTokens = room, room, room
	}
	return nil
}

// evalRuns runs the task once per seed (once without one), with status
// lines on the error stream, and adds the runs to f.
func evalRuns(ctx context.Context, opts *evalOptions, o *task.Options, f *task.File) error {
	items := o.Items
	seeds := make([]*uint64, 0, max(len(opts.seeds), 1))
	for i := range opts.seeds {
		seeds = append(seeds, &opts.seeds[i])
	}
	if len(seeds) == 0 {
		seeds = append(seeds, nil)
	}
	for _, seed := range seeds {
		o.Seed = seed
		what := "eval"
		if seed != nil {
			what = fmt.Sprintf("eval seed %d", *seed)
		}
		p := progress.NewLines(opts.IO.ErrOut, what, "items", statusEvery)
		p.Start(len(items))
		o.Progress = func(done, total int) { p.Set(done) }
		run, err := task.Evaluate(ctx, *o)
		p.Done("")
		if err != nil {
			return err
		}
		f.Runs = append(f.Runs, *run)
	}
	return nil
}

// evalOutputs prints the summary table and writes --out and --items.
func evalOutputs(opts *evalOptions, f *task.File) error {
	printEvalSummary(opts.IO.Out, f)
	if opts.Out != "" {
		if err := os.MkdirAll(filepath.Dir(opts.Out), 0o755); err != nil {
			return err
		}
		if err := task.Write(opts.Out, f); err != nil {
			return err
		}
		opts.IO.Errorf("wrote %s\n", opts.Out)
	}
	if opts.Items != "" {
		if err := os.MkdirAll(filepath.Dir(opts.Items), 0o755); err != nil {
			return err
		}
		if err := task.WriteItems(opts.Items, f.Runs); err != nil {
			return err
		}
		opts.IO.Errorf("wrote %s\n", opts.Items)
	}
	return nil
}

// label is the run's name in tables: --label, else the --out file's
// name without .json, else the task.
func (o *evalOptions) label() string {
	switch {
	case o.Label != "":
		return o.Label
	case o.Out != "":
		return strings.TrimSuffix(filepath.Base(o.Out), ".json")
	}
	return o.Task
}

// resolveHubDataset returns the cached file of a --dataset given as
// datasets/OWNER/NAME[@REVISION]:PATH, fetched into the Hugging Face cache
// first when it is not there (from $HF_ENDPOINT, else the hub, with
// $HF_TOKEN), and its receipt's hub fields: the id as given, the
// repository and the commit.
func resolveHubDataset(cmd *cobra.Command, opts *evalOptions) (string, task.Dataset, error) {
	label := "--dataset " + opts.Dataset
	id, err := hfcache.ParseDatasetID(opts.Dataset)
	if err != nil {
		return "", task.Dataset{}, &usageError{fmt.Errorf("%s: %w", label, err)}
	}
	root, err := hfcache.Root()
	if err != nil {
		return "", task.Dataset{}, err
	}
	f, err := hfcache.OpenDataset(cmd.Context(), id, hfcache.Options{Root: root, Endpoint: os.Getenv("HF_ENDPOINT"),
		Token: strings.TrimSpace(os.Getenv("HF_TOKEN")), Log: opts.IO.ErrOut})
	var rn *hubapi.RepoNotFoundError
	var vn *hubapi.RevisionNotFoundError
	var fn *hfcache.FileNotFoundError
	if errors.As(err, &rn) || errors.As(err, &vn) || errors.As(err, &fn) {
		return "", task.Dataset{}, &usageError{fmt.Errorf("%s: %w", label, err)}
	}
	if err != nil {
		return "", task.Dataset{}, fmt.Errorf("%s: %w", label, err)
	}
	how := "from the Hugging Face cache"
	if !f.Offline {
		how = "fetched into the Hugging Face cache"
	}
	opts.IO.Errorf("%s: commit %s %s, %s\n", label, f.Commit, how, f.File)
	return f.File, task.Dataset{Path: opts.Dataset, Repo: f.Repo, Revision: f.Commit}, nil
}

// readTaskDataset reads a dataset (JSONL, or parquet by its .parquet
// name) and its receipt.
func readTaskDataset(path string, kind task.Kind) ([]task.Item, task.Dataset, error) {
	ds := task.Dataset{Path: path}
	sum, size, err := evidence.HashFile(path)
	if err != nil {
		return nil, ds, err
	}
	ds.SHA256, ds.Size = sum, size
	if size > task.MaxDatasetBytes {
		return nil, ds, fmt.Errorf("--dataset %s: %d bytes, over the %d-byte limit", path, size, task.MaxDatasetBytes)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, ds, err
	}
	defer fh.Close()
	var items []task.Item
	if strings.HasSuffix(path, ".parquet") {
		items, err = task.ReadParquet(path, fh, size, kind)
	} else {
		items, err = task.ReadJSONL(path, fh, kind)
	}
	if err != nil {
		return nil, ds, err
	}
	ds.Items = len(items)
	return items, ds, nil
}

// serveInProcess serves the checkpoint with the engine's own server on a
// loopback port, as lfmq serve does with its defaults and the bf16 KV
// cache (serve.InProcess), and waits until it answers /health. stop shuts
// it down.
func serveInProcess(ctx context.Context, opts *evalOptions) (url string, stop func(), err error) {
	dev, _, err := pick.Open(opts.Device)
	if err != nil {
		return "", nil, fmt.Errorf("--device %s: %w", opts.Device, err)
	}
	settings := serve.InProcess(opts.Concurrency, opts.Threads, kvCacheDType(defaultKVCacheDType))
	settings.DrafterDir, settings.Sched.DraftDepth = opts.Drafter, opts.DraftDepth
	url, stopServer, err := serve.Start(ctx, opts.Model, dev, settings)
	var se *serve.StoppedError
	switch {
	case errors.As(err, &se):
		closeDevice(dev)
		return "", nil, fmt.Errorf("--model %s: %w", opts.Model, se)
	case err != nil:
		closeDevice(dev)
		return "", nil, err
	}
	return url, func() {
		stopServer()
		closeDevice(dev)
	}, nil
}

// printEvalSummary writes the runs' table.
func printEvalSummary(w io.Writer, f *task.File) {
	var t table
	t.add("run", "seed", "items", "correct", "accuracy", "95% interval", "truncated", "no answer", "mean new tokens", "wall")
	for _, r := range f.Runs {
		seed := "-"
		if r.Seed != nil {
			seed = strconv.FormatUint(*r.Seed, 10)
		}
		s := r.Summary
		t.add(f.Settings.Label, seed, strconv.Itoa(s.Items), strconv.Itoa(s.Correct), pct(float64(s.Accuracy)),
			"["+pct(float64(s.WilsonLow))+", "+pct(float64(s.WilsonHigh))+"]", strconv.Itoa(s.Truncated), strconv.Itoa(s.NoAnswer),
			strconv.FormatFloat(float64(s.MeanNewTokens), 'f', 1, 64), (time.Duration(float64(s.WallSeconds) * float64(time.Second))).Round(100*time.Millisecond).String())
	}
	t.write(w)
}

func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) + "%" }

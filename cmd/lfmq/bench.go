package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/bench"
	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/report"
	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/internal/bom"
	"github.com/lfmq/lfmq/internal/progress"
	"github.com/lfmq/lfmq/version"
)

// maxDatasetBytes bounds a --dataset file.
const maxDatasetBytes = 256 << 20

type benchOptions struct {
	IO           *IOStreams
	URL          string
	APIKeyFile   string
	Model        string
	Concurrency  []int
	PromptTokens []int
	Dataset      string
	OutputTokens int
	Turns        int
	TurnTokens   int
	TurnBaseline bool
	Duration     time.Duration
	Warmup       time.Duration
	MaxRequests  int
	Seed         uint64
	Vocab        int
	Exact        string
	Logprobs     bool
	TopLogprobs  int
	Temperature  float64
	ExtraBody    string
	Timeout      time.Duration
	Out          string
	Plot         string
	// command is the command line recorded in the receipts: the flags
	// given, in a fixed order.
	command string
}

func newBenchCmd(ios *IOStreams, runF func(*benchOptions) error) *cobra.Command {
	opts := &benchOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "bench --url URL [--concurrency 1,2,4,8,16] [--prompt-tokens 128,2048 | --dataset FILE] [--output-tokens N] [--turns N --turn-tokens M] [--duration D] [--out FILE] [--plot DIR]",
		Short: "Measure a running OpenAI-compatible server: throughput and latency by concurrency and prompt length",
		Long: `Bench measures a running server (lfmq serve, vLLM, llama.cpp's server or any
other with the OpenAI routes) as a matrix: for each prompt length and each
number of concurrent streams, one cell of --warmup unmeasured and --duration
measured time, in which every stream sends its next streamed request as soon as
its last one ends. Prompts are token ids drawn with --seed from the vocabulary
the server reports (--vocab when it does not, as vLLM), sent to
/v1/completions, or the records of a JSONL --dataset ({"prompt": text or ids}
or {"messages": [...]}, the latter to /v1/chat/completions).

Every request asks for exactly --output-tokens tokens (min_tokens and
ignore_eos, see --exact) and its usage is checked: an answer with fewer is a
failure ("short"), never a faster cell. With --logprobs (the default) each
request asks for every token's own log-prob and no alternatives (logprobs 0):
servers that return it (lfmq serve, vLLM) send every token as a stream event,
so time to first token is exact even for tokens whose text is held back, and
no server is asked to rank its vocabulary (--top-logprobs N asks for that).
429 and 503 answers are retried after their Retry-After and counted, and a
request that met a kept-alive connection the server had just closed is sent
again on a new one and counted apart (resent), not as a failure.

With --turns N each stream runs conversations instead of single prompts, as
an agent does: a conversation's first request is a --prompt-tokens prompt, and
each later one re-sends the whole conversation (the last prompt and the
answer's token ids, asked for with return_token_ids) plus --turn-tokens new
ones, so its context grows turn by turn. A second table gives each turn's
context, the share of it the server's prefix cache supplied (the answers'
usage) and its time to first token; --turn-baseline times, after each turn
from the second on, a fresh prompt of the turn's new tokens alone beside it.

Per cell: aggregate output tokens/s over the window, tokens/s per stream, time
to first token, inter-token latency and request latency (mean, p50, p90, p99),
failures by kind, and how the server's own /metrics counters grew. The Markdown
table goes to stdout; --out writes JSON with receipts (docs/bench.md);
--plot DIR writes SVGs of throughput and time to first token against streams.

Only the URL given is contacted. A cell stops starting requests after
--duration or --max-requests, and each request is bounded by --timeout.
Ctrl-C stops at once and prints (and writes) what was measured.`,
		Example: `  lfmq bench --url http://127.0.0.1:8000 --concurrency 1,4 --prompt-tokens 128 \
      --output-tokens 32 --duration 10s --out b.json
  lfmq bench --url http://gpu-box:8000 --vocab 65536 --prompt-tokens 128,2048 \
      --duration 30s --warmup 5s --out vllm.json --plot plots/
  lfmq bench --url http://127.0.0.1:8000 --concurrency 1 --prompt-tokens 2048 \
      --turns 8 --turn-tokens 2048 --output-tokens 32 --max-requests 8 --duration 1h`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			opts.command = givenFlagsCommandLine(cmd, "lfmq", "bench")
			if runF != nil {
				return runF(opts)
			}
			return benchRun(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.URL, "url", "", "the server's base URL, http://HOST:PORT (required)")
	f.StringVar(&opts.APIKeyFile, "api-key-file", "", "read the server's API key from `FILE` (default $LFMQ_API_KEY)")
	f.StringVar(&opts.Model, "model", "", "the model to ask for (default: the one the server lists)")
	f.IntSliceVar(&opts.Concurrency, "concurrency", []int{1, 2, 4, 8, 16}, "concurrent streams, one cell each")
	f.IntSliceVar(&opts.PromptTokens, "prompt-tokens", []int{128}, "prompt lengths in tokens (random ids), one cell each")
	f.StringVar(&opts.Dataset, "dataset", "", "send the JSONL records of `FILE` as prompts instead of random ids")
	f.IntVar(&opts.OutputTokens, "output-tokens", 64, "tokens every request must generate, exactly")
	f.IntVar(&opts.Turns, "turns", 1, "run conversations of `N` requests per stream, each re-sending the conversation so far (an agent loop)")
	f.IntVar(&opts.TurnTokens, "turn-tokens", 0, "new random tokens each turn after the first adds to the conversation (with --turns)")
	f.BoolVar(&opts.TurnBaseline, "turn-baseline", false, "after each turn from the second on, time a fresh prompt of the turn's new tokens alone (with --turns)")
	f.DurationVar(&opts.Duration, "duration", 30*time.Second, "measured time per cell")
	f.DurationVar(&opts.Warmup, "warmup", 0, "unmeasured time before each cell's measured time")
	f.IntVar(&opts.MaxRequests, "max-requests", bench.DefaultMaxRequests, "at most this many requests per cell")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the random prompts")
	f.IntVar(&opts.Vocab, "vocab", 0, "draw prompt ids from [0, N) (default: the vocabulary size the server reports)")
	f.StringVar(&opts.Exact, "exact", string(bench.ExactBoth), "how requests forbid an early stop: both, min_tokens, ignore_eos or none")
	f.BoolVar(&opts.Logprobs, "logprobs", true, "ask for each token's log-prob, so that every token is a stream event where the server sends them")
	f.IntVar(&opts.TopLogprobs, "top-logprobs", 0, "ask for `N` alternatives with each token's log-prob (work the server does at every token)")
	f.Float64Var(&opts.Temperature, "temperature", 0, "sampling temperature sent with every request")
	f.StringVar(&opts.ExtraBody, "extra-body", "", "JSON object (or @FILE) of fields to add to every request, e.g. a logit_bias")
	f.DurationVar(&opts.Timeout, "timeout", bench.DefaultRequestTimeout, "bound on one request, from sending it to the end of its stream")
	f.StringVar(&opts.Out, "out", "", "write the measurements as JSON with receipts to FILE")
	f.StringVar(&opts.Plot, "plot", "", "write SVG plots of throughput and time to first token to DIR")
	cmd.MarkFlagFilename("api-key-file")
	cmd.MarkFlagFilename("dataset", "jsonl")
	cmd.MarkFlagDirname("plot")
	cmd.RegisterFlagCompletionFunc("exact", cobra.FixedCompletions([]string{string(bench.ExactBoth), string(bench.ExactMinTokens), string(bench.ExactIgnoreEOS), string(bench.ExactNone)}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// validate checks the flags' combinations (usage errors, exit 2).
func (o *benchOptions) validate(cmd *cobra.Command) error {
	if err := requireFlags("url", o.URL); err != nil {
		return err
	}
	if _, err := bench.ParseURL(o.URL); err != nil {
		var oe *bench.OptionsError
		errors.As(err, &oe)
		return &usageError{fmt.Errorf("--url %s", oe.Msg)}
	}
	if o.Dataset != "" && cmd.Flags().Changed("prompt-tokens") {
		return &usageError{errors.New("--dataset and --prompt-tokens exclude each other")}
	}
	if cmd.Flags().Changed("turn-tokens") && o.Turns < 2 {
		return &usageError{errors.New("--turn-tokens needs --turns 2 or more")}
	}
	if cmd.Flags().Changed("api-key-file") && o.APIKeyFile == "" {
		return &usageError{errors.New("--api-key-file: empty file name")}
	}
	return nil
}

func benchRun(cmd *cobra.Command, opts *benchOptions) error {
	o := bench.Options{
		URL: opts.URL, Model: opts.Model, Concurrency: opts.Concurrency, PromptTokens: opts.PromptTokens,
		OutputTokens: opts.OutputTokens, Turns: opts.Turns, TurnTokens: opts.TurnTokens, TurnBaseline: opts.TurnBaseline, Warmup: opts.Warmup, Duration: opts.Duration, MaxRequests: opts.MaxRequests,
		Seed: opts.Seed, Vocab: opts.Vocab, Exact: bench.Exact(opts.Exact), Logprobs: opts.Logprobs, TopLogprobs: opts.TopLogprobs,
		Temperature: opts.Temperature, RequestTimeout: opts.Timeout,
	}
	if err := benchInputs(opts, &o); err != nil {
		return err
	}
	status := &benchStatus{}
	st := progress.NewStatus(opts.IO.ErrOut, opts.IO.ErrTTY, statusEvery, status.line)
	o.Progress = func(p bench.Progress) {
		status.set(p)
		st.Update()
	}
	started, load := time.Now().UTC(), bench.LoadAverage()
	res, err := bench.Run(cmd.Context(), o)
	st.Finish()
	var oe *bench.OptionsError
	if errors.As(err, &oe) {
		return &usageError{fmt.Errorf("--%s: %s", oe.Field, oe.Msg)}
	}
	if res == nil {
		return err
	}
	if werr := benchReport(opts, res, started, load); werr != nil {
		return werr
	}
	if err == nil && res.AllFailed() {
		return errors.New("every request failed: the figures above measure nothing (the failures name why)")
	}
	return err
}

// benchInputs checks the input files and output paths, and reads the API
// key, --extra-body and --dataset into o.
func benchInputs(opts *benchOptions, o *bench.Options) error {
	var files []string
	if opts.APIKeyFile != "" {
		files = append(files, "--api-key-file "+opts.APIKeyFile, opts.APIKeyFile)
	}
	if opts.Dataset != "" {
		files = append(files, "--dataset "+opts.Dataset, opts.Dataset)
	}
	if p, ok := strings.CutPrefix(opts.ExtraBody, "@"); ok {
		files = append(files, "--extra-body "+opts.ExtraBody, p)
	}
	if err := requireFiles(files...); err != nil {
		return err
	}
	if opts.Out != "" {
		if err := requireOutFile("--out "+opts.Out, opts.Out); err != nil {
			return err
		}
	}
	if opts.Plot != "" {
		if err := requireOutDir("--plot "+opts.Plot, opts.Plot); err != nil {
			return err
		}
	}
	o.APIKey = os.Getenv("LFMQ_API_KEY")
	if opts.APIKeyFile != "" {
		key, err := readKeyFile(opts.APIKeyFile)
		if err != nil {
			return err
		}
		o.APIKey = key
	}
	if opts.ExtraBody != "" {
		extra, err := readExtraBody(opts.ExtraBody)
		if err != nil {
			return err
		}
		o.ExtraBody = extra
	}
	if opts.Dataset != "" {
		ds, err := readDataset(opts.Dataset)
		if err != nil {
			return err
		}
		o.Dataset = ds
	}
	return nil
}

// benchReport writes the table to stdout, the run's line to the error
// stream, and the --out file and plots of a run that began at started
// under the load average load.
func benchReport(opts *benchOptions, res *bench.Result, started time.Time, load float64) error {
	fmt.Fprint(opts.IO.Out, bench.Markdown(res))
	opts.IO.Errorf("benchmarked %s at %s (%s): %d cells in %s\n", res.Server.Model, res.Server.URL, res.Server.Kind,
		len(res.Cells), time.Since(started).Round(time.Second))
	if opts.Out != "" {
		sum, _ := evidence.BinarySHA256()
		f := &bench.File{Schema: bench.Schema, Result: *res, Receipts: bench.Receipts{
			LfmqVersion: version.Version, BinarySHA256: sum, Command: opts.command, Machine: evidence.CurrentMachine(),
			Started: started.Format(time.RFC3339), Finished: time.Now().UTC().Format(time.RFC3339),
			LoadStart: load, LoadEnd: bench.LoadAverage(),
		}}
		if err := os.MkdirAll(filepath.Dir(opts.Out), 0o755); err != nil {
			return err
		}
		if err := bench.Write(opts.Out, f); err != nil {
			return err
		}
		opts.IO.Errorf("wrote %s\n", opts.Out)
	}
	if opts.Plot != "" && len(res.Cells) > 0 {
		if err := writeBenchPlots(opts.Plot, res); err != nil {
			return err
		}
		opts.IO.Errorf("wrote plots to %s\n", opts.Plot)
	}
	return nil
}

// benchStatus is the latest progress, for the status line.
type benchStatus struct {
	mu sync.Mutex
	p  bench.Progress
}

func (s *benchStatus) set(p bench.Progress) {
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
}

// line is "bench: cell 2/4 (4 streams, prompt 128): measuring, 37
// requests, 0 failed, 1184 tokens".
func (s *benchStatus) line() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.p
	if p.Cells == 0 {
		return "bench: starting"
	}
	prompt := "prompt " + strconv.Itoa(p.PromptTokens)
	if p.PromptTokens == 0 {
		prompt = "dataset"
	}
	return fmt.Sprintf("bench: cell %d/%d (%d streams, %s): %s, %d requests, %d failed, %d tokens",
		p.Cell, p.Cells, p.Concurrency, prompt, p.Phase, p.Requests, p.Failed, p.Tokens)
}

// readExtraBody reads --extra-body: a JSON object, inline or @FILE.
func readExtraBody(v string) (map[string]json.RawMessage, error) {
	data, label := []byte(v), "--extra-body"
	if p, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--extra-body: %w", err)
		}
		data, label = b, "--extra-body "+v
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		err := fmt.Errorf("%s: want a JSON object of request fields", label)
		if !strings.HasPrefix(v, "@") {
			return nil, &usageError{err}
		}
		return nil, err
	}
	return m, nil
}

// readDataset reads a JSONL file of {"prompt": text or token ids} or
// {"messages": [...]} records; a bad record is named by its line.
func readDataset(path string) ([]bench.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDatasetBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDatasetBytes {
		return nil, fmt.Errorf("--dataset %s: over %d MiB", path, maxDatasetBytes>>20)
	}
	if bom.Has(data) {
		return nil, fmt.Errorf("--dataset %s: starts with a UTF-8 byte-order mark; save it without one", path)
	}
	var out []bench.Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxDatasetBytes)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var r bench.Record
		bad := func(msg string) error { return fmt.Errorf("--dataset %s:%d: %s", path, line, msg) }
		if err := json.Unmarshal(text, &r); err != nil {
			return nil, bad("not a JSON object: " + err.Error())
		}
		switch {
		case len(r.Prompt) > 0 && len(r.Messages) > 0:
			return nil, bad("both prompt and messages; give one")
		case len(r.Messages) > 0:
			var msgs []json.RawMessage
			if json.Unmarshal(r.Messages, &msgs) != nil || len(msgs) == 0 {
				return nil, bad("messages must be a non-empty list")
			}
		case len(r.Prompt) > 0:
			var s string
			var ids []int
			if (json.Unmarshal(r.Prompt, &s) != nil || s == "") && (json.Unmarshal(r.Prompt, &ids) != nil || len(ids) == 0) {
				return nil, bad("prompt must be a non-empty string or list of token ids")
			}
		default:
			return nil, bad(`want "prompt" or "messages"`)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--dataset %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--dataset %s: has no records", path)
	}
	return out, nil
}

// writeBenchPlots writes throughput.svg (aggregate output tokens/s) and
// ttft.svg (time to first token, p50 and p99) against the streams, a line
// per prompt length.
func writeBenchPlots(dir string, res *bench.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var xs []string
	col := map[int]int{}
	for _, c := range res.Settings.Concurrency {
		if _, ok := col[c]; !ok {
			col[c] = len(xs)
			xs = append(xs, strconv.Itoa(c))
		}
	}
	prompts := res.Settings.PromptTokens
	if len(prompts) == 0 {
		prompts = []int{0}
	}
	name := func(p int) string {
		if p == 0 {
			return "dataset"
		}
		return fmt.Sprintf("prompt %d", p)
	}
	series := func(label string, pick func(bench.Cell) float64) []report.Series {
		var out []report.Series
		for _, p := range prompts {
			ys := make([]float64, len(xs))
			for i := range ys {
				ys[i] = math.NaN()
			}
			for _, c := range res.Cells {
				if c.PromptTokens == p && c.Requests > 0 {
					ys[col[c.Concurrency]] = pick(c)
				}
			}
			out = append(out, report.Series{Name: name(p) + label, Y: ys})
		}
		return out
	}
	title := fmt.Sprintf("%s, %d output tokens", res.Server.Model, res.Settings.OutputTokens)
	tput := report.Lines("aggregate output tokens/s: "+title, "concurrent streams", "output tokens/s", xs,
		series("", func(c bench.Cell) float64 { return c.OutputTokensPerSecond }))
	ttft := report.Lines("time to first token: "+title, "concurrent streams", "ms", xs,
		append(series(" p50", func(c bench.Cell) float64 { return c.TTFT.P50 * 1000 }),
			series(" p99", func(c bench.Cell) float64 { return c.TTFT.P99 * 1000 })...))
	if err := durable.WriteFile(filepath.Join(dir, "throughput.svg"), tput); err != nil {
		return err
	}
	return durable.WriteFile(filepath.Join(dir, "ttft.svg"), ttft)
}

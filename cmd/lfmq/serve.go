package main

import (
	"errors"
	"fmt"
	"github.com/lfmq/lfmq/engine/device/pick"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lfmq/lfmq/engine/api"
	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
	"github.com/lfmq/lfmq/engine/serve"
	"github.com/lfmq/lfmq/engine/spec"
)

type serveOptions struct {
	IO              *IOStreams
	Model           string
	Endpoint        string
	ServedModelName string
	Host            string
	Port            int
	APIKey          string
	APIKeyFile      string
	MaxNumSeqs      int
	MaxModelLen     int
	KVPoolTokens    int
	MaxQueue        int
	PrefillChunk    int
	Threads         int
	KVCacheDType    string
	Device          string
	ShutdownTimeout time.Duration
	CORSOrigins     []string
	Preset          string
	DefaultSampling string
	LogLevel        string
	Speculate       string
	SpecTokens      int
	LookupMin       int
	LookupMax       int
	PrefixCaching   string
	CacheDir        string
	Drafter         string
	DraftDepth      int
	DraftCosts      string

	// Resolved by validation.
	drafterDir string // --drafter's directory (a hub id resolved)
	key        string
	defaults   sample.Defaults
	level      slog.Level
}

func newServeCmd(ios *IOStreams, runF func(*serveOptions) error) *cobra.Command {
	opts := &serveOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "serve --model DIR|OWNER/NAME[@REV] [--port N] [--sampling-preset P]",
		Short: "Serve a checkpoint (BF16 or lfmq-1) over an OpenAI-compatible HTTP API",
		Long: `Serve loads a checkpoint (a directory, BF16 or lfmq-1, or a Hugging Face
checkpoint by its hub id OWNER/NAME[@REVISION], read from the Hugging Face
cache or fetched into it first, as quantize --model does) on --device (a CUDA
or OpenCL GPU, or the CPU; the same output bits on each) and answers the
OpenAI API on --host:--port:
GET /v1/models, POST /v1/chat/completions, POST /v1/completions, plus
GET /health (200 once the model is loaded and warmed up) and GET /metrics
(Prometheus). Requests run with continuous batching: every step advances
each running generation by one token and processes at most one chunk of
--prefill-chunk prompt tokens.

Sampling defaults come from --sampling-preset (liquid: temperature 0.1,
top_k 50, repetition_penalty 1.05; agentic: temperature 0.6, top_p 0.95;
reasoning: temperature 0.6; greedy; none) with --default-sampling JSON
fields set over it; a field a request sets always wins.

While one request runs, prompt-lookup speculation drafts tokens from its
own prompt and output and verifies them in one step (--speculate); earlier
prompts' 64-token blocks are reused exactly (--prefix-caching). Neither
changes a single output token.

Chat answers split <think>…</think> into reasoning_content and LFM2 tool
calls into tool_calls. POST /v1/completions with token ids, max_tokens 0,
echo true and prompt_logprobs -1 returns every prompt position's
full-vocabulary log-probs as float32: what 'lfmq score --candidate
NAME=http://HOST:PORT' reads.

The API key (--api-key, --api-key-file or LFMQ_API_KEY) is required as
"Authorization: Bearer KEY" on every route but /health and /metrics.
SIGINT/SIGTERM stop accepting requests, let running ones finish within
--shutdown-timeout and exit 0; a second signal stops at once (exit 1).`,
		Example: `  lfmq serve --model ./ckpt
  lfmq serve --model LiquidAI/LFM2-8B-A1B --port 8080
  lfmq serve --model ./ckpt --port 8080 --sampling-preset agentic --api-key-file key.txt
  lfmq serve --model ./ckpt --default-sampling '{"temperature": 0.3, "min_p": 0.15, "max_new_tokens": 512}'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return serveRun(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Model, "model", "", "checkpoint: a directory (Hugging Face BF16 or lfmq-1), or a hub id OWNER/NAME[@REVISION] found in or fetched into the Hugging Face cache (required)")
	f.StringVar(&opts.Endpoint, "endpoint", "", hubEndpointUsage)
	f.StringVar(&opts.APIKey, "api-key", "", "API key clients must send as a bearer token (default: $LFMQ_API_KEY)")
	f.StringVar(&opts.CacheDir, "cache-dir", "", "keep the prefix cache in DIR across restarts (reused only by the same checkpoint and engine)")
	addServeFlags(f, opts)
	completeServeFlags(cmd)
	cmd.MarkFlagDirname("model")
	cmd.MarkFlagDirname("cache-dir")
	return cmd
}

// completeServeFlags offers the values of addServeFlags' closed choices to
// shell completion, and files for --api-key-file.
func completeServeFlags(cmd *cobra.Command) {
	fixed := func(flag string, values ...string) {
		cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	fixed("sampling-preset", sample.PresetNames()...)
	fixed("speculate", "on", "off")
	fixed("prefix-caching", "on", "off")
	fixed("log-level", "debug", "info", "warn", "error")
	cmd.MarkFlagFilename("api-key-file")
}

// addServeFlags defines the flags that lfmq launch passes through to the
// runtime's serve unchanged (all but --model, --endpoint, --api-key and
// --cache-dir).
func addServeFlags(f *pflag.FlagSet, opts *serveOptions) {
	f.StringVar(&opts.ServedModelName, "served-model-name", "", "model id clients send (default: the directory's name, or the hub id --model gives)")
	f.StringVar(&opts.Host, "host", "127.0.0.1", "address to bind; anything but loopback must be given explicitly")
	f.IntVar(&opts.Port, "port", 8000, "port to listen on (0 picks a free one)")
	f.StringVar(&opts.APIKeyFile, "api-key-file", "", "read the API key from FILE")
	f.IntVar(&opts.MaxNumSeqs, "max-num-seqs", sched.DefaultMaxNumSeqs, "most sequences running at once")
	f.IntVar(&opts.MaxModelLen, "max-model-len", 0, "longest prompt + output in tokens (0 = the model's context)")
	f.IntVar(&opts.KVPoolTokens, "kv-pool-tokens", 0, "size of the KV pool in tokens (pages of 64, allocated as used) that running sequences and the prefix cache share (0 = max-num-seqs × max-model-len)")
	f.IntVar(&opts.MaxQueue, "max-queue", sched.DefaultMaxQueue, "most requests waiting; more get 429 queue_full")
	f.IntVar(&opts.PrefillChunk, "prefill-chunk", sched.DefaultPrefillChunk, "most prompt tokens processed per step")
	f.IntVar(&opts.Threads, "threads", 0, "compute threads (0 = all cores); outputs do not depend on it")
	addKVCacheDTypeFlag(f, &opts.KVCacheDType)
	addDeviceFlag(f, &opts.Device)
	f.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", api.DefaultShutdownTimeout, "how long running requests may finish after SIGINT/SIGTERM")
	f.StringArrayVar(&opts.CORSOrigins, "cors-origin", nil, "allow browser calls from this origin (repeatable; * for any); CORS is off without it")
	f.StringVar(&opts.Preset, "sampling-preset", sample.DefaultPreset, "sampling defaults: "+strings.Join(sample.PresetNames(), ", "))
	f.StringVar(&opts.DefaultSampling, "default-sampling", "", `JSON object of default sampling fields set over the preset (temperature, top_k, top_p, min_p, repetition_penalty, max_new_tokens)`)
	f.StringVar(&opts.Speculate, "speculate", "on", "prompt-lookup speculation while one request runs: on or off")
	f.IntVar(&opts.SpecTokens, "spec-tokens", spec.DefaultTokens, "most draft tokens per verify step (1-7; the policy may use fewer)")
	f.IntVar(&opts.LookupMin, "lookup-min", spec.DefaultLookupMin, "shortest n-gram a draft may be matched on")
	f.IntVar(&opts.LookupMax, "lookup-max", spec.DefaultLookupMax, "longest n-gram a draft is matched on (tried first)")
	f.StringVar(&opts.PrefixCaching, "prefix-caching", "on", "reuse the state of earlier prompts' 64-token blocks: on or off")
	f.StringVar(&opts.Drafter, "drafter", "", "DSpark drafter for the model (a directory, or a hub id OWNER/NAME[@REVISION]): drafted decoding, the same output bits")
	f.IntVar(&opts.DraftDepth, "draft-depth", 0, fmt.Sprintf("drafts verified per sequence and step, 1-%d (0 = scheduled by the drafter's confidence and the measured verify costs)", draft.MaxBlockSize))
	f.StringVar(&opts.DraftCosts, "draft-costs", "", "keep the drafter's measured verify cost table in FILE (read when it fits this model, drafter and machine; else measured and written)")
	f.StringVar(&opts.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// validate checks every flag before anything starts (usage errors, exit 2).
func (o *serveOptions) validate(cmd *cobra.Command) error {
	if err := requireFlags("model", o.Model); err != nil {
		return err
	}
	return o.validateServe()
}

// validateServe checks the flags addServeFlags defines (launch checks them
// too before it starts anything).
func (o *serveOptions) validateServe() error {
	usage := func(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }
	switch {
	case o.Port < 0 || o.Port > 65535:
		return usage("--port %d is outside [0, 65535]", o.Port)
	case o.Host == "":
		return usage("--host is empty")
	case o.MaxNumSeqs < 1:
		return usage("--max-num-seqs must be at least 1, got %d", o.MaxNumSeqs)
	case o.MaxModelLen < 0:
		return usage("--max-model-len must not be negative, got %d", o.MaxModelLen)
	case o.KVPoolTokens < 0:
		return usage("--kv-pool-tokens must not be negative, got %d", o.KVPoolTokens)
	case o.MaxQueue < 0:
		return usage("--max-queue must not be negative, got %d", o.MaxQueue)
	case o.PrefillChunk < 1:
		return usage("--prefill-chunk must be at least 1, got %d", o.PrefillChunk)
	case o.Threads < 0:
		return usage("--threads must not be negative, got %d", o.Threads)
	case checkKVCacheDType(o.KVCacheDType) != nil:
		return checkKVCacheDType(o.KVCacheDType)
	case pick.Check(o.Device) != nil:
		return &usageError{pick.Check(o.Device)}
	case o.ShutdownTimeout < 0:
		return usage("--shutdown-timeout must not be negative, got %s", o.ShutdownTimeout)
	case o.APIKey != "" && o.APIKeyFile != "":
		return usage("--api-key and --api-key-file exclude each other")
	case o.CacheDir != "" && o.PrefixCaching == "off":
		return usage("--cache-dir keeps the prefix cache, which --prefix-caching off turns off")
	case o.DraftDepth < 0 || o.DraftDepth > draft.MaxBlockSize:
		return usage("--draft-depth %d is outside [0, %d]", o.DraftDepth, draft.MaxBlockSize)
	case o.Drafter == "" && (o.DraftDepth != 0 || o.DraftCosts != ""):
		return usage("--draft-depth and --draft-costs set how the drafter runs; give --drafter too")
	}
	for _, f := range [][2]string{{"speculate", o.Speculate}, {"prefix-caching", o.PrefixCaching}} {
		if f[1] != "on" && f[1] != "off" {
			return usage("--%s %q: want on or off", f[0], f[1])
		}
	}
	switch {
	case o.SpecTokens < 1 || o.SpecTokens > spec.MaxTokens:
		return usage("--spec-tokens %d is outside [1, %d]", o.SpecTokens, spec.MaxTokens)
	case o.LookupMin < 1 || o.LookupMax < o.LookupMin:
		return usage("--lookup-min %d and --lookup-max %d: want 1 ≤ min ≤ max", o.LookupMin, o.LookupMax)
	}
	if err := o.level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return usage("--log-level %q: want debug, info, warn or error", o.LogLevel)
	}
	for _, origin := range o.CORSOrigins {
		if origin == "" {
			return usage("--cors-origin is empty")
		}
		if err := checkOrigin(origin); err != nil {
			return &usageError{err}
		}
	}
	d, err := sample.Preset(o.Preset)
	if err != nil {
		return usage("--sampling-preset: %v", strings.TrimPrefix(err.Error(), "sample: "))
	}
	if o.DefaultSampling != "" {
		if d, err = d.Override([]byte(o.DefaultSampling)); err != nil {
			return usage("--default-sampling: %v", strings.TrimPrefix(err.Error(), "sample: "))
		}
	}
	o.defaults = d
	key, err := apiKey(o.APIKey, o.APIKeyFile)
	if err != nil {
		return usage("%v", err)
	}
	o.key = key
	return nil
}

// apiKey resolves --api-key, --api-key-file and LFMQ_API_KEY (in that
// order of precedence; the first two exclude each other). A key file's
// surrounding whitespace (a trailing newline) is not part of the key.
func apiKey(key, file string) (string, error) {
	if file != "" {
		// Named as every other input file is when it is not there.
		if err := requireFiles("--api-key-file "+file, file); err != nil {
			return "", err
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--api-key-file: %w", err)
		}
		key = strings.TrimSpace(string(data))
		if key == "" {
			return "", fmt.Errorf("--api-key-file %s is empty", file)
		}
		return key, nil
	}
	if key != "" {
		return key, nil
	}
	return os.Getenv("LFMQ_API_KEY"), nil
}

// loopback reports whether host binds only the local machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func serveRun(cmd *cobra.Command, opts *serveOptions) error {
	// A model named by its hub id is looked up (and perhaps fetched) once
	// the rest of the command line has passed its checks.
	hub := isHubID(opts.Model)
	dir := opts.Model
	if !hub {
		if err := requireCheckpoint("--model", opts.Model, dir); err != nil {
			return err
		}
	}
	if opts.CacheDir != "" {
		if err := requireOutDir("--cache-dir "+opts.CacheDir, opts.CacheDir); err != nil {
			return err
		}
	}
	served := opts.ServedModelName
	if hub {
		var err error
		if dir, err = resolveHubModel(cmd, opts.IO, "--model", opts.Model, opts.Endpoint); err != nil {
			return err
		}
		if err := requireCheckpoint("--model", opts.Model, dir); err != nil {
			return err
		}
		if served == "" {
			// The snapshot directory's name is a commit id; clients know
			// the model by the id they were told, as with vLLM.
			served = opts.Model
		}
	}
	if err := opts.resolveDrafter(cmd); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: opts.level}))
	if !loopback(opts.Host) && opts.key == "" {
		log.Warn("binding a non-loopback address without an API key: anyone who can reach it can use the model", "host", opts.Host)
	}
	if c, err := config.Load(dir); err == nil {
		for _, w := range c.Warnings() {
			log.Warn(w, "file", filepath.Join(dir, "config.json"))
		}
	}
	dev, line, err := pick.Open(opts.Device)
	if err != nil {
		return fmt.Errorf("--device %s: %w", opts.Device, err)
	}
	defer closeDevice(dev)
	log.Info(line)
	cfg := opts.settings(served, log).Config(dir, dev)
	err = api.Serve(cmd.Context(), cfg)
	var ce *api.ConfigError
	var ie *sched.InputError
	if errors.As(err, &ce) || errors.As(err, &ie) {
		return &usageError{err}
	}
	return err
}

// settings is the server's configuration from the checked flags, the
// model id clients send (served) and the log.
func (o *serveOptions) settings(served string, log *slog.Logger) serve.Settings {
	s := serve.Settings{
		Host: o.Host, Port: o.Port, Threads: o.Threads, KVCacheDType: kvCacheDType(o.KVCacheDType),
		Sched: sched.Config{MaxNumSeqs: o.MaxNumSeqs, MaxQueue: o.MaxQueue, PrefillChunk: o.PrefillChunk,
			MaxModelLen: o.MaxModelLen, KVPoolTokens: o.KVPoolTokens,
			Speculation: sched.SpecConfig{Off: o.Speculate == "off", Tokens: o.SpecTokens, LookupMin: o.LookupMin, LookupMax: o.LookupMax},
			PrefixCache: sched.PrefixConfig{Off: o.PrefixCaching == "off"}, DraftDepth: o.DraftDepth},
		ServedModelName: served, APIKey: o.key, CORSOrigins: o.CORSOrigins, Defaults: o.defaults, Logger: log,
		ShutdownTimeout: o.ShutdownTimeout,
		CacheDir:        o.CacheDir,
		DrafterDir:      o.drafterDir,
		DraftCostsFile:  o.DraftCosts,
	}
	if o.ShutdownTimeout == 0 {
		s.ShutdownTimeout = time.Nanosecond // "0": cancel at once
	}
	return s
}

// checkOrigin refuses a --cors-origin that no browser's Origin header can
// equal: the header is compared as a string, and browsers send an origin
// serialized as scheme://host[:port], lower case, without a path, a
// trailing slash or the scheme's default port.
func checkOrigin(origin string) error {
	if origin == "*" || origin == "null" {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil {
		return fmt.Errorf("--cors-origin %q is not an origin: want scheme://host[:port] (e.g. https://app.example.com), or * for any", origin)
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port := u.Port(); port != "" && !(u.Scheme == "http" && port == "80") && !(u.Scheme == "https" && port == "443") {
		host += ":" + port
	}
	if want := strings.ToLower(u.Scheme) + "://" + host; want != origin {
		return fmt.Errorf("--cors-origin %q never matches: a browser sends this origin as %q (no path, trailing slash or default port; lower case)", origin, want)
	}
	return nil
}

// resolveDrafter finds --drafter's directory: a directory stays itself
// (it must hold a config.json), a hub id is found in or fetched into the
// Hugging Face cache as --model is.
func (o *serveOptions) resolveDrafter(cmd *cobra.Command) (err error) {
	o.drafterDir, err = resolveDrafterArg(cmd, o.IO, o.Drafter, o.Endpoint)
	return err
}

// resolveDrafterArg is a --drafter value's directory ("" for none).
func resolveDrafterArg(cmd *cobra.Command, ios *IOStreams, value, endpoint string) (string, error) {
	if value == "" {
		return "", nil
	}
	dir := value
	if isHubID(value) {
		var err error
		if dir, err = resolveHubModel(cmd, ios, "--drafter", value, endpoint); err != nil {
			return "", err
		}
	}
	if err := requireCheckpoint("--drafter", value, dir); err != nil {
		return "", err
	}
	return dir, nil
}

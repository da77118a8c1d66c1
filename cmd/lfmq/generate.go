package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/choice"
	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/internal/bom"
)

type generateOptions struct {
	IO           *IOStreams
	Model        string
	Endpoint     string
	Prompt       string
	Chat         string
	Tools        string
	JSONSchema   string
	MaxTokens    int
	Temperature  float64
	TopK         int
	TopP         float64
	MinP         float64
	RepPenalty   float64
	Seed         int64
	Threads      int
	KVCacheDType string
	Stats        bool
	Device       string
	Drafter      string
	DraftDepth   int

	dir        string // the directory --model names (a hub id's snapshot)
	chatJSON   []byte // --chat, read and checked
	toolsJSON  []byte // --tools, read and checked
	deviceLine string // what --device chose, for --stats
	drafter    *draft.Drafter
	schemaJSON []byte // --json-schema, read and checked
}

func newGenerateCmd(ios *IOStreams, runF func(*generateOptions) error) *cobra.Command {
	opts := &generateOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "generate --model DIR|OWNER/NAME[@REV] (--prompt TEXT | --chat JSON) [--max-tokens N]",
		Short: "Generate text from a checkpoint (BF16 or lfmq-1) once, from the terminal",
		Long: `Generate runs the engine once and streams the continuation to stdout. The
model runs where --device says: a CUDA or OpenCL GPU, or the CPU, with the
same output bits on each. --model is a checkpoint directory (BF16 or
lfmq-1), or a Hugging Face checkpoint by its hub id OWNER/NAME[@REVISION],
read from the Hugging Face cache or fetched into it first (as quantize
--model does).

--prompt TEXT is tokenized as plain text: special-token strings are matched and
BOS is added unless the text starts with it. --chat takes an OpenAI-style JSON
array of messages (inline, or @FILE) and renders it with the checkpoint's chat
template plus the generation prompt; text inside the messages is always
encoded as ordinary text. --tools adds a JSON array of tool definitions.

Sampling is greedy at --temperature 0 (the default); otherwise the seeded
pipeline of the engine's sampler is used, so the same --seed gives the same
text. Generation stops at the checkpoint's stop tokens or --max-tokens.`,
		Example: `  lfmq generate --model ./ckpt --prompt "The quick brown fox"
  lfmq generate --model ./ckpt --chat '[{"role":"user","content":"What does ls do?"}]' --stats
  lfmq generate --model ./ckpt --chat @conversation.json --temperature 0.3 --min-p 0.15 --seed 7
  lfmq generate --model LiquidAI/LFM2-8B-A1B --prompt "The quick brown fox" --device cuda`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireFlags("model", opts.Model); err != nil {
				return err
			}
			promptSet, chatSet := cmd.Flags().Changed("prompt"), cmd.Flags().Changed("chat")
			if promptSet == chatSet {
				return &usageError{fmt.Errorf("give exactly one of --prompt and --chat")}
			}
			if promptSet && opts.Prompt == "" {
				return &usageError{fmt.Errorf("--prompt is empty: give the text to continue")}
			}
			if opts.Tools != "" && opts.Chat == "" {
				return &usageError{fmt.Errorf("--tools needs --chat")}
			}
			if opts.JSONSchema != "" && (opts.Chat == "" || opts.Tools != "") {
				return &usageError{fmt.Errorf("--json-schema needs --chat and excludes --tools")}
			}
			if opts.MaxTokens < 1 {
				return &usageError{fmt.Errorf("--max-tokens must be at least 1, got %d", opts.MaxTokens)}
			}
			if err := checkKVCacheDType(opts.KVCacheDType); err != nil {
				return err
			}
			switch {
			case opts.DraftDepth < 0 || opts.DraftDepth > draft.MaxBlockSize:
				return &usageError{fmt.Errorf("--draft-depth %d is outside [0, %d]", opts.DraftDepth, draft.MaxBlockSize)}
			case opts.DraftDepth != 0 && opts.Drafter == "":
				return &usageError{fmt.Errorf("--draft-depth sets how the drafter runs; give --drafter too")}
			case opts.Drafter != "" && opts.JSONSchema != "":
				return &usageError{fmt.Errorf("--drafter drafts generated text; --json-schema scores fixed answers instead")}
			}
			if opts.Threads < 0 {
				// As serve and score refuse it: 0 is all cores, -1 is no count.
				return &usageError{fmt.Errorf("--threads must not be negative, got %d", opts.Threads)}
			}
			if err := opts.params().Validate(1 << 30); err != nil {
				return &usageError{samplingFlagError(err)}
			}
			if chatSet {
				var err error
				if opts.chatJSON, err = readChatArg(opts.Chat); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return generateRun(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Model, "model", "", "checkpoint: a directory (Hugging Face BF16 or lfmq-1), or a hub id OWNER/NAME[@REVISION] found in or fetched into the Hugging Face cache (required)")
	f.StringVar(&opts.Endpoint, "endpoint", "", hubEndpointUsage)
	f.StringVar(&opts.Prompt, "prompt", "", "plain-text prompt")
	f.StringVar(&opts.Chat, "chat", "", "JSON array of chat messages, or @FILE")
	f.StringVar(&opts.Tools, "tools", "", "JSON array of tool definitions for the chat template, or @FILE")
	f.StringVar(&opts.JSONSchema, "json-schema", "", "answer with a JSON object of this closed schema (FILE): every field a boolean or string enum, chosen by scoring each value")
	f.IntVar(&opts.MaxTokens, "max-tokens", 128, "maximum tokens to generate")
	f.Float64Var(&opts.Temperature, "temperature", 0, "sampling temperature; 0 is greedy")
	f.IntVar(&opts.TopK, "top-k", 0, "keep the k most likely tokens (0 = off)")
	f.Float64Var(&opts.TopP, "top-p", 1, "nucleus sampling mass")
	f.Float64Var(&opts.MinP, "min-p", 0, "drop tokens below min-p times the most likely one's probability")
	f.Float64Var(&opts.RepPenalty, "repetition-penalty", 1, "penalty on tokens already in the prompt or output")
	f.Int64Var(&opts.Seed, "seed", 0, "sampling seed")
	f.IntVar(&opts.Threads, "threads", 0, "compute threads (0 = all cores); the output does not depend on it")
	f.BoolVar(&opts.Stats, "stats", false, "print the load time, prefill and decode tokens/s and the device to stderr")
	addKVCacheDTypeFlag(f, &opts.KVCacheDType)
	addDeviceFlag(f, &opts.Device)
	f.StringVar(&opts.Drafter, "drafter", "", "DSpark drafter for the model (a directory, or a hub id OWNER/NAME[@REVISION]): drafted decoding, the same output")
	f.IntVar(&opts.DraftDepth, "draft-depth", 0, fmt.Sprintf("drafts verified per step, 1-%d (0 = scheduled by the drafter's confidence and the measured step costs)", draft.MaxBlockSize))
	cmd.MarkFlagDirname("model")
	cmd.MarkFlagDirname("drafter")
	return cmd
}

// samplingFlagError names the flag behind a sampling field that failed
// validation: the user typed --top-p, not top_p.
func samplingFlagError(err error) error {
	var pe *sample.ParamError
	if !errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("--%s %s", strings.ReplaceAll(pe.Field, "_", "-"), pe.Msg)
}

func (o *generateOptions) params() sample.Params {
	p := sample.Neutral()
	p.Temperature, p.TopK, p.TopP, p.MinP = o.Temperature, o.TopK, o.TopP, o.MinP
	p.RepetitionPenalty, p.Seed = o.RepPenalty, uint64(o.Seed)
	return p
}

func generateRun(cmd *cobra.Command, opts *generateOptions) error {
	// A model named by its hub id is looked up (and perhaps fetched) once
	// the rest of the command line has passed its checks.
	hub := isHubID(opts.Model)
	opts.dir = opts.Model
	if !hub {
		if err := requireCheckpoint("--model", opts.Model, opts.dir); err != nil {
			return err
		}
	}
	if err := checkDeviceFlag(opts.Device); err != nil {
		return err
	}
	// The other input files are checked before the model loads, so that a
	// typo in a name is a usage error at once, not after the load.
	if opts.Tools != "" {
		var err error
		if opts.toolsJSON, err = readToolsArg(opts.Tools); err != nil {
			return err
		}
	}
	if opts.JSONSchema != "" {
		if err := opts.readSchema(); err != nil {
			return err
		}
	}
	if hub {
		dir, err := resolveHubModel(cmd, opts.IO, "--model", opts.Model, opts.Endpoint)
		if err != nil {
			return err
		}
		if err := requireCheckpoint("--model", opts.Model, dir); err != nil {
			return err
		}
		opts.dir = dir
	}
	loadStart := time.Now()
	opts.IO.ConfigWarnings(opts.dir)
	// With --stats the device line ends the statistics instead.
	var announce io.Writer = opts.IO.ErrOut
	if opts.Stats {
		announce = nil
	}
	drafterDir, err := resolveDrafterArg(cmd, opts.IO, opts.Drafter, opts.Endpoint)
	if err != nil {
		return err
	}
	dev, line, err := openDevice(opts.Device, announce)
	if err != nil {
		return err
	}
	defer closeDevice(dev)
	opts.deviceLine = line
	s, err := generate.Open(opts.dir, load.Options{Threads: opts.Threads, Device: dev, KVCacheDType: kvCacheDType(opts.KVCacheDType), Resident: true})
	if err != nil {
		return err
	}
	defer s.Close()
	if drafterDir != "" {
		d, err := draft.Load(drafterDir, s.Model)
		if err != nil {
			return err
		}
		defer d.Close()
		opts.drafter = d
	}
	loadTime := time.Since(loadStart)
	if opts.JSONSchema != "" {
		err = generateSchema(cmd, opts, s)
	} else {
		err = generateText(cmd, opts, s, loadTime)
	}
	if err != nil {
		return err
	}
	// The checkpoint's files were hashed while the model worked; success
	// waits for that check.
	if err := s.Model.Verified(cmd.Context()); err != nil {
		var nf *load.NonFiniteError
		if errors.As(err, &nf) {
			return fmt.Errorf("--model %s holds a weight that is not a number, so the output above means nothing: %w", opts.Model, err)
		}
		return fmt.Errorf("%s does not match its manifest.json, so the output above is not this checkpoint's: %w", opts.Model, err)
	}
	return nil
}

// generateText streams the continuation of --prompt or --chat to stdout.
func generateText(cmd *cobra.Command, opts *generateOptions, s *generate.Session, loadTime time.Duration) error {
	var prompt []int
	flag := "--prompt"
	if opts.Prompt != "" {
		prompt = s.EncodeText(opts.Prompt)
	} else {
		flag = "--chat"
		msgs := opts.chatJSON
		var err error
		if prompt, err = s.EncodeChat(msgs, opts.toolsJSON, time.Now()); err != nil {
			return err
		}
	}
	// Said in the user's terms before the engine would refuse it as a
	// sequence that exceeds its context.
	if maxCtx := s.Model.MaxContext(); len(prompt) >= maxCtx {
		return fmt.Errorf("%s is %d tokens; the model's context of %d tokens leaves no room to generate", flag, len(prompt), maxCtx)
	}
	res, err := s.Run(cmd.Context(), prompt, generate.Options{
		MaxTokens: opts.MaxTokens,
		Params:    opts.params(),
		OnText:    func(text string) { fmt.Fprint(opts.IO.Out, text) },
		Drafter:   opts.drafter, DraftDepth: opts.DraftDepth,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(opts.IO.Out)
	if opts.Stats {
		end := "max tokens"
		switch {
		case res.Stopped:
			end = "stop token"
		case res.ContextFilled:
			end = "context full"
		}
		fmt.Fprintf(opts.IO.ErrOut, "model %s (%s), loaded in %s\n", opts.Model, s.Model.Format, loadTime.Round(time.Millisecond))
		fmt.Fprintf(opts.IO.ErrOut, "prefill %d tokens in %s: %.1f tokens/s\n", res.PromptTokens, res.PrefillTime.Round(time.Microsecond), res.PrefillTokensPerSecond())
		fmt.Fprintf(opts.IO.ErrOut, "decode  %d tokens in %s: %.1f tokens/s (ended by %s)\n", len(res.Tokens), res.DecodeTime.Round(time.Microsecond), res.DecodeTokensPerSecond(), end)
		// A sliding layer's positions before its window are given back
		// (docs/kv-cache.md, "Sliding layers"): per token, only the
		// full layers count; the sliding ones keep a constant few pages.
		if pool := s.Model.KVPool(); pool.Shape().HasWindow() {
			sh := pool.Shape()
			fmt.Fprintf(opts.IO.ErrOut, "KV cache %s: %d bytes per token in the full attention layers; the sliding layers (window %d) keep at most %d bytes when decoding\n",
				s.Model.KVCacheDType(), sh.FullBytesPerToken(), sh.Window, sh.WindowPages(1)*pool.WindowPageBytes())
		} else {
			fmt.Fprintf(opts.IO.ErrOut, "KV cache %s: %d bytes per token\n", s.Model.KVCacheDType(), s.Model.KVBytesPerToken())
		}
		if d := res.Draft; d != nil {
			fmt.Fprintf(opts.IO.ErrOut, "drafter %s: %d passes in %s, its context in %s; %d verify steps kept %d of %d drafts (%.1f%%), %.2f tokens per step\n",
				opts.Drafter, d.Passes, secs(d.PassSeconds), secs(d.ContextSeconds), d.Steps, d.Accepted, d.Tokens, 100*float64(d.Accepted)/max(float64(d.Tokens), 1), float64(d.Emitted)/max(float64(d.Steps), 1))
		}
		fmt.Fprintln(opts.IO.ErrOut, opts.deviceLine)
	}
	return nil
}

// readSchema reads and checks --json-schema before the model loads, so
// that a schema the command cannot answer fails at once: a missing file, or
// a schema it cannot answer (not JSON included), is a usage error (exit 2);
// a file with a byte-order mark exit 1, as for --chat and --tools files.
func (o *generateOptions) readSchema() error {
	if err := requireFiles("--json-schema "+o.JSONSchema, o.JSONSchema); err != nil {
		return err
	}
	schema, err := os.ReadFile(o.JSONSchema)
	if err != nil {
		return fmt.Errorf("--json-schema: %w", err)
	}
	if bom.Has(schema) {
		return fmt.Errorf("--json-schema %s: %s", o.JSONSchema, bom.Advice)
	}
	_, err = choice.Parse(schema)
	var ue *choice.UnsupportedError
	switch {
	case errors.As(err, &ue):
		return &usageError{fmt.Errorf("--json-schema %s: %w", o.JSONSchema, err)}
	case err != nil:
		return fmt.Errorf("--json-schema %s: %w", o.JSONSchema, err)
	}
	o.schemaJSON = schema
	return nil
}

// generateSchema prints the closed-schema answer to the chat on stdout and,
// with --stats, every candidate's score on stderr.
func generateSchema(cmd *cobra.Command, opts *generateOptions, s *generate.Session) error {
	start := time.Now()
	sch, a, err := s.AnswerSchema(cmd.Context(), opts.chatJSON, opts.schemaJSON, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(opts.IO.Out, a.Text)
	if opts.Stats {
		for i, f := range sch.Fields {
			fmt.Fprintf(opts.IO.ErrOut, "%s:", f.Name)
			for j, c := range f.Candidates {
				mark := ""
				if j == a.Chosen[i] {
					mark = "*"
				}
				fmt.Fprintf(opts.IO.ErrOut, " %s%s %.4f", mark, c, a.Scores[i][j])
			}
			fmt.Fprintln(opts.IO.ErrOut)
		}
		fmt.Fprintf(opts.IO.ErrOut, "scored %d branch tokens from a %d-token prompt in %s\n", a.BranchTokens, a.PromptTokens, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// readChatArg reads --chat (inline JSON or @FILE) and checks it as a
// hand-written conversation.
func readChatArg(arg string) ([]byte, error) {
	return readJSONArrayArg("--chat", arg, `messages such as '[{"role":"user","content":"Hi"}]'`, func(data []byte) error {
		msgs, err := chat.ParseMessages(data)
		if err == nil {
			err = chat.CheckConversation(msgs)
		}
		return err
	})
}

// readToolsArg reads --tools (inline JSON or @FILE) and checks each tool
// definition, before the model loads.
func readToolsArg(arg string) ([]byte, error) {
	return readJSONArrayArg("--tools", arg, "tool definitions", func(data []byte) error {
		_, err := chat.ParseTools(data)
		return err
	})
}

// readJSONArrayArg reads a flag's JSON array, given inline or as @FILE,
// and checks it with check (whose *chat.RequestError is named by its
// field). A bad inline value, or an @FILE that names no file, is a usage
// error (exit 2); a file that cannot be read or holds a bad value is exit
// 1, as for every input file. what names the array's elements.
func readJSONArrayArg(flag, arg, what string, check func(data []byte) error) ([]byte, error) {
	data, where := []byte(arg), flag
	if strings.HasPrefix(arg, "@") {
		if err := requireAtFile(flag, arg); err != nil {
			return nil, err
		}
		var err error
		if data, err = os.ReadFile(arg[1:]); err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		where = flag + " " + arg[1:]
	}
	var v any
	err := json.Unmarshal(data, &v)
	switch _, isArray := v.([]any); {
	case bom.Has(data):
		err = errors.New(bom.Advice)
	case err != nil:
		err = fmt.Errorf("not valid JSON: %w", err)
	case !isArray:
		err = fmt.Errorf("expected a JSON array of %s, got %s", what, jsonKindOf(v))
	default:
		err = check(data)
		var re *chat.RequestError
		if errors.As(err, &re) {
			err = fmt.Errorf("%s: %w", re.Field, re.Err)
		}
	}
	if err == nil {
		return data, nil
	}
	err = fmt.Errorf("%s: %w", where, err)
	if where == flag {
		return nil, &usageError{err}
	}
	return nil, err
}

// requireAtFile refuses, as a usage error, a flag's @FILE value that names
// no file, as requireFiles does for the flags that always take a file.
func requireAtFile(flag, arg string) error {
	if arg == "@" {
		return &usageError{fmt.Errorf("%s @: give a file name after @", flag)}
	}
	return requireFiles(flag+" "+arg, arg[1:])
}

// jsonKindOf names the JSON type of a decoded value.
func jsonKindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case map[string]any:
		return "an object"
	}
	return "an array"
}

// secs writes seconds as a duration rounded to the microsecond.
func secs(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/report"
	"github.com/lfmq/lfmq/evidence/score"
	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/internal/progress"
)

type scoreOptions struct {
	IO        *IOStreams
	Reference string
	// Endpoint is the hub of a --reference given as OWNER/NAME[@REVISION].
	Endpoint       string
	Candidates     []score.Candidate
	Corpora        []score.CorpusSpec
	Ctx            int
	Out            string
	NoiseFloor     bool
	Chunk          int
	SaveReference  string
	ReferenceCache string
	Plot           string
	MaxRecords     int
	Threads        int
	KVCacheDType   string
	Device         string
	// APIKey is sent to served candidates (from --api-key, the file of
	// --api-key-file, read when the run starts, or LFMQ_API_KEY); it is
	// never recorded. APIKeyFile is recorded in the receipts' command line.
	APIKey     string
	APIKeyFile string
	// HTTPClient builds the client for served candidates lazily (tests
	// inject one); nil means score's default.
	HTTPClient func() *http.Client
}

func newScoreCmd(ios *IOStreams, runF func(*scoreOptions) error) *cobra.Command {
	opts := &scoreOptions{IO: ios}
	var cands, corpora []string
	cmd := &cobra.Command{
		Use:   "score --reference DIR|OWNER/NAME[@REV] --candidate [NAME=]DIR|URL... --corpus NAME=FILE... [--out FILE]",
		Short: "Score quantized checkpoints against the BF16 reference (evidence of fidelity)",
		Long: `Score runs the reference checkpoint and every candidate teacher-forced over the
same token windows of each corpus (docs/scoring.md) and reports, per candidate and
corpus and pooled over all corpora: scored tokens, perplexity reference →
candidate, ΔPPL % (± SE of the paired per-token differences), top-1 agreement
and KL(ref ‖ cand) over the full vocabulary (mean ± SE, median, p99, max).

A candidate is a checkpoint directory, or a running 'lfmq serve' given by its
base URL (NAME=http://HOST:PORT, or http://HOST:PORT named HOST:PORT): it is
scored through /v1/completions, one request per window with the window's token
ids, and the server returns every position's full-vocabulary log-probs
losslessly, so the figures equal scoring the same checkpoint directory in
process bit for bit. /v1/models must report the reference's vocabulary and
tokenizer.json and a --max-model-len of at least --ctx; the receipts record
the URL, the served model and the checkpoint identity the server reports.
--api-key-file FILE (or --api-key, or LFMQ_API_KEY) is sent as a bearer token;
the key itself is never recorded.

--reference may name a model on the hub by its id, OWNER/NAME[@REVISION],
read from (or fetched into) the Hugging Face cache as 'lfmq quantize --model'
does, from --endpoint; the receipts record the repository and commit of a
reference read from the cache, and an lfmq-1 candidate's receipt those its
manifest records of its source.

A corpus is JSONL: a record's input_ids are scored as given; otherwise its
messages (and tools) are rendered with the reference's chat template; otherwise
its text is scored as BOS + the ordinary encoding. Long records are cut into
windows of --ctx tokens overlapping by half; each window runs from an empty state.

The Markdown table goes to stdout; --out writes the evidence file (figures and
receipts: version, binary and checkpoint hashes, corpus hashes, command line,
time, machine), from which the table can be rendered again.

--noise-floor adds two rows: the reference run in chunks of --chunk tokens
through the incremental path against one pass, and the reference against its
own log-probs stored as binary16. --save-reference stores the reference
log-probs (binary16 rows, zstd) with FILE.sha256 beside it; --reference-cache
reuses them instead of running the reference, after checking the hash and that
reference, tokenizer, --ctx and corpora are the same. --plot DIR writes one SVG
per corpus with the per-token KL distribution of every row.`,
		Example: `  lfmq score --reference ./LFM2-8B-A1B --candidate rtn=./out-rtn \
      --corpus chat=chat.jsonl --corpus code=code.jsonl --out evidence/rtn.json
  lfmq score --reference ./model --candidate bf16-experts=./keep --candidate rtn=./rtn \
      --corpus book=book.jsonl --noise-floor --plot plots/
  lfmq score --reference ./LFM2-8B-A1B --candidate served=http://127.0.0.1:8000 \
      --api-key-file key.txt --corpus chat=chat.jsonl --out evidence/served.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd, cands, corpora); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return scoreRun(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Reference, "reference", "", "reference checkpoint, the BF16 source: a directory, or a hub id OWNER/NAME[@REVISION] found in or fetched into the Hugging Face cache (required)")
	f.StringVar(&opts.Endpoint, "endpoint", "", hubEndpointUsage)
	f.StringArrayVar(&cands, "candidate", nil, "candidate checkpoint as NAME=DIR or DIR, or a running lfmq serve as NAME=URL or URL (repeatable)")
	f.StringArrayVar(&corpora, "corpus", nil, "corpus as NAME=FILE, JSONL (repeatable, required)")
	f.IntVar(&opts.Ctx, "ctx", score.DefaultCtx, "window length in tokens (even; capped by the model's context)")
	f.StringVar(&opts.Out, "out", "", "write the evidence JSON to FILE")
	f.BoolVar(&opts.NoiseFloor, "noise-floor", false, "add the noise floor and storage floor rows")
	f.IntVar(&opts.Chunk, "chunk", score.DefaultChunk, "chunk length of the noise floor's incremental run")
	f.StringVar(&opts.SaveReference, "save-reference", "", "store the reference log-probs in FILE (binary16 + zstd)")
	f.StringVar(&opts.ReferenceCache, "reference-cache", "", "read the reference log-probs from FILE instead of running the reference")
	f.StringVar(&opts.Plot, "plot", "", "write an SVG of the per-token KL distribution per corpus to DIR")
	f.IntVar(&opts.MaxRecords, "max-records", 0, "score only the first N records of each corpus (0 = all)")
	f.IntVar(&opts.Threads, "threads", 0, "threads (0 = all cores); results do not depend on it")
	f.StringVar(&opts.KVCacheDType, "kv-cache-dtype", defaultKVCacheDType, "KV cache format of the in-process candidates (the reference keeps f32): bf16, f32 or bfp8, with lfmq serve's default")
	addDeviceFlag(f, &opts.Device)
	f.StringVar(&opts.APIKey, "api-key", "", "`KEY` sent to served candidates as a bearer token (default $LFMQ_API_KEY; prefer --api-key-file, a command line is visible to other users)")
	f.StringVar(&opts.APIKeyFile, "api-key-file", "", "read the key for served candidates from `FILE`")
	cmd.MarkFlagDirname("reference")
	cmd.MarkFlagDirname("plot")
	cmd.MarkFlagFilename("api-key-file")
	return cmd
}

// validate checks the command line into o: the corpora and candidates
// parsed, the flags' combinations checked (usage errors, exit 2).
func (o *scoreOptions) validate(cmd *cobra.Command, cands, corpora []string) error {
	if err := requireFlags("reference", o.Reference); err != nil {
		return err
	}
	if len(corpora) == 0 {
		return &usageError{errors.New("--corpus is required")}
	}
	for _, c := range corpora {
		name, path, ok := strings.Cut(c, "=")
		if !ok || name == "" || path == "" {
			return &usageError{fmt.Errorf("--corpus %q: want NAME=FILE", c)}
		}
		o.Corpora = append(o.Corpora, score.CorpusSpec{Name: name, Path: path})
	}
	for _, c := range cands {
		cand, err := parseCandidate(c)
		if err != nil {
			return err
		}
		o.Candidates = append(o.Candidates, cand)
	}
	if len(o.Candidates) == 0 && !o.NoiseFloor {
		return &usageError{errors.New("give at least one --candidate, or --noise-floor")}
	}
	if o.Ctx < 4 || o.Ctx%2 != 0 {
		return &usageError{fmt.Errorf("--ctx must be even and at least 4, got %d", o.Ctx)}
	}
	if o.Chunk < 1 {
		return &usageError{fmt.Errorf("--chunk must be positive, got %d", o.Chunk)}
	}
	if o.MaxRecords < 0 || o.Threads < 0 {
		return &usageError{errors.New("--max-records and --threads must not be negative")}
	}
	if err := checkKVCacheDType(o.KVCacheDType); err != nil {
		return err
	}
	if err := checkDeviceFlag(o.Device); err != nil {
		return err
	}
	if o.SaveReference != "" && o.ReferenceCache != "" {
		return &usageError{errors.New("--save-reference and --reference-cache exclude each other")}
	}
	keyFlag, keyFile := cmd.Flags().Changed("api-key"), cmd.Flags().Changed("api-key-file")
	switch {
	case keyFlag && keyFile:
		return &usageError{errors.New("--api-key and --api-key-file exclude each other")}
	case keyFile && o.APIKeyFile == "":
		return &usageError{errors.New("--api-key-file: empty file name")}
	case !keyFlag && !keyFile:
		o.APIKey = os.Getenv("LFMQ_API_KEY")
	}
	return nil
}

// urlPrefix matches what starts a URL rather than a directory: a scheme
// and "://".
var urlPrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// parseCandidate reads NAME=DIR, or DIR (named by its last element), or a
// served candidate: NAME=URL, or URL (named by its HOST:PORT).
// hostPort matches HOST:PORT, a served candidate typed without http://.
var hostPort = regexp.MustCompile(`^[A-Za-z0-9.\-]+:[0-9]{1,5}$`)

func parseCandidate(s string) (score.Candidate, error) {
	served := func(name, raw string) (score.Candidate, error) {
		base, err := score.ParseServerURL(raw)
		var oe *score.OptionsError
		if errors.As(err, &oe) {
			return score.Candidate{}, &usageError{fmt.Errorf("--candidate %s", oe.Msg)}
		}
		if err != nil {
			return score.Candidate{}, &usageError{err}
		}
		if name == "" {
			name = strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
		}
		return score.Candidate{Name: name, URL: base}, nil
	}
	if urlPrefix.MatchString(s) {
		return served("", s)
	}
	if name, dir, ok := strings.Cut(s, "="); ok && !strings.ContainsAny(name, `/\`) {
		if name != "" && urlPrefix.MatchString(dir) {
			return served(name, dir)
		}
		if name == "" || dir == "" {
			return score.Candidate{}, &usageError{fmt.Errorf("--candidate %q: want NAME=DIR, DIR, NAME=URL or URL", s)}
		}
		return score.Candidate{Name: name, Dir: dir}, nil
	}
	if s == "" {
		return score.Candidate{}, &usageError{errors.New("--candidate: empty")}
	}
	name := filepath.Base(filepath.Clean(s))
	if abs, err := filepath.Abs(s); err == nil {
		name = filepath.Base(abs) // "." is named by the directory's own name
	}
	return score.Candidate{Name: name, Dir: s}, nil
}

// commandLine is the canonical command line recorded in the receipts: the
// options in a fixed order, so that equal runs record equal lines.
func commandLine(o *scoreOptions) string {
	args := []string{"lfmq", "score", "--reference", o.Reference}
	for _, c := range o.Candidates {
		args = append(args, "--candidate", c.Name+"="+c.Dir+c.URL)
	}
	for _, c := range o.Corpora {
		args = append(args, "--corpus", c.Name+"="+c.Path)
	}
	args = append(args, "--ctx", strconv.Itoa(o.Ctx))
	if o.NoiseFloor {
		args = append(args, "--noise-floor", "--chunk", strconv.Itoa(o.Chunk))
	}
	if o.MaxRecords > 0 {
		args = append(args, "--max-records", strconv.Itoa(o.MaxRecords))
	}
	// Always written: the default has changed once (f32 to bf16), so a
	// line without it would not say which cache its rows came from.
	if o.KVCacheDType != "" {
		args = append(args, "--kv-cache-dtype", o.KVCacheDType)
	}
	// The key is never written; the file it came from is.
	for _, kv := range [][2]string{{"--save-reference", o.SaveReference}, {"--reference-cache", o.ReferenceCache}, {"--api-key-file", o.APIKeyFile}, {"--out", o.Out}, {"--plot", o.Plot}} {
		if kv[1] != "" {
			args = append(args, kv[0], kv[1])
		}
	}
	return quoteArgs(args)
}

// givenFlagsCommandLine is the command line a receipt records for a
// command whose flags say everything: words, then every flag given, in
// name order, a list flag's items joined by commas (a key file's name is
// a flag value, never the key).
func givenFlagsCommandLine(cmd *cobra.Command, words ...string) string {
	args := append([]string(nil), words...)
	cmd.Flags().Visit(func(f *pflag.Flag) {
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), ",")
		}
		args = append(args, "--"+f.Name, v)
	})
	return quoteArgs(args)
}

// quoteArgs joins a command line for a receipt, quoting the words a shell
// would not read as one.
func quoteArgs(args []string) string {
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?;&|<>(){}[]") {
			args[i] = strconv.Quote(a)
		}
	}
	return strings.Join(args, " ")
}

func scoreRun(cmd *cobra.Command, opts *scoreOptions) error {
	refDir, err := scoreInputs(cmd, opts)
	if err != nil {
		return err
	}
	out, err := scoreWork(cmd.Context(), opts, refDir)
	if err != nil {
		return err
	}
	return scoreReport(opts, out)
}

// scoreInputs checks the run's inputs and outputs before anything is
// scored (the directories of output files made), so that a bad path fails
// at once rather than after the run, and returns the reference's
// directory: a reference named by its hub id is looked up (and perhaps
// fetched) last.
func scoreInputs(cmd *cobra.Command, opts *scoreOptions) (refDir string, err error) {
	// A reference named by its hub id is looked up (and perhaps fetched)
	// once the rest of the command line has passed its checks; refDir is
	// its directory, while the receipts' command line keeps the id.
	refDir = opts.Reference
	hub := isHubID(opts.Reference)
	if !hub {
		if err := requireReference(opts.Reference, refDir); err != nil {
			return "", err
		}
	}
	for _, c := range opts.Candidates {
		if c.Dir != "" {
			if err := requireCheckpoint("--candidate", c.Name+"="+c.Dir, c.Dir); err != nil {
				if _, statErr := os.Stat(c.Dir); os.IsNotExist(statErr) && hostPort.MatchString(c.Dir) {
					// localhost:8000 is a server without its scheme far
					// more often than a directory of that name.
					return "", &usageError{fmt.Errorf("%w; for a running server give http://%s", err, c.Dir)}
				}
				return "", err
			}
		}
	}
	var files []string
	for _, c := range opts.Corpora {
		files = append(files, "--corpus "+c.Name+"="+c.Path, c.Path)
	}
	if opts.APIKeyFile != "" {
		files = append(files, "--api-key-file "+opts.APIKeyFile, opts.APIKeyFile)
	}
	if err := requireFiles(files...); err != nil {
		return "", err
	}
	if opts.ReferenceCache != "" {
		if err := requireFiles("--reference-cache "+opts.ReferenceCache, opts.ReferenceCache); err != nil {
			return "", err
		}
	}
	// Output paths are checked, and the directories of output files made,
	// before scoring, so that a bad path fails at once rather than after
	// the run.
	if opts.Plot != "" {
		if err := requireOutDir("--plot "+opts.Plot, opts.Plot); err != nil {
			return "", err
		}
	}
	for _, o := range [][2]string{{"--out", opts.Out}, {"--save-reference", opts.SaveReference}} {
		if o[1] == "" {
			continue
		}
		label := o[0] + " " + o[1]
		if err := requireOutFile(label, o[1]); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(o[1]), 0o755); err != nil {
			return "", &usageError{fmt.Errorf("%s: %w", label, err)}
		}
	}
	if hub {
		dir, err := resolveHubModel(cmd, opts.IO, "--reference", opts.Reference, opts.Endpoint)
		if err != nil {
			return "", err
		}
		refDir = dir
		if err := requireReference(opts.Reference, refDir); err != nil {
			return "", err
		}
	}
	return refDir, nil
}

// requireReference is requireCheckpoint for --reference, which must be
// the BF16 source: an lfmq-1 checkpoint given there is a mix-up of
// directories that would otherwise be scored and labelled BF16.
func requireReference(value, dir string) error {
	if err := requireDir("--reference "+value, dir); err != nil {
		return err
	}
	if has := lfmq1Has(dir); has != "" {
		return &usageError{fmt.Errorf("--reference %s: an lfmq-1 checkpoint (it has %s), not the BF16 source: give the Hugging Face checkpoint it was quantized from, and score this one as a --candidate", value, has)}
	}
	return requireCheckpoint("--reference", value, dir)
}

// scoreWork scores with the reference in refDir, reporting progress on
// the error stream, and maps the options' errors to usage errors.
func scoreWork(ctx context.Context, opts *scoreOptions, refDir string) (*score.Output, error) {
	opts.IO.ConfigWarnings(refDir)
	for _, c := range opts.Candidates {
		if c.Dir != "" {
			opts.IO.ConfigWarnings(c.Dir)
		}
	}
	if opts.APIKeyFile != "" {
		key, err := readKeyFile(opts.APIKeyFile)
		if err != nil {
			return nil, err
		}
		opts.APIKey = key
	}
	dev, _, err := openDevice(opts.Device, opts.IO.ErrOut)
	if err != nil {
		return nil, err
	}
	defer closeDevice(dev)
	so := score.Options{
		Device:    dev,
		Reference: refDir, Candidates: opts.Candidates, Corpora: opts.Corpora,
		Ctx: opts.Ctx, NoiseFloor: opts.NoiseFloor, Chunk: opts.Chunk, MaxRecords: opts.MaxRecords,
		SaveReference: opts.SaveReference, ReferenceCache: opts.ReferenceCache,
		Threads: opts.Threads, Command: commandLine(opts), APIKey: opts.APIKey, KVCacheDType: kvCacheDType(opts.KVCacheDType),
	}
	if opts.HTTPClient != nil {
		so.HTTPClient = opts.HTTPClient()
	}
	prog := progress.NewCount(opts.IO.ErrOut, opts.IO.ErrTTY, "scoring", "tokens", statusEvery)
	defer prog.Finish()
	so.Progress = prog.Report
	out, err := score.Run(ctx, so)
	// The status lines end before anything else goes to ErrOut.
	prog.Finish()
	var oe *score.OptionsError
	if errors.As(err, &oe) {
		return nil, &usageError{err}
	}
	return out, err
}

// scoreReport writes the table to stdout, the run's figures to the error
// stream, and the evidence file and plots asked for.
func scoreReport(opts *scoreOptions, out *score.Output) error {
	f := out.File
	fmt.Fprint(opts.IO.Out, report.Markdown(f))
	scored := 0
	for _, c := range f.Receipts.Corpora {
		scored += c.Tokens
	}
	corpora := fmt.Sprintf("%d corpora", len(f.Receipts.Corpora))
	if len(f.Receipts.Corpora) == 1 {
		corpora = "1 corpus"
	}
	opts.IO.Errorf("scored %d tokens of %s in %.1fs: %.0f tokens/s through the models (%d model positions)\n",
		scored, corpora, float64(f.Timing.Seconds), float64(f.Timing.TokensPerSecond), f.Timing.Tokens)
	if c := f.Receipts.ReferenceCache; c != nil && c.Mode == "saved" {
		opts.IO.Errorf("wrote reference cache %s (%s, sha256 %s)\n", c.Path, units.Bytes(c.Bytes), c.SHA256)
	}
	if opts.Out != "" {
		if err := evidence.Write(opts.Out, f); err != nil {
			return err
		}
		opts.IO.Errorf("wrote evidence %s\n", opts.Out)
	}
	if opts.Plot != "" {
		if err := writePlots(opts.Plot, out); err != nil {
			return err
		}
		opts.IO.Errorf("wrote plots to %s\n", opts.Plot)
	}
	return nil
}

// readKeyFile reads an API key: the file's content without surrounding
// white space (a trailing newline). The key is never part of a message.
func readKeyFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--api-key-file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", &usageError{fmt.Errorf("--api-key-file %s: the file holds no key", path)}
	}
	return key, nil
}

// writePlots writes one KL CDF per corpus with a curve per row.
func writePlots(dir string, out *score.Output) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var order []string
	curves := map[string][]report.Curve{}
	for _, s := range out.Series {
		if _, ok := curves[s.Corpus]; !ok {
			order = append(order, s.Corpus)
		}
		curves[s.Corpus] = append(curves[s.Corpus], report.Curve{Name: s.Variant, KL: s.KL, Dashed: s.Kind != evidence.KindCandidate})
	}
	ref := out.File.Receipts.Reference.Name
	for _, c := range order {
		svg := report.CDF(fmt.Sprintf("KL(%s ‖ candidate) per token: %s, %d tokens", ref, c, len(curves[c][0].KL)), curves[c])
		if err := durable.WriteFile(filepath.Join(dir, "kl-"+report.FileName(c)+".svg"), svg); err != nil {
			return err
		}
	}
	return nil
}

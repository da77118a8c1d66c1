package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

// denseModel is the dense LFM2 fixture (model_type "lfm2").
const denseModel = "../../testdata/tiny-lfm2/model"

func TestQuantizeFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    quantizeOptions
		wantErr string
	}{
		{"all flags", "--model m --out o --method rtn --workers 3 --experts keep", quantizeOptions{Model: "m", Out: "o", Method: quant.RTN, Workers: 3, Experts: "keep"}, ""},
		{"default method", "--model m --out o --calib c.jsonl", quantizeOptions{Model: "m", Out: "o", Method: quant.GPTQ, Experts: "quantize"}, ""},
		{"gptq needs calib", "--model m --out o", quantizeOptions{}, "--calib is required"},
		{"gptq flag with rtn", "--model m --out o --method rtn --damp-w2 3", quantizeOptions{}, "--damp-w2 applies to --method gptq"},
		{"gptq flag with kept experts", "--model m --out o --experts keep --calib c", quantizeOptions{}, "--calib applies to"},
		{"bad w2 weight", "--model m --out o --calib c --w2-weight g3", quantizeOptions{}, "--w2-weight must be"},
		{"bad eval corpus", "--model m --out o --calib c --eval-corpus =x", quantizeOptions{}, "want NAME=FILE"},
		{"repeated eval corpus", "--model m --out o --calib c --eval-corpus a/chat.jsonl --eval-corpus chat=b", quantizeOptions{}, `"chat" is given twice`},
		{"bad block size", "--model m --out o --calib c --block-size 0", quantizeOptions{}, "--block-size"},
		{"negative solve memory", "--model m --out o --calib c --solve-memory -1", quantizeOptions{}, "--solve-memory must be 0 (automatic) or a number of MiB"},
		{"huge solve memory", "--model m --out o --calib c --solve-memory 9999999999", quantizeOptions{}, "--solve-memory must be"},
		{"solve memory with rtn", "--model m --out o --method rtn --solve-memory 512", quantizeOptions{}, "--solve-memory applies to --method gptq"},
		{"bad chat date", "--model m --out o --calib c --chat-date 2025-1-1", quantizeOptions{}, `--chat-date must be a day written YYYY-MM-DD, got "2025-1-1"`},
		{"chat date with rtn", "--model m --out o --method rtn --chat-date 2025-01-01", quantizeOptions{}, "--chat-date applies to --method gptq"},
		{"negative damping", "--model m --out o --calib c --damp-w13 -1", quantizeOptions{}, "--damp-w13"},
		{"NaN w2 damping", "--model m --out o --calib c --damp-w2 NaN", quantizeOptions{}, "--damp-w2 must be a finite number ≥ 0, got NaN"},
		{"NaN dense damping", "--model m --out o --calib c --damp-dense nan", quantizeOptions{}, "--damp-dense must be a finite number ≥ 0, got NaN"},
		{"infinite dense damping", "--model m --out o --calib c --damp-dense +Inf", quantizeOptions{}, "--damp-dense must be a finite number ≥ 0, got +Inf"},
		{"negative dense damping", "--model m --out o --calib c --damp-dense -0.5", quantizeOptions{}, "--damp-dense must be a finite number ≥ 0, got -0.5"},
		{"infinite shrink", "--model m --out o --calib c --shrink inf", quantizeOptions{}, "--shrink must be a finite number ≥ 0, got +Inf"},
		{"bad experts", "--model m --out o --experts drop", quantizeOptions{}, "--experts must be"},
		{"missing model", "--out o", quantizeOptions{}, "--model is required"},
		{"missing out", "--model m", quantizeOptions{}, "--out is required"},
		{"bad method", "--model m --out o --method awq", quantizeOptions{}, `unknown method "awq"`},
		{"negative workers", "--model m --out o --workers -1", quantizeOptions{}, "--workers"},
		{"stray argument", "--model m --out o extra", quantizeOptions{}, "takes no arguments"},
		{"unknown flag", "--model m --out o --fast", quantizeOptions{}, "unknown flag: --fast"},
		{"drafter", "--model m --out o --method rtn --drafter d --eval-corpus code=c.jsonl", quantizeOptions{Model: "m", Out: "o", Method: quant.RTN, Experts: "quantize"}, ""},
		{"drafter needs eval corpus", "--model m --out o --method rtn --drafter d", quantizeOptions{}, "--drafter needs --eval-corpus"},
		{"drafter records without drafter", "--model m --out o --method rtn --drafter-records 3", quantizeOptions{}, "--drafter-records applies to --drafter"},
		{"bad drafter records", "--model m --out o --method rtn --drafter d --eval-corpus c --drafter-records 0", quantizeOptions{}, "--drafter-records must be at least 1, got 0"},
		{"eval corpus with rtn", "--model m --out o --method rtn --eval-corpus c", quantizeOptions{}, "--eval-corpus applies to --method gptq with --experts quantize or --dense-method gptq, or to --drafter"},
		{"drafter bad eval corpus", "--model m --out o --method rtn --drafter d --eval-corpus =x", quantizeOptions{}, "want NAME=FILE"},
		{"drafter only", "--model m --out o --drafter d --drafter-only --eval-corpus c --dense-exponent-rule search --workers 2", quantizeOptions{Model: "m", Out: "o", Experts: "quantize", Workers: 2}, ""},
		{"drafter only needs drafter", "--model m --out o --drafter-only --eval-corpus c", quantizeOptions{}, "--drafter-only needs --drafter"},
		{"drafter only needs eval corpus", "--model m --out o --drafter d --drafter-only", quantizeOptions{}, "--drafter needs --eval-corpus"},
		{"drafter only with a model flag", "--model m --out o --drafter d --drafter-only --eval-corpus c --method rtn", quantizeOptions{}, "--method shapes the model's quantization; --drafter-only quantizes the drafter alone"},
		{"drafter only with calib", "--model m --out o --drafter d --drafter-only --eval-corpus c --calib x", quantizeOptions{}, "--calib shapes the model's quantization"},
		{"drafter bad chat date", "--model m --out o --method rtn --drafter d --eval-corpus c --chat-date 1-1", quantizeOptions{}, "--chat-date must be a day written YYYY-MM-DD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseQuantize(tt.args)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Model != tt.want.Model || got.Out != tt.want.Out || got.Method != tt.want.Method || got.Workers != tt.want.Workers || got.Experts != tt.want.Experts {
				t.Errorf("options %+v, want %+v", *got, tt.want)
			}
		})
	}
}

// TestQuantizeAndInspect runs the real commands end to end on the tiny model,
// then damages the result and checks the exit codes.
func TestQuantizeAndInspect(t *testing.T) {
	out := filepath.Join(t.TempDir(), "rtn")
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", out, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout.String(), "manifest sha256") || stderr.Len() != 0 {
		t.Errorf("quantize output:\n%s\nstderr:\n%s", stdout, stderr)
	}

	ios, stdout, stderr = testStreams()
	if code := run(context.Background(), []string{"inspect", "--tensors", out}, ios); code != 0 {
		t.Fatalf("inspect exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"model.layers.7.feed_forward.experts.15.w2.weight  bfp4_b  [128,128]  9216",
		"lm_head.weight  bfp8_b  [8192,128]",
		"verified against manifest",
		"lfmq-1 checkpoint",
	} {
		if !strings.Contains(squeeze(stdout.String()), squeeze(want)) {
			t.Errorf("inspect output lacks %q", want)
		}
	}

	ios, stdout, _ = testStreams()
	if code := run(context.Background(), []string{"inspect", tinyModel}, ios); code != 0 {
		t.Fatalf("inspect of the HF model: exit %d", code)
	}
	if !strings.Contains(squeeze(stdout.String()), "model.embed_tokens.weight  bf16  [8192,128]  2097152") {
		t.Errorf("HF inspect output:\n%s", stdout)
	}

	damage := []struct {
		name string
		do   func(dir string)
		code int
		want string
	}{
		{"flipped tensor byte", func(dir string) {
			p := filepath.Join(dir, "experts-04.safetensors")
			b, _ := os.ReadFile(p)
			b[len(b)-100] ^= 0x10
			os.WriteFile(p, b, 0o644)
		}, exitMismatch, "model.layers.4.feed_forward.experts."},
		{"truncated file", func(dir string) {
			p := filepath.Join(dir, "layer-03.safetensors")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, exitMismatch, "layer-03.safetensors: size mismatch"},
		{"corrupted header", func(dir string) {
			p := filepath.Join(dir, "global.safetensors")
			b, _ := os.ReadFile(p)
			copy(b[8:], "[")
			os.WriteFile(p, b, 0o644)
		}, exitMismatch, "global.safetensors"},
		{"manifest entry", func(dir string) {
			p := filepath.Join(dir, "manifest.json")
			b, _ := os.ReadFile(p)
			s := strings.Replace(string(b), `"format": "bfp8_b"`, `"format": "bfp4_b"`, 1)
			os.WriteFile(p, []byte(s), 0o644)
		}, exitMismatch, "metadata mismatch"},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			copyDir(t, out, dir)
			d.do(dir)
			ios, _, stderr := testStreams()
			code := run(context.Background(), []string{"inspect", dir}, ios)
			if code == 0 {
				t.Fatal("inspect of a damaged checkpoint exited 0")
			}
			if code != d.code {
				t.Errorf("exit %d, want %d", code, d.code)
			}
			if !strings.Contains(stderr.String(), d.want) {
				t.Errorf("stderr %q lacks %q", stderr, d.want)
			}
		})
	}
}

func TestUsageExitCodes(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"inspect"}, {"inspect", "a", "b"}, {"quantize", "--bogus"}} {
		ios, _, stderr := testStreams()
		if code := run(context.Background(), args, ios); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, stderr)
		}
	}
	ios, stdout, _ := testStreams()
	if code := run(context.Background(), []string{"version"}, ios); code != 0 || !strings.HasPrefix(stdout.String(), "lfmq ") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
	for _, flag := range []string{"--version", "-v"} {
		ios, out, _ := testStreams()
		if code := run(context.Background(), []string{flag}, ios); code != 0 || out.String() != stdout.String() {
			t.Errorf("lfmq %s: exit %d, %q; want what 'lfmq version' prints, %q", flag, code, out, stdout)
		}
	}
	ios, stdout, _ = testStreams()
	if code := run(context.Background(), []string{"completion", "bash"}, ios); code != 0 || !strings.Contains(stdout.String(), "bash completion") {
		t.Errorf("completion bash: exit %d", code)
	}
	ios, _, stderr := testStreams()
	// A directory without any checkpoint file is the command line's fault
	// (docs/cli.md), as for --model.
	if code := run(context.Background(), []string{"inspect", t.TempDir()}, ios); code != exitUsage || !strings.Contains(stderr.String(), "model.safetensors") {
		t.Errorf("inspect of an empty dir: exit %d, %q", code, stderr)
	}
}

// parseQuantize runs the quantize command line args with the run function
// replaced by a capture of the parsed options.
func parseQuantize(args string) (*quantizeOptions, error) {
	ios, _, _ := testStreams()
	var got *quantizeOptions
	cmd := newQuantizeCmd(ios, func(o *quantizeOptions) error { got = o; return nil })
	err := executeWith(ios, cmd, append([]string{"quantize"}, strings.Fields(args)...)...)
	return got, err
}

// TestQuantizeGPTQFlags: every GPTQ flag reaches the options, and the
// manifest's command line keeps the settings that shape the bytes but no
// path, --workers, --block-size, --solve-memory, --resume or --strict.
func TestQuantizeGPTQFlags(t *testing.T) {
	got, err := parseQuantize("--model /m --out /o --calib /data/c.jsonl --calib-seqs 8 --calib-len 64 --seed 3 --chat-date 2031-07-15 " +
		"--eval-corpus chat=/e/a.jsonl --eval-corpus /e/code.jsonl --damp-w13 0.1 --damp-w2 0.5 --block-size 16 " +
		"--act-order=false --shrink 0 --w2-weight g2 --sequential=false --resume --strict --workers 2 --solve-memory 512")
	if err != nil {
		t.Fatal(err)
	}
	g := got.GPTQ
	want := quant.GPTQOptions{
		Calib: "/data/c.jsonl", CalibSeqs: 8, CalibLen: 64, Seed: 3, ChatDate: "2031-07-15",
		DampW13: 0.1, DampW2: 0.5, BlockSize: 16, ActOrder: false, Shrink: 0, W2Weight: "g2",
		Sequential: false, Resume: true, Strict: true, SolveMemory: 512 << 20, DampDense: 0.01,
		EvalCorpora: []quant.EvalCorpus{{Name: "chat", Path: "/e/a.jsonl"}, {Name: "code", Path: "/e/code.jsonl"}},
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("GPTQ options\n%+v\nwant\n%+v", g, want)
	}
	const wantCreated = "lfmq quantize --method gptq --calib-seqs 8 --calib-len 64 --seed 3 --chat-date 2031-07-15 --eval-corpus chat --eval-corpus code " +
		"--damp-w13 0.1 --damp-w2 0.5 --act-order=false --shrink 0 --w2-weight g2 --sequential=false"
	if c := createdBy(got); c != wantCreated {
		t.Errorf("created_by\n%s\nwant\n%s", c, wantCreated)
	}
	got, err = parseQuantize("--model m --out o --calib c")
	if err != nil {
		t.Fatal(err)
	}
	if d := quant.DefaultGPTQOptions(); got.GPTQ.DampW2 != d.DampW2 || !got.GPTQ.ActOrder || !got.GPTQ.Sequential || got.GPTQ.BlockSize != 128 || got.GPTQ.Resume || got.GPTQ.ChatDate != "2025-01-01" {
		t.Errorf("defaults %+v", got.GPTQ)
	}
	if got.DenseMethod != quant.GPTQ {
		t.Errorf("default dense method %q, want gptq with --method gptq", got.DenseMethod)
	}
	if c := createdBy(got); c != "lfmq quantize --method gptq" {
		t.Errorf("created_by %q", c)
	}
	// --dense-method: gptq by default when GPTQ quantizes the experts, rtn
	// otherwise; named in created_by only when it differs from that
	// default, with its damping when that differs from the default (and
	// is used); gptq needs --method gptq.
	for _, tc := range []struct {
		args, created string
		dense         quant.Method
		err           string
	}{
		{"--calib c", "lfmq quantize --method gptq", quant.GPTQ, ""},
		{"--calib c --dense-method gptq", "lfmq quantize --method gptq", quant.GPTQ, ""},
		{"--calib c --damp-dense 0.05", "lfmq quantize --method gptq --damp-dense 0.05", quant.GPTQ, ""},
		// The reference release's w2 damping is no longer the default, so
		// created_by names it; today's default typed out is not named.
		{"--calib c --damp-w2 1", "lfmq quantize --method gptq --damp-w2 1", quant.GPTQ, ""},
		{"--calib c --damp-w2 0.010", "lfmq quantize --method gptq", quant.GPTQ, ""},
		{"--calib c --dense-method rtn", "lfmq quantize --method gptq --dense-method rtn", quant.RTN, ""},
		{"--calib c --dense-method rtn --damp-dense 0.05", "", "", "--damp-dense applies to --dense-method gptq"},
		{"--calib c --experts keep --dense-method gptq --damp-w2 0.1", "", "", "--damp-w2 applies to the routed experts' GPTQ"},
		{"--calib c --experts keep --dense-method gptq --shrink 0", "", "", "--shrink applies to the routed experts' GPTQ"},
		{"--method rtn", "lfmq quantize --method rtn", quant.RTN, ""},
		{"--method rtn --dense-method rtn", "lfmq quantize --method rtn", quant.RTN, ""},
		{"--experts keep", "lfmq quantize --experts keep", quant.RTN, ""},
		{"--calib c --experts keep --dense-method gptq", "lfmq quantize --method gptq --experts keep --dense-method gptq", quant.GPTQ, ""},
		{"--method rtn --dense-method gptq", "", "", "--dense-method gptq needs --method gptq"},
		{"--calib c --dense-method exact", "", "", "--dense-method must be rtn or gptq"},
	} {
		got, err := parseQuantize("--model m --out o " + tc.args)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case got.DenseMethod != tc.dense:
			t.Errorf("%q: dense method %q, want %q", tc.args, got.DenseMethod, tc.dense)
		case createdBy(got) != tc.created:
			t.Errorf("%q: created_by %q, want %q", tc.args, createdBy(got), tc.created)
		}
	}
}

// TestQuantizeGPTQRun quantizes the tiny model with GPTQ on a few
// calibration windows through the real command and checks the summary.
func TestQuantizeGPTQRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gptq")
	fixture := filepath.Dir(tinyModel)
	ios, stdout, stderr := testStreams()
	args := []string{"quantize", "--model", tinyModel, "--out", out, "--calib", fixture + "/calibration/calibration.jsonl",
		"--calib-seqs", "4", "--eval-corpus", "code=" + fixture + "/corpora/code.jsonl"}
	if code := run(context.Background(), args, ios); code != 0 {
		t.Fatalf("quantize exit %d: %s", code, stderr)
	}
	text := squeeze(stdout.String())
	for _, want := range []string{
		"GPTQ loss / RTN loss under the same Hessian (mean over experts), 1024 calibration tokens",
		"layer  tokens/expert min/med/max  w1  w3  w2  mean  max  fallbacks  forward  statistics  solve",
		"throughput: w1/w3 Hessians",
	} {
		if !strings.Contains(text, squeeze(want)) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, l := range []string{"2", "7"} {
		if !regexp.MustCompile(`(?m)^` + l + `  \S*  0\.\d{3}  0\.\d{3}  0\.\d{3}  0\.\d{3}  0\.\d{3}  0  `).MatchString(text) {
			t.Errorf("no table row for layer %s:\n%s", l, stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^all  0\.\d{3}  0\.\d{3}  0  `).MatchString(text) {
		t.Errorf("no summary row:\n%s", stdout)
	}
	// Off a terminal the only stderr output is the status line printed
	// every 10 s (docs/cli.md), which a slow machine reaches.
	if rest := regexp.MustCompile(`(?m)^quantizing: .* elapsed\)\n`).ReplaceAllString(stderr.String(), ""); rest != "" {
		t.Errorf("stderr: %s", rest)
	}
	m, _, err := lfmq1.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.CreatedBy != "lfmq quantize --method gptq --calib-seqs 4 --eval-corpus code" || m.Quantization.Experts.Method != "gptq" {
		t.Errorf("manifest created_by %q, experts %s", m.CreatedBy, m.Quantization.Experts.Method)
	}
}

func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), "  ")
	}
	return strings.Join(lines, "\n")
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
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
}

// TestQuantizeInterruptedRun: an interrupted GPTQ run's partial directory
// met without --resume, or with --resume and other settings, is a usage
// error (exit 2) that says what to do, like an --out that is not empty.
func TestQuantizeInterruptedRun(t *testing.T) {
	fixture := filepath.Dir(tinyModel)
	tests := []struct {
		name     string
		progress string // .resume/progress.json in the partial directory, if any
		resume   bool
		want     string
	}{
		{"partial without --resume", "", false, "holds an interrupted run; rerun with --resume to continue it, or remove"},
		{"partial of other settings", `{"fingerprint":{"resume_format":"lfmq-gptq-resume-0"}}`, true, "resume_format was"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "gptq")
			partial := lfmq1.PartialDir(out)
			if err := os.MkdirAll(filepath.Join(partial, ".resume"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tt.progress != "" {
				os.WriteFile(filepath.Join(partial, ".resume", "progress.json"), []byte(tt.progress), 0o644)
			}
			args := []string{"quantize", "--model", tinyModel, "--out", out, "--calib", fixture + "/calibration/calibration.jsonl", "--calib-seqs", "2"}
			if tt.resume {
				args = append(args, "--resume")
			}
			ios, _, stderr := testStreams()
			if code := run(context.Background(), args, ios); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, want %d with %q: %s", code, exitUsage, tt.want, stderr)
			}
			if _, err := os.Stat(partial); err != nil {
				t.Errorf("the partial directory is gone: %v", err)
			}
		})
	}
}

const (
	tinyDrafter = "../../testdata/tiny-lfm2-moe-dspark/model"
	tinyCode    = "../../testdata/tiny-lfm2-moe/corpora/code.jsonl"
)

// TestQuantizeDrafterRun quantizes the tiny model and its DSpark drafter
// through the real command: the drafter lands in --out's drafter/, an
// lfmq-1 checkpoint of its own that inspect verifies; the model's
// checkpoint is byte for byte the one written without --drafter (its
// manifest, its identity, does not list the drafter) and still verifies;
// the summary gives the tokens per verify step with the BF16 and the
// quantized drafter, as the drafter's manifest records them.
func TestQuantizeDrafterRun(t *testing.T) {
	root := t.TempDir()
	out, plain := filepath.Join(root, "rtn"), filepath.Join(root, "plain")
	ios, stdout, stderr := testStreams()
	args := []string{"quantize", "--model", tinyModel, "--out", out, "--method", "rtn", "--drafter", tinyDrafter, "--eval-corpus", "code=" + tinyCode, "--drafter-records", "3"}
	if code := run(context.Background(), args, ios); code != 0 {
		t.Fatalf("quantize exit %d: %s", code, stderr)
	}
	for _, want := range []string{"wrote lfmq-1 checkpoint " + out, "wrote lfmq-1 drafter " + filepath.Join(out, "drafter"),
		"tokens per verify step on the quantized model (3 records per corpus, 96-token prompts, 48 new tokens, greedy)", "BF16 drafter", "BFP8 drafter"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	ck, err := lfmq1.Open(filepath.Join(out, "drafter"), lfmq1.CheckTensors)
	if err != nil {
		t.Fatal(err)
	}
	man := ck.Manifest
	ck.Close()
	if man.CreatedBy != "lfmq quantize --drafter --eval-corpus code --drafter-records 3" || man.Architecture != "dspark" {
		t.Errorf("drafter manifest: created_by %q, architecture %q", man.CreatedBy, man.Architecture)
	}
	var metrics struct {
		Acceptance quant.DrafterAcceptance `json:"acceptance"`
	}
	if err := json.Unmarshal(man.Metrics, &metrics); err != nil {
		t.Fatal(err)
	}
	acc := metrics.Acceptance
	row := regexp.MustCompile(`(?m)^all\s+3\s+` + regexp.QuoteMeta(ratio(acc.BF16.TokensPerStep)) + `\s+` + regexp.QuoteMeta(ratio(acc.Quantized.TokensPerStep)) + `\s`)
	if acc.BF16.VerifySteps == 0 || !row.MatchString(stdout.String()) {
		t.Errorf("summary does not give the recorded acceptance %+v:\n%s", acc, stdout)
	}

	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", plain, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize without --drafter: exit %d: %s", code, stderr)
	}
	for _, f := range []string{"manifest.json", "global.safetensors", "experts-04.safetensors"} {
		a, _ := os.ReadFile(filepath.Join(out, f))
		b, _ := os.ReadFile(filepath.Join(plain, f))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("%s differs with --drafter", f)
		}
	}
	// --drafter-only adds the same drafter, byte for byte, to the
	// checkpoint made without one; a second time it is refused.
	drafterOnly := []string{"quantize", "--model", tinyModel, "--out", plain, "--drafter", tinyDrafter, "--drafter-only", "--eval-corpus", "code=" + tinyCode, "--drafter-records", "3"}
	ios, stdout, stderr = testStreams()
	if code := run(context.Background(), drafterOnly, ios); code != 0 || !strings.Contains(stdout.String(), "wrote lfmq-1 drafter "+filepath.Join(plain, "drafter")) {
		t.Fatalf("--drafter-only: exit %d: %s%s", code, stdout, stderr)
	}
	for _, f := range []string{"manifest.json", "drafter.safetensors", "config.json"} {
		a, _ := os.ReadFile(filepath.Join(out, "drafter", f))
		b, _ := os.ReadFile(filepath.Join(plain, "drafter", f))
		if len(a) == 0 || string(a) != string(b) {
			t.Errorf("drafter/%s differs between --drafter and --drafter-only", f)
		}
	}
	ios, _, stderr = testStreams()
	if code := run(context.Background(), drafterOnly, ios); code != exitUsage || !strings.Contains(stderr.String(), "already has a drafter") {
		t.Errorf("second --drafter-only: exit %d: %s", code, stderr)
	}
	for _, dir := range []string{out, filepath.Join(out, "drafter")} {
		ios, stdout, stderr = testStreams()
		if code := run(context.Background(), []string{"inspect", dir}, ios); code != 0 || !strings.Contains(stdout.String(), "verified against manifest") {
			t.Errorf("inspect %s: exit %d\n%s%s", dir, code, stdout, stderr)
		}
	}
}

// TestQuantizeDrafterRefused: a drafter that is not one for the model is
// refused as a usage error naming --drafter before the model is
// quantized (nothing is written).
func TestQuantizeDrafterRefused(t *testing.T) {
	for _, c := range []struct {
		name, model, drafter, want string
	}{
		{"a drafter trained on a deeper model", tinyModel, deeperDrafter(t), "num_target_layers"},
		{"a model as drafter", tinyModel, tinyModel, "--drafter " + tinyModel},
		{"no such drafter", tinyModel, "./no-such-drafter", "--drafter ./no-such-drafter"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			ios, _, stderr := testStreams()
			code := run(context.Background(), []string{"quantize", "--model", c.model, "--out", out, "--method", "rtn", "--drafter", c.drafter, "--eval-corpus", tinyCode}, ios)
			if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d naming %q", code, stderr, exitUsage, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written", out)
			}
		})
	}
}

// deeperDrafter is the fixture's drafter with a config saying it was
// trained on a 16-layer target.
func deeperDrafter(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "deeper")
	copyDir(t, tinyDrafter, dir)
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), `"num_target_layers": 8`, `"num_target_layers": 16`)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestQuantizeDrafterOnlyRefused: --drafter-only needs --out to be an
// lfmq-1 checkpoint made from --model.
func TestQuantizeDrafterOnlyRefused(t *testing.T) {
	for _, c := range []struct {
		name, model, out, want string
	}{
		{"out not a checkpoint", tinyModel, t.TempDir(), "not an lfmq-1 checkpoint"},
		{"out of another model", denseModel, quantizedTiny(t), "was not quantized from --model " + denseModel},
	} {
		t.Run(c.name, func(t *testing.T) {
			ios, _, stderr := testStreams()
			code := run(context.Background(), []string{"quantize", "--model", c.model, "--out", c.out, "--drafter", tinyDrafter, "--drafter-only", "--eval-corpus", tinyCode}, ios)
			if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d saying %q", code, stderr, exitUsage, c.want)
			}
		})
	}
}

// quantizedTiny quantizes the MoE fixture with RTN into a new directory.
func quantizedTiny(t *testing.T) string {
	out := filepath.Join(t.TempDir(), "rtn")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", out, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize exit %d: %s", code, stderr)
	}
	return out
}

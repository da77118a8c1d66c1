package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/report"
	"github.com/lfmq/lfmq/evidence/score"
)

const tinyCorpora = "../../testdata/tiny-lfm2-moe/corpora"

func TestScoreFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    scoreOptions
		wantErr string
	}{
		{"all flags", "--reference r --candidate a=x --candidate y/z --corpus c=f.jsonl --corpus d=g --ctx 256 --out o.json --noise-floor --chunk 4 --save-reference s --plot p --max-records 2 --threads 3",
			scoreOptions{Reference: "r", Candidates: []score.Candidate{{Name: "a", Dir: "x"}, {Name: "z", Dir: "y/z"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "f.jsonl"}, {Name: "d", Path: "g"}}, Ctx: 256, Out: "o.json", NoiseFloor: true, Chunk: 4, SaveReference: "s", Plot: "p", MaxRecords: 2, Threads: 3}, ""},
		{"defaults", "--reference r --candidate rtn=./a=b --corpus c=f",
			scoreOptions{Reference: "r", Candidates: []score.Candidate{{Name: "rtn", Dir: "./a=b"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "f"}}, Ctx: 512, Chunk: 32}, ""},
		{"path with =", "--reference r --candidate ./x=y --corpus c=f",
			scoreOptions{Reference: "r", Candidates: []score.Candidate{{Name: "x=y", Dir: "./x=y"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "f"}}, Ctx: 512, Chunk: 32}, ""},
		// Named by the directory's own name, not "." (go test runs in cmd/lfmq).
		{"candidate .", "--reference r --candidate . --candidate ../lfmq/ --corpus c=f",
			scoreOptions{Reference: "r", Candidates: []score.Candidate{{Name: "lfmq", Dir: "."}, {Name: "lfmq", Dir: "../lfmq/"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "f"}}, Ctx: 512, Chunk: 32}, ""},
		{"noise floor alone", "--reference r --corpus c=f --noise-floor --reference-cache k",
			scoreOptions{Reference: "r", Corpora: []score.CorpusSpec{{Name: "c", Path: "f"}}, Ctx: 512, Chunk: 32, NoiseFloor: true, ReferenceCache: "k"}, ""},
		{"missing reference", "--candidate a=x --corpus c=f", scoreOptions{}, "--reference is required"},
		{"missing corpus", "--reference r --candidate a=x", scoreOptions{}, "--corpus is required"},
		{"corpus without name", "--reference r --candidate a=x --corpus f.jsonl", scoreOptions{}, "want NAME=FILE"},
		{"served candidate", "--reference r --candidate http://localhost:8080 --candidate srv=https://h.example:9/ --corpus c=f",
			scoreOptions{Reference: "r", Candidates: []score.Candidate{{Name: "localhost:8080", URL: "http://localhost:8080"}, {Name: "srv", URL: "https://h.example:9"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "f"}}, Ctx: 512, Chunk: 32}, ""},
		{"key", "--reference r --candidate http://h:1 --corpus c=f --api-key k",
			scoreOptions{Reference: "r", Candidates: []score.Candidate{{Name: "h:1", URL: "http://h:1"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "f"}}, Ctx: 512, Chunk: 32, APIKey: "k"}, ""},
		{"key file", "--reference r --candidate http://h:1 --corpus c=f --api-key-file key.txt",
			scoreOptions{Reference: "r", Candidates: []score.Candidate{{Name: "h:1", URL: "http://h:1"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "f"}}, Ctx: 512, Chunk: 32, APIKeyFile: "key.txt"}, ""},
		{"key and key file", "--reference r --candidate http://h:1 --corpus c=f --api-key k --api-key-file key.txt", scoreOptions{}, "--api-key and --api-key-file exclude each other"},
		{"other scheme", "--reference r --candidate s=ftp://h:1 --corpus c=f", scoreOptions{}, `--candidate "ftp://h:1": a served candidate's URL must start with http:// or https://`},
		{"URL with a path", "--reference r --candidate http://h:1/v1 --corpus c=f", scoreOptions{}, "no path"},
		{"URL with a query", "--reference r --candidate s=http://h:1/?a=b --corpus c=f", scoreOptions{}, "no query"},
		{"URL with credentials", "--reference r --candidate http://u:p@h:1 --corpus c=f", scoreOptions{}, "--api-key-file"},
		{"URL without a name", "--reference r --candidate =http://h:1 --corpus c=f", scoreOptions{}, "want NAME=DIR"},
		{"empty candidate name", "--reference r --candidate =x --corpus c=f", scoreOptions{}, "want NAME=DIR"},
		{"nothing to compare", "--reference r --corpus c=f", scoreOptions{}, "at least one --candidate"},
		{"odd ctx", "--reference r --candidate a=x --corpus c=f --ctx 255", scoreOptions{}, "--ctx must be even"},
		{"tiny ctx", "--reference r --candidate a=x --corpus c=f --ctx 2", scoreOptions{}, "--ctx must be even"},
		{"zero chunk", "--reference r --candidate a=x --corpus c=f --chunk 0", scoreOptions{}, "--chunk must be positive"},
		{"negative records", "--reference r --candidate a=x --corpus c=f --max-records -1", scoreOptions{}, "must not be negative"},
		{"save and reuse", "--reference r --candidate a=x --corpus c=f --save-reference s --reference-cache s", scoreOptions{}, "exclude each other"},
		{"stray argument", "--reference r --candidate a=x --corpus c=f extra", scoreOptions{}, "takes no arguments"},
		{"unknown flag", "--reference r --candidate a=x --corpus c=f --fast", scoreOptions{}, "unknown flag: --fast"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The environment's key applies only when no key flag is given.
			t.Setenv("LFMQ_API_KEY", "from-env")
			if tt.want.APIKey == "" && tt.want.APIKeyFile == "" {
				t.Setenv("LFMQ_API_KEY", "")
			}
			ios, _, _ := testStreams()
			var got *scoreOptions
			err := executeWith(ios, newScoreCmd(ios, func(o *scoreOptions) error { got = o; return nil }), append([]string{"score"}, strings.Fields(tt.args)...)...)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			w := tt.want
			if got.Reference != w.Reference || !slices.Equal(got.Candidates, w.Candidates) || !slices.Equal(got.Corpora, w.Corpora) ||
				got.Ctx != w.Ctx || got.Out != w.Out || got.NoiseFloor != w.NoiseFloor || got.Chunk != w.Chunk ||
				got.SaveReference != w.SaveReference || got.ReferenceCache != w.ReferenceCache || got.Plot != w.Plot ||
				got.MaxRecords != w.MaxRecords || got.Threads != w.Threads || got.APIKey != w.APIKey || got.APIKeyFile != w.APIKeyFile {
				t.Errorf("options %+v, want %+v", *got, w)
			}
		})
	}
}

// TestScoreKeyFromEnv: LFMQ_API_KEY is the key when no key flag is given.
func TestScoreKeyFromEnv(t *testing.T) {
	t.Setenv("LFMQ_API_KEY", "from-env")
	ios, _, _ := testStreams()
	var got *scoreOptions
	if err := executeWith(ios, newScoreCmd(ios, func(o *scoreOptions) error { got = o; return nil }), "score", "--reference", "r", "--candidate", "http://h:1", "--corpus", "c=f"); err != nil {
		t.Fatal(err)
	}
	if got.APIKey != "from-env" || got.APIKeyFile != "" {
		t.Errorf("key %q, file %q", got.APIKey, got.APIKeyFile)
	}
}

func TestScoreCommandLine(t *testing.T) {
	o := &scoreOptions{Reference: "m", Candidates: []score.Candidate{{Name: "rtn", Dir: "out dir"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "c.jsonl"}},
		Ctx: 512, Chunk: 32, NoiseFloor: true, MaxRecords: 3, Out: "e.json", Threads: 7}
	want := `lfmq score --reference m --candidate "rtn=out dir" --corpus c=c.jsonl --ctx 512 --noise-floor --chunk 32 --max-records 3 --out e.json`
	if got := commandLine(o); got != want {
		t.Errorf("%s\nwant\n%s", got, want)
	}
	// A served candidate; the key file is recorded, the key never.
	o = &scoreOptions{Reference: "m", Candidates: []score.Candidate{{Name: "srv", URL: "http://h:8000"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "c.jsonl"}},
		Ctx: 512, Chunk: 32, APIKey: "s3cret", APIKeyFile: "key.txt"}
	want = `lfmq score --reference m --candidate srv=http://h:8000 --corpus c=c.jsonl --ctx 512 --api-key-file key.txt`
	if got := commandLine(o); got != want {
		t.Errorf("%s\nwant\n%s", got, want)
	}
	o.APIKeyFile = ""
	if got := commandLine(o); strings.Contains(got, "s3cret") || strings.Contains(got, "api-key") {
		t.Errorf("the key is recorded: %s", got)
	}
}

// TestScoreServed drives the command against servers it cannot score: the
// refusal names the server, the key from --api-key-file is sent, and an
// address where nothing listens says so.
func TestScoreServed(t *testing.T) {
	dir := t.TempDir()
	var auth []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprintf(w, `{"object":"list","data":[{"id":"m","object":"model","max_model_len":4096,"lfmq":{"checkpoint_format":"hf","checkpoint_identity":"%[1]s","config_sha256":"%[1]s","tokenizer_sha256":"%[1]s","vocab_size":8192}}]}`, strings.Repeat("ab", 32))
	}))
	defer srv.Close()
	key := filepath.Join(dir, "key.txt")
	os.WriteFile(key, []byte("from-file\n"), 0o644)
	instruct := "instruct=" + filepath.Join(tinyCorpora, "instruct.jsonl")
	ios, _, stderr := testStreams()
	t.Setenv("LFMQ_API_KEY", "from-env")
	code := run(context.Background(), []string{"score", "--reference", tinyModel, "--candidate", "srv=" + srv.URL, "--corpus", instruct, "--api-key-file", key}, ios)
	if code != exitFailure || !strings.Contains(stderr.String(), "srv ("+srv.URL+"): the server's tokenizer.json") {
		t.Errorf("other tokenizer: exit %d: %s", code, stderr)
	}
	mu.Lock()
	if len(auth) != 1 || auth[0] != "Bearer from-file" {
		t.Errorf("Authorization %q", auth)
	}
	mu.Unlock()

	os.WriteFile(key, []byte(" \n"), 0o644)
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"score", "--reference", tinyModel, "--candidate", srv.URL, "--corpus", instruct, "--api-key-file", key}, ios); code != exitUsage || !strings.Contains(stderr.String(), "holds no key") {
		t.Errorf("empty key file: exit %d: %s", code, stderr)
	}

	srv.Close()
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"score", "--reference", tinyModel, "--candidate", srv.URL, "--corpus", instruct}, ios); code != exitFailure || !strings.Contains(stderr.String(), "no server answering at "+srv.URL+"/v1/models; is lfmq serve running?") {
		t.Errorf("nothing listening: exit %d: %s", code, stderr)
	}
}

// TestScoreRun runs the real command on the tiny model: the table on
// stdout re-renders from the evidence file, the plot is written, a
// changed corpus changes the receipts, and the reference cache round trip
// works through the command line.
func TestScoreRun(t *testing.T) {
	dir := t.TempDir()
	rtn := filepath.Join(dir, "rtn")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", rtn, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	instruct := filepath.Join(tinyCorpora, "instruct.jsonl")
	scoreArgs := func(corpus, out string, extra ...string) []string {
		return append([]string{"score", "--reference", tinyModel, "--candidate", "rtn=" + rtn, "--corpus", "instruct=" + corpus,
			"--ctx", "128", "--max-records", "3", "--out", out}, extra...)
	}
	ev := filepath.Join(dir, "ev.json")
	plots := filepath.Join(dir, "plots")
	cache := filepath.Join(dir, "ref.zst")
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), scoreArgs(instruct, ev, "--plot", plots, "--save-reference", cache), ios); code != 0 {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout.String(), "| corpus | tokens | PPL BF16 → rtn | ΔPPL % | top-1 % | KL mean | KL p99 |\n|---|") {
		t.Errorf("stdout:\n%s", stdout)
	}
	for _, want := range []string{"tokens/s", "wrote evidence", "wrote reference cache", "wrote plots"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	f, err := evidence.Read(ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := report.Markdown(f); got != stdout.String() {
		t.Errorf("the evidence file renders\n%s\nstdout was\n%s", got, stdout)
	}
	if !strings.Contains(f.Receipts.Command, "lfmq score --reference "+tinyModel+" --candidate rtn=") {
		t.Errorf("command %q", f.Receipts.Command)
	}
	if svg, err := os.ReadFile(filepath.Join(plots, "kl-instruct.svg")); err != nil || !strings.HasPrefix(string(svg), "<svg") {
		t.Errorf("plot: %v", err)
	}

	// The same run from the cache: identical NLL and top-1.
	ev2 := filepath.Join(dir, "ev2.json")
	ios, _, stderr = testStreams()
	if code := run(context.Background(), scoreArgs(instruct, ev2, "--reference-cache", cache), ios); code != 0 {
		t.Fatalf("score from the cache: exit %d: %s", code, stderr)
	}
	f2, _ := evidence.Read(ev2)
	if a, b := f.Results[0], f2.Results[0]; a.PPLRef != b.PPLRef || a.PPLCand != b.PPLCand || a.Top1 != b.Top1 || f2.Receipts.ReferenceCache.SHA256 != f.Receipts.ReferenceCache.SHA256 {
		t.Errorf("from the cache %+v, direct %+v", b, a)
	}

	// A changed corpus byte: other receipts, and the cache is refused.
	data, _ := os.ReadFile(instruct)
	changed := filepath.Join(dir, "instruct.jsonl")
	os.WriteFile(changed, append([]byte("\n"), data...), 0o644)
	ev3 := filepath.Join(dir, "ev3.json")
	ios, _, stderr = testStreams()
	if code := run(context.Background(), scoreArgs(changed, ev3), ios); code != 0 {
		t.Fatalf("score of the changed corpus: exit %d: %s", code, stderr)
	}
	f3, _ := evidence.Read(ev3)
	if f3.Receipts.Corpora[0].SHA256 == f.Receipts.Corpora[0].SHA256 || f3.Results[0].KLMean != f.Results[0].KLMean || f3.Results[0].PPLCand != f.Results[0].PPLCand || *f3.Results[0].KLMeanSE != *f.Results[0].KLMeanSE {
		t.Errorf("changed corpus: sha256 %s (was %s); figures must be equal (a blank line scores nothing)", f3.Receipts.Corpora[0].SHA256, f.Receipts.Corpora[0].SHA256)
	}
	ios, _, stderr = testStreams()
	if code := run(context.Background(), scoreArgs(changed, filepath.Join(dir, "x.json"), "--reference-cache", cache), ios); code != exitMismatch ||
		!strings.Contains(stderr.String(), "corpora[0].sha256 mismatch") {
		t.Errorf("cache for another corpus: exit %d: %s", code, stderr)
	}

	// Failures.
	ios, _, stderr = testStreams()
	if code := run(context.Background(), scoreArgs(filepath.Join(dir, "missing.jsonl"), filepath.Join(dir, "y.json")), ios); code != exitUsage || !strings.Contains(stderr.String(), "missing.jsonl: no such file") {
		t.Errorf("missing corpus: exit %d: %s", code, stderr)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 99999]}\n"), 0o644)
	ios, _, stderr = testStreams()
	if code := run(context.Background(), scoreArgs(bad, filepath.Join(dir, "z.json")), ios); code != exitFailure || !strings.Contains(stderr.String(), "bad.jsonl:2: input_ids[1]") {
		t.Errorf("bad record: exit %d: %s", code, stderr)
	}
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"score", "--reference", tinyModel, "--candidate", "BF16=" + rtn, "--corpus", "c=" + instruct}, ios); code != exitUsage {
		t.Errorf("reserved candidate name: exit %d: %s", code, stderr)
	}
}

// TestScoreQuantizedReference: the reference is the BF16 source, so an
// lfmq-1 checkpoint given as --reference (or one that lost its manifest)
// is refused before any scoring, naming what it is and what to give,
// instead of being scored and labelled BF16.
func TestScoreQuantizedReference(t *testing.T) {
	dir := t.TempDir()
	rtn := filepath.Join(dir, "rtn")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", rtn, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	lost := filepath.Join(dir, "lost")
	copyDir(t, rtn, lost)
	os.Remove(filepath.Join(lost, "manifest.json"))
	instruct := "instruct=" + filepath.Join(tinyCorpora, "instruct.jsonl")
	for i, tt := range []struct{ dir, has string }{{rtn, "manifest.json"}, {lost, "global.safetensors"}} {
		out := filepath.Join(dir, fmt.Sprintf("ev%d.json", i))
		ios, stdout, stderr := testStreams()
		code := run(context.Background(), []string{"score", "--reference", tt.dir, "--candidate", "rtn=" + rtn, "--corpus", instruct, "--max-records", "1", "--out", out}, ios)
		want := "lfmq: --reference " + tt.dir + ": an lfmq-1 checkpoint (it has " + tt.has + "), not the BF16 source: give the Hugging Face checkpoint it was quantized from, and score this one as a --candidate\n"
		if code != exitUsage || stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("--reference %s: exit %d, want %d with %q\nstdout %q\nstderr %q", tt.dir, code, exitUsage, want, stdout, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("--reference %s: an evidence file was written", tt.dir)
		}
	}
}

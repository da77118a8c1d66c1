package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
		{"noise floor alone", "--reference r --corpus c=f --noise-floor --reference-cache k",
			scoreOptions{Reference: "r", Corpora: []score.CorpusSpec{{Name: "c", Path: "f"}}, Ctx: 512, Chunk: 32, NoiseFloor: true, ReferenceCache: "k"}, ""},
		{"missing reference", "--candidate a=x --corpus c=f", scoreOptions{}, "--reference is required"},
		{"missing corpus", "--reference r --candidate a=x", scoreOptions{}, "--corpus is required"},
		{"corpus without name", "--reference r --candidate a=x --corpus f.jsonl", scoreOptions{}, "want NAME=FILE"},
		{"served candidate", "--reference r --candidate http://localhost:8080 --corpus c=f", scoreOptions{}, "lfmq serve"},
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
			ios, _, _ := testStreams()
			var got *scoreOptions
			err := executeWith(ios, newScoreCmd(ios, func(o *scoreOptions) error { got = o; return nil }), append([]string{"score"}, strings.Fields(tt.args)...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if exitCode(err) != exitUsage {
					t.Errorf("exit code %d, want %d", exitCode(err), exitUsage)
				}
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
				got.MaxRecords != w.MaxRecords || got.Threads != w.Threads {
				t.Errorf("options %+v, want %+v", *got, w)
			}
		})
	}
}

func TestScoreCommandLine(t *testing.T) {
	o := &scoreOptions{Reference: "m", Candidates: []score.Candidate{{Name: "rtn", Dir: "out dir"}}, Corpora: []score.CorpusSpec{{Name: "c", Path: "c.jsonl"}},
		Ctx: 512, Chunk: 32, NoiseFloor: true, MaxRecords: 3, Out: "e.json", Threads: 7}
	want := `lfmq score --reference m --candidate "rtn=out dir" --corpus c=c.jsonl --ctx 512 --noise-floor --chunk 32 --max-records 3 --out e.json`
	if got := commandLine(o); got != want {
		t.Errorf("%s\nwant\n%s", got, want)
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
	if !strings.HasPrefix(stdout.String(), "| corpus | tokens | PPL BF16 → cand | ΔPPL % | top-1 % | KL mean | KL p99 |\n|---|") {
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
	if code := run(context.Background(), scoreArgs(filepath.Join(dir, "missing.jsonl"), filepath.Join(dir, "y.json")), ios); code != exitFailure || !strings.Contains(stderr.String(), "missing.jsonl") {
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

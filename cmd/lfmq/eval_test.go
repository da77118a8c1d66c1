package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/task"
)

const (
	wordProblems = "../../testdata/eval/word-problems.jsonl"
	choiceItems  = "../../testdata/eval/choice.jsonl"
)

// TestEvalFlags: the command line parsed into options, and the
// combinations refused as usage errors.
func TestEvalFlags(t *testing.T) {
	ok := []struct {
		name  string
		args  []string
		check func(*evalOptions) bool
	}{
		{"url", []string{"--url", "http://h:1/v1/", "--dataset", "d"}, func(o *evalOptions) bool {
			return o.URL == "http://h:1" && o.kind == task.GSM8K && o.Concurrency == 1 && o.MaxTokens == 4096 && len(o.seeds) == 0
		}},
		{"repeat", []string{"--model", "m", "--dataset", "d", "--seed", "5", "--repeat", "3"}, func(o *evalOptions) bool {
			return len(o.seeds) == 3 && o.seeds[0] == 5 && o.seeds[2] == 7
		}},
		{"seed list", []string{"--url", "http://h", "--dataset", "d", "--seed", "1,4"}, func(o *evalOptions) bool {
			return len(o.seeds) == 2 && o.seeds[1] == 4
		}},
		{"preset with override", []string{"--url", "http://h", "--dataset", "d", "--sampling-preset", "liquid", "--temperature", "0.3"}, func(o *evalOptions) bool {
			s := o.sampling
			return s.Temperature != nil && *s.Temperature == 0.3 && s.TopK != nil && *s.TopK == 50 && s.RepetitionPenalty != nil && *s.RepetitionPenalty == 1.05 && s.TopP != nil && *s.TopP == 1 && s.MinP != nil && *s.MinP == 0
		}},
		{"choice over url", []string{"--url", "http://h", "--dataset", "d", "--task", "choice", "--tokenizer", "t"}, func(o *evalOptions) bool {
			return o.kind == task.Choice
		}},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams()
			var got *evalOptions
			cmd := newEvalCmd(ios, func(o *evalOptions) error { got = o; return nil })
			if err := executeWith(ios, cmd, append([]string{"eval"}, tt.args...)...); err != nil {
				t.Fatal(err)
			}
			if !tt.check(got) {
				t.Errorf("options %+v", got)
			}
		})
	}
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"no source", []string{"--dataset", "d"}, "give --url"},
		{"both sources", []string{"--url", "http://h", "--model", "m", "--dataset", "d"}, "exclude each other"},
		{"no dataset", []string{"--url", "http://h"}, "--dataset is required"},
		{"bad task", []string{"--url", "http://h", "--dataset", "d", "--task", "mmlu"}, "--task"},
		{"bad url", []string{"--url", "h:1", "--dataset", "d"}, "--url"},
		{"bad preset", []string{"--url", "http://h", "--dataset", "d", "--sampling-preset", "hot"}, "unknown sampling preset"},
		{"repeat without seed", []string{"--url", "http://h", "--dataset", "d", "--repeat", "2"}, "--repeat needs --seed"},
		{"repeat and seed list", []string{"--url", "http://h", "--dataset", "d", "--seed", "1,2", "--repeat", "2"}, "exclude each other"},
		{"zero concurrency", []string{"--url", "http://h", "--dataset", "d", "--concurrency", "0"}, "--concurrency"},
		{"choice url without tokenizer", []string{"--url", "http://h", "--dataset", "d", "--task", "choice"}, "--tokenizer"},
		{"choice with seed", []string{"--model", "m", "--dataset", "d", "--task", "choice", "--seed", "1"}, "samples nothing"},
		{"threads with url", []string{"--url", "http://h", "--dataset", "d", "--threads", "2"}, "in-process"},
		// Sampling flags out of engine/sample's ranges (issue 45 item 2).
		{"temperature 5", []string{"--url", "http://h", "--dataset", "d", "--temperature", "5"}, "--temperature 5 is outside [0, 2]"},
		{"top-k -3", []string{"--url", "http://h", "--dataset", "d", "--top-k", "-3"}, "--top-k -3"},
		{"top-p 0", []string{"--url", "http://h", "--dataset", "d", "--top-p", "0"}, "--top-p 0 is outside (0, 1]"},
		{"min-p 2", []string{"--url", "http://h", "--dataset", "d", "--min-p", "2"}, "--min-p 2 is outside [0, 1]"},
		{"repetition-penalty 0", []string{"--url", "http://h", "--dataset", "d", "--repetition-penalty", "0"}, "--repetition-penalty 0"},
		{"preset with a bad override", []string{"--url", "http://h", "--dataset", "d", "--sampling-preset", "liquid", "--temperature", "-1"}, "--temperature -1"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams()
			cmd := newEvalCmd(ios, func(*evalOptions) error { t.Fatal("ran"); return nil })
			wantUsageError(t, executeWith(ios, cmd, append([]string{"eval"}, tt.args...)...), tt.want)
		})
	}
}

// TestEvalGateOnFixture is the release gate on the fixture: GSM8K-style
// items sampled with seed 1 against lfmq serve with speculation on and
// off, at concurrency 1 and 4, and in process, give texts that 'lfmq eval
// compare' finds identical; one changed byte makes it exit 1 naming the
// item.
func TestEvalGateOnFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("serves the fixture twice and runs 100 generations")
	}
	dir := t.TempDir()
	spec, _ := startServe(t, "--model", tinyModel, "--speculate", "on", "--max-num-seqs", "4")
	plain, _ := startServe(t, "--model", tinyModel, "--speculate", "off", "--max-num-seqs", "4")
	common := []string{"eval", "--dataset", wordProblems, "--limit", "20", "--seed", "1", "--max-tokens", "48", "--sampling-preset", "reasoning"}
	var files []string
	for _, c := range []struct {
		name string
		args []string
	}{
		{"spec-c1", []string{"--url", spec, "--concurrency", "1"}},
		{"spec-c4", []string{"--url", spec, "--concurrency", "4"}},
		{"plain-c1", []string{"--url", plain, "--concurrency", "1"}},
		{"plain-c4", []string{"--url", plain, "--concurrency", "4"}},
		{"in-process-c4", []string{"--model", tinyModel, "--concurrency", "4"}},
	} {
		out := filepath.Join(dir, c.name+".json")
		ios, stdout, stderr := testStreams()
		if code := run(context.Background(), append(append(common, c.args...), "--out", out, "--items", filepath.Join(dir, c.name+".jsonl")), ios); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		if !strings.Contains(stdout.String(), "95% interval") {
			t.Errorf("%s: no summary table: %s", c.name, stdout)
		}
		files = append(files, out)
	}
	if steps := metric(t, spec, "lfmq_spec_verify_steps_total"); steps == 0 {
		t.Error("the speculating server ran no verify step: the gate did not exercise speculation")
	}
	if steps := metric(t, plain, "lfmq_spec_verify_steps_total"); steps != 0 {
		t.Errorf("the plain server ran %d verify steps", steps)
	}

	f, err := task.Read(files[0])
	if err != nil {
		t.Fatal(err)
	}
	r := f.Runs[0]
	if len(r.Items) != 20 || r.Summary.Items != 20 || *r.Seed != 1 || f.Receipts.Dataset.Items != 24 || f.Receipts.Server.Model == "" ||
		!strings.Contains(string(f.Receipts.Server.Models), `"lfmq"`) {
		t.Fatalf("run %+v, receipts %+v", r.Summary, f.Receipts)
	}
	generated := 0
	for _, it := range r.Items {
		generated += it.GeneratedTokens
		if it.Truncated != (it.FinishReason == "length") || it.PromptTokens == 0 {
			t.Errorf("item %s: %+v", it.ID, it)
		}
	}
	if generated == 0 {
		t.Fatal("no tokens generated")
	}
	if n := countLines(t, filepath.Join(dir, "spec-c1.jsonl")); n != 20 {
		t.Errorf("%d item lines, want 20", n)
	}

	gate := filepath.Join(dir, "gate.json")
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), append([]string{"eval", "compare", "--out", gate}, files...), ios); code != 0 {
		t.Fatalf("compare: exit %d: %s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout.String(), "identical") {
		t.Errorf("compare says %s", stdout)
	}
	data, err := os.ReadFile(gate)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := task.ParseGate(gate, data); err != nil || !g.Identical || len(g.Runs) != 5 || g.Items != 20 {
		t.Fatalf("gate %+v, %v", g, err)
	}

	// One changed byte in one item's text.
	changed := filepath.Join(dir, "changed.json")
	f, err = task.Read(files[3])
	if err != nil {
		t.Fatal(err)
	}
	k := -1
	for j, it := range f.Runs[0].Items {
		if len(it.Text) > 3 {
			k = j
			break
		}
	}
	if k < 0 {
		t.Fatal("no item with a text of four bytes or more")
	}
	b := []byte(f.Runs[0].Items[k].Text)
	b[2] ^= 1
	f.Runs[0].Items[k].Text = string(b)
	if err := task.Write(changed, f); err != nil {
		t.Fatal(err)
	}
	ios, stdout, _ = testStreams()
	if code := run(context.Background(), []string{"eval", "compare", files[0], changed}, ios); code != 1 {
		t.Fatalf("compare with a changed byte: exit %d, want 1: %s", code, stdout)
	}
	id := f.Runs[0].Items[k].ID
	if want := "item " + id + ": text differs at byte 2"; !strings.Contains(stdout.String(), want) {
		t.Errorf("compare says %q, want it to contain %q", stdout, want)
	}
}

// TestEvalChoiceInProcessEqualsServed: the choice task scored in process
// (one forked state per item) and over lfmq serve's /v1/completions with
// echo and logprobs give the same scores, bit for bit.
func TestEvalChoiceInProcessEqualsServed(t *testing.T) {
	base, _ := startServe(t, "--model", tinyModel)
	a, b := evalChoiceLocalAndServed(t, tinyModel, base)
	if a.Settings.Scoring != "in-process" || b.Settings.Scoring != "completions-echo" || b.Receipts.TokenizerSHA256 == "" {
		t.Errorf("settings %+v / %+v", a.Settings, b.Settings)
	}
	for i, x := range a.Runs[0].Items {
		y := b.Runs[0].Items[i]
		if len(x.Scores) < 2 || len(x.Scores) != len(y.Scores) {
			t.Fatalf("item %s: scores %v and %v", x.ID, x.Scores, y.Scores)
		}
		for j := range x.Scores {
			if x.Scores[j] != y.Scores[j] || x.Scores[j] >= 0 {
				t.Errorf("item %s choice %d: in process %v, served %v", x.ID, j, x.Scores[j], y.Scores[j])
			}
		}
		if x.Answer != y.Answer || x.Correct != y.Correct || x.Text != y.Text {
			t.Errorf("item %s: %+v vs %+v", x.ID, x, y)
		}
	}
}

// evalChoiceLocalAndServed runs eval's choice task on the checkpoint
// model in process and through the server at base (model's tokenizer),
// and returns the two files.
func evalChoiceLocalAndServed(t *testing.T, model, base string) (local, served *task.File) {
	t.Helper()
	dir := t.TempDir()
	lp, sp := filepath.Join(dir, "local.json"), filepath.Join(dir, "served.json")
	for _, args := range [][]string{
		{"--model", model, "--out", lp},
		{"--url", base, "--tokenizer", model, "--out", sp},
	} {
		ios, stdout, stderr := testStreams()
		if code := run(context.Background(), append([]string{"eval", "--task", "choice", "--dataset", choiceItems}, args...), ios); code != 0 {
			t.Fatalf("eval: exit %d: %s%s", code, stdout, stderr)
		}
	}
	local, err := task.Read(lp)
	if err != nil {
		t.Fatal(err)
	}
	served, err = task.Read(sp)
	if err != nil {
		t.Fatal(err)
	}
	return local, served
}

func metric(t *testing.T, base, name string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(n)
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

// TestEvalHubDataset: --dataset datasets/OWNER/NAME@REV:PATH is read from
// the Hugging Face cache's layout (refs/REV, snapshots/COMMIT/PATH), a
// parquet file with GSM8K's columns, and the receipts name the repository,
// the commit and the file's sha256.
func TestEvalHubDataset(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1") // never asked: the cache holds the file
	commit := strings.Repeat("ab", 20)
	repoDir := filepath.Join(cache, "datasets--owner--problems")
	snap := filepath.Join(repoDir, "snapshots", commit, "main")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(repoDir, "refs"), 0o755)
	os.WriteFile(filepath.Join(repoDir, "refs", "main"), []byte(commit), 0o644)
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[struct {
		Question string `parquet:"question"`
		Answer   string `parquet:"answer"`
	}](&buf)
	w.Write([]struct {
		Question string `parquet:"question"`
		Answer   string `parquet:"answer"`
	}{{"What is 2 + 3?", "2 + 3 = 5\n#### 5"}, {"What is 10 - 4?", "#### 6"}, {"What is 3 * 3?", "#### 9"}})
	w.Close()
	file := filepath.Join(snap, "test.parquet")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "hub.json")
	ios, stdout, stderr := testStreams()
	id := "datasets/owner/problems@main:main/test.parquet"
	if code := run(context.Background(), []string{"eval", "--model", tinyModel, "--dataset", id, "--limit", "2", "--seed", "1", "--max-tokens", "8", "--out", out}, ios); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	f, err := task.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	d := f.Receipts.Dataset
	if d.Path != id || d.Repo != "owner/problems" || d.Revision != commit || d.SHA256 != hex.EncodeToString(sum[:]) || d.Items != 3 ||
		len(f.Runs[0].Items) != 2 || f.Runs[0].Items[1].Gold != "6" {
		t.Errorf("dataset receipt %+v, items %+v", d, f.Runs[0].Items)
	}
	// A file the cached commit lacks is fetched, and the hub (here: none)
	// is named in the error.
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"eval", "--model", tinyModel, "--dataset", "datasets/owner/problems@v2:main/test.parquet"}, ios); code != 1 {
		t.Errorf("uncached revision: exit %d: %s", code, stderr)
	}
}

// TestEvalCompareRefuses: 'eval compare' of files that ran another model,
// other sampling fields or another token limit, or of a file that is not
// an eval file, is a usage error (exit 2) naming the file and what
// differs; only differing texts are exit 1 (issue 45 item 3).
func TestEvalCompareRefuses(t *testing.T) {
	dir := t.TempDir()
	seed := uint64(1)
	mk := func() *task.File {
		temp := evidence.Float(0.6)
		return &task.File{Format: task.Format, Task: task.GSM8K,
			Settings: task.Settings{Concurrency: 1, MaxTokens: 32, Sampling: task.Sampling{Temperature: &temp}, Seeds: []uint64{1}},
			Receipts: task.Receipts{Dataset: task.Dataset{SHA256: "abc"}, Checkpoint: &evidence.Checkpoint{Format: "hf", Identity: strings.Repeat("a", 64)},
				Server: task.Server{Model: "tiny", Models: []byte("null")}},
			Runs: []task.Run{{Seed: &seed, Items: []task.ItemResult{{ID: "1", Text: "#### 9"}, {ID: "2", Text: "#### 34"}}}}}
	}
	write := func(name string, f *task.File) string {
		f.Runs[0].Summary = task.Summarize(f.Runs[0].Items, 1)
		p := filepath.Join(dir, name)
		if err := task.Write(p, f); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := write("base.json", mk())
	compare := func(files ...string) (int, string, string) {
		ios, stdout, stderr := testStreams()
		code := run(context.Background(), append([]string{"eval", "compare"}, files...), ios)
		return code, stdout.String(), stderr.String()
	}
	if code, out, errOut := compare(base, write("same.json", mk())); code != 0 {
		t.Fatalf("same files: exit %d: %s%s", code, out, errOut)
	}
	texts := mk()
	texts.Runs[0].Items[1].Text = "#### 35"
	if code, out, _ := compare(base, write("texts.json", texts)); code != 1 || !strings.Contains(out, "item 2: text differs") {
		t.Fatalf("differing texts: exit %d, %s; want exit 1 naming item 2", code, out)
	}
	gate := filepath.Join(dir, "gate.json")
	if code, _, errOut := compare("--out", gate, base, write("same2.json", mk())); code != 0 {
		t.Fatalf("writing a gate: exit %d: %s", code, errOut)
	}
	notJSON := filepath.Join(dir, "notes.txt")
	scoreFile := filepath.Join(dir, "score.json")
	noFormat := filepath.Join(dir, "list.json")
	for p, s := range map[string]string{notJSON: "hello\n", scoreFile: `{"format": "lfmq-evidence-1"}`, noFormat: `[1, 2]`} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	other := mk()
	other.Receipts.Checkpoint.Identity = strings.Repeat("b", 64)
	hotter := mk()
	t9 := evidence.Float(0.9)
	hotter.Settings.Sampling.Temperature = &t9
	longer := mk()
	longer.Settings.MaxTokens = 64
	for _, tt := range []struct {
		name  string
		files []string
		want  []string
	}{
		{"other model", []string{base, write("other.json", other)}, []string{"other.json", "checkpoint bbbbbbbbbbbb", "base.json ran checkpoint aaaaaaaaaaaa"}},
		{"other sampling", []string{base, write("hotter.json", hotter)}, []string{"hotter.json", "temperature 0.9", "temperature 0.6"}},
		{"other max tokens", []string{base, write("longer.json", longer)}, []string{"longer.json", "max_tokens 64", "32"}},
		{"a gate file", []string{base, gate}, []string{"gate.json", "a gate file", "lfmq eval --out"}},
		{"not JSON", []string{notJSON, base}, []string{"notes.txt", "not JSON", "lfmq eval --out"}},
		{"score evidence", []string{base, scoreFile}, []string{"score.json", `"lfmq-evidence-1"`, "lfmq eval --out"}},
		{"no format", []string{base, noFormat}, []string{"list.json", "lfmq eval --out"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := compare(tt.files...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s%s", code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
}

// contextServer is an OpenAI-compatible server whose model has a context
// of maxLen tokens and whose prompts are promptTokens long; it records the
// max_tokens of every chat request.
func contextServer(t *testing.T, maxLen, promptTokens int) (string, *[]int) {
	var mu sync.Mutex
	var asked []int
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":"m","object":"model","max_model_len":%d}]}`, maxLen)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		asked = append(asked, req.MaxTokens)
		mu.Unlock()
		if promptTokens+req.MaxTokens > maxLen {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":{"message":"this model's maximum context length is %d tokens","type":"BadRequestError"}}`, maxLen)
			return
		}
		fmt.Fprintf(w, `{"choices":[{"message":{"content":"#### 9"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":1}}`, promptTokens)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL, &asked
}

// TestEvalMaxTokensFitsContext: without --max-tokens the default 4,096
// becomes what the context read from /v1/models leaves after the longest
// prompt; a --max-tokens that cannot fit is a usage error naming the flag
// and the numbers before any item runs, and never the in-process
// server's port (issue 45 item 2).
func TestEvalMaxTokensFitsContext(t *testing.T) {
	dir := t.TempDir()
	url, asked := contextServer(t, 1000, 40)
	out := filepath.Join(dir, "default.json")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"eval", "--url", url, "--dataset", wordProblems, "--limit", "3", "--out", out}, ios); code != 0 {
		t.Fatalf("default --max-tokens: exit %d: %s", code, stderr)
	}
	f, err := task.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Settings.MaxTokens != 960 {
		t.Errorf("settings.max_tokens %d, want 960 (1000 - 40)", f.Settings.MaxTokens)
	}
	if n := (*asked)[len(*asked)-1]; n != 960 {
		t.Errorf("the last item asked max_tokens %d, want 960", n)
	}
	if !strings.Contains(stderr.String(), "960") {
		t.Errorf("stderr does not say the default became 960: %s", stderr)
	}

	*asked = nil
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"eval", "--url", url, "--dataset", wordProblems, "--limit", "3", "--max-tokens", "980"}, ios); code != 2 {
		t.Fatalf("--max-tokens 980 with a 1000-token context: exit %d, want 2: %s", code, stderr)
	}
	for _, w := range []string{"--max-tokens 980", "40", "1000", "960"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr %q lacks %q", stderr, w)
		}
	}
	for _, n := range *asked {
		if n > 1 {
			t.Errorf("an item ran (max_tokens %d) before the refusal", n)
		}
	}

	// In process on the fixture (a 4,096-token context): refused before
	// any item, without the loopback port.
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"eval", "--model", tinyModel, "--dataset", wordProblems, "--limit", "2", "--max-tokens", "5000"}, ios); code != 2 {
		t.Fatalf("in process, --max-tokens 5000: exit %d, want 2: %s", code, stderr)
	}
	if msg := stderr.String(); !strings.Contains(msg, "--max-tokens 5000") || !strings.Contains(msg, "4096") || strings.Contains(msg, "127.0.0.1") {
		t.Errorf("in process: %q; want --max-tokens 5000 and the context 4096, and no loopback address", msg)
	}
}

// TestInProcessErrorHidesPort: an in-process run's error names the
// engine's server as in-process, not by its loopback port, and keeps its
// exit code.
func TestInProcessErrorHidesPort(t *testing.T) {
	url := "http://127.0.0.1:45678"
	err := &inProcessError{err: &usageError{fmt.Errorf("item 1: task: %s/v1/chat/completions: HTTP 400 no", url)}, url: url}
	if msg := err.Error(); msg != "item 1: task: in-process /v1/chat/completions: HTTP 400 no" {
		t.Errorf("message %q", msg)
	}
	if exitCode(err) != exitUsage {
		t.Errorf("exit %d, want %d", exitCode(err), exitUsage)
	}
}

package main

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfmq/lfmq/bench"
)

// TestBenchFlags: the command line into options, and the usage errors.
func TestBenchFlags(t *testing.T) {
	tests := []struct {
		args  []string
		want  string // a usage error's text, or "" for none
		check func(*benchOptions) bool
	}{
		{[]string{"--url", "http://127.0.0.1:8000"}, "", func(o *benchOptions) bool {
			return len(o.Concurrency) == 5 && o.Concurrency[4] == 16 && o.PromptTokens[0] == 128 && o.OutputTokens == 64 &&
				o.Duration == 30*time.Second && o.Logprobs && o.Exact == "both"
		}},
		{[]string{"--url", "http://h:1", "--concurrency", "1,4", "--prompt-tokens", "128,2048", "--output-tokens", "32", "--duration", "10s", "--logprobs=false"}, "", func(o *benchOptions) bool {
			return len(o.Concurrency) == 2 && o.PromptTokens[1] == 2048 && o.OutputTokens == 32 && !o.Logprobs &&
				o.command == "lfmq bench --concurrency 1,4 --duration 10s --logprobs false --output-tokens 32 --prompt-tokens 128,2048 --url http://h:1"
		}},
		{[]string{"--url", "http://h:1", "--top-logprobs", "2"}, "", func(o *benchOptions) bool {
			return o.Logprobs && o.TopLogprobs == 2
		}},
		{[]string{"--url", "http://h:1", "--turns", "8", "--turn-tokens", "2048"}, "", func(o *benchOptions) bool {
			return o.Turns == 8 && o.TurnTokens == 2048
		}},
		{[]string{"--url", "http://h:1", "--turns", "3", "--turn-tokens", "5", "--turn-baseline"}, "", func(o *benchOptions) bool {
			return o.TurnBaseline && o.command == "lfmq bench --turn-baseline true --turn-tokens 5 --turns 3 --url http://h:1"
		}},
		{[]string{"--url", "http://h:1", "--turn-tokens", "5"}, "--turn-tokens needs --turns 2 or more", nil},
		{nil, "--url is required", nil},
		{[]string{"--url", "127.0.0.1:8000"}, "want http://HOST:PORT", nil},
		{[]string{"--url", "http://u:p@h:1"}, "credentials in the URL", nil},
		{[]string{"--url", "http://h:1", "--dataset", "d.jsonl", "--prompt-tokens", "5"}, "--dataset and --prompt-tokens exclude each other", nil},
		{[]string{"--url", "http://h:1", "--concurrency", "x"}, "invalid argument", nil},
		{[]string{"--url", "http://h:1", "extra"}, "takes no arguments", nil},
	}
	for _, tt := range tests {
		ios, _, _ := testStreams()
		var got *benchOptions
		err := executeWith(ios, newBenchCmd(ios, func(o *benchOptions) error { got = o; return nil }), append([]string{"bench"}, tt.args...)...)
		if tt.want != "" {
			wantUsageError(t, err, tt.want)
			continue
		}
		if err != nil || !tt.check(got) {
			t.Errorf("%v: %v %+v", tt.args, err, got)
		}
	}
}

// TestBenchUsageErrors: what the command line gets wrong is refused with
// exit 2 before any request, named by its flag.
func TestBenchUsageErrors(t *testing.T) {
	tmp := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "0"}, "--concurrency: 0: want 1 to 4096 streams"},
		{[]string{"--output-tokens", "0"}, "--output-tokens: 0: want at least 1"},
		{[]string{"--exact", "sometimes"}, `--exact: "sometimes": want both`},
		{[]string{"--top-logprobs", "21"}, "--top-logprobs: 21: want 0 to 20"},
		{[]string{"--turns", "3"}, "--turn-tokens: 0: want 1 to"},
		{[]string{"--turns", "-1"}, "--turns: -1: want 1 to 4096"},
		{[]string{"--turn-baseline"}, "--turn-baseline: a baseline is measured beside the turns"},
		{[]string{"--top-logprobs", "1", "--logprobs=false"}, "--top-logprobs: alternatives come with log-probs"},
		{[]string{"--extra-body", `{"stream":false}`}, `--extra-body: "stream" is a field the bench sets itself`},
		{[]string{"--extra-body", `[1]`}, "--extra-body: want a JSON object"},
		{[]string{"--dataset", filepath.Join(tmp, "none.jsonl")}, "no such file"},
		{[]string{"--api-key-file", filepath.Join(tmp, "none")}, "no such file"},
		{[]string{"--out", tmp}, "a directory; give the name of a file"},
	}
	for _, tt := range tests {
		ios, _, stderr := testStreams()
		args := append([]string{"bench", "--url", "http://127.0.0.1:9"}, tt.args...)
		if code := run(context.Background(), args, ios); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	// A dataset whose content is bad is the run's failure (exit 1), by line.
	bad := filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"prompt\":\"x\"}\n{\"text\":\"y\"}\n"), 0o644)
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"bench", "--url", "http://127.0.0.1:9", "--dataset", bad}, ios); code != exitFailure || !strings.Contains(stderr.String(), "bad.jsonl:2: want \"prompt\" or \"messages\"") {
		t.Errorf("exit %d, %s", code, stderr)
	}
}

// metricsOf reads the lfmq_ series of a server's /metrics.
func metricsOf(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "lfmq_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestBenchServe: lfmq bench against lfmq serve on the fixture checkpoint
// prints a row per cell and writes JSON whose counts agree with what the
// server's /metrics, read by the test itself before and after, says it
// answered and generated; every request made exactly its tokens.
func TestBenchServe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server for seconds")
	}
	base, _ := startServe(t, "--model", tinyModel)
	before := metricsOf(t, base)
	out := filepath.Join(t.TempDir(), "b.json")
	plots := filepath.Join(t.TempDir(), "plots")
	ios, stdout, stderr := testStreams()
	args := []string{"bench", "--url", base, "--concurrency", "1,4", "--prompt-tokens", "128", "--output-tokens", "32",
		"--duration", "1500ms", "--out", out, "--plot", plots}
	if code := run(context.Background(), args, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	after := metricsOf(t, base)
	f, err := bench.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cells) != 2 || f.Server.Kind != "lfmq" || f.Interrupted || !strings.Contains(f.Receipts.Command, "--concurrency 1,4") {
		t.Fatalf("%+v", f)
	}
	var ok, completion, prompt int64
	for _, c := range f.Cells {
		if c.Requests == 0 || len(c.Failures) != 0 || !c.Complete {
			t.Errorf("cell %d streams: %d requests, failures %v %v", c.Concurrency, c.Requests, c.Failures, c.FailureSamples)
		}
		ok += int64(c.Sent.ByStatus["200"])
		completion += c.Sent.CompletionTokens
		prompt += c.Sent.PromptTokens
		if c.Sent.TokenEvents != c.Sent.CompletionTokens {
			t.Errorf("cell %d: %d token events for %d tokens: logprobs should make one per token", c.Concurrency, c.Sent.TokenEvents, c.Sent.CompletionTokens)
		}
		sc := c.ServerCounts
		if sc == nil || sc.Requests == nil || *sc.Requests != int64(c.Sent.Attempts) || *sc.GenerationTokens != c.Sent.CompletionTokens || *sc.PromptTokens != c.Sent.PromptTokens {
			t.Errorf("cell %d: server counts %+v, sent %+v", c.Concurrency, sc, c.Sent)
		}
	}
	d := func(k string) int64 { return int64(after[k] - before[k]) }
	if got := d(`lfmq_requests_total{route="/v1/completions",status="200"}`); got != ok {
		t.Errorf("the server answered %d completions with 200; the bench counts %d", got, ok)
	}
	if got := d("lfmq_generation_tokens_total"); got != completion || completion != 32*ok {
		t.Errorf("the server generated %d tokens; the bench counts %d for %d requests of 32", got, completion, ok)
	}
	if got := d("lfmq_prompt_tokens_total"); got != prompt || prompt != 128*ok {
		t.Errorf("the server admitted %d prompt tokens; the bench counts %d for %d prompts of 128", got, prompt, ok)
	}
	table := stdout.String()
	if !strings.HasPrefix(table, "| streams | prompt |") || strings.Count(table, "\n| 1 | 128 |")+strings.Count(table, "\n| 4 | 128 |") != 2 {
		t.Errorf("table:\n%s", table)
	}
	for _, name := range []string{"throughput.svg", "ttft.svg"} {
		if data, err := os.ReadFile(filepath.Join(plots, name)); err != nil || !strings.Contains(string(data), "<svg") {
			t.Errorf("%s: %v", name, err)
		}
	}

	// An agent loop of 3 turns: 112 tokens, then the prompt, the 16
	// tokens answered and 64 new ones, twice. lfmq serve returns the
	// answers' ids, so each turn re-sends the conversation exactly, and
	// its prefix cache (64-token blocks) supplies the whole blocks of what
	// was sent and answered before: 128 of turn 2's 192 tokens (the first
	// answer ends on a block boundary, so its last token was fed for the
	// cache), 192 of turn 3's 272. After turns 2 and 3 a fresh prompt of
	// the 64 new tokens alone is timed beside them.
	ios, stdout, stderr = testStreams()
	if code := run(context.Background(), []string{"bench", "--url", base, "--concurrency", "1", "--prompt-tokens", "112", "--output-tokens", "16",
		"--turns", "3", "--turn-tokens", "64", "--turn-baseline", "--max-requests", "3", "--duration", "1m", "--out", out}, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if f, err = bench.Read(out); err != nil {
		t.Fatal(err)
	}
	turns := f.Cells[0].Turns
	want := [][3]float64{{112, 0}, {192, 128}, {272, 192}}
	if len(turns) != 3 {
		t.Fatalf("turns %+v", turns)
	}
	for k, tu := range turns {
		if tu.Requests != 1 || tu.PromptTokensMean != want[k][0] || tu.CachedTokensMean != want[k][1] || tu.StandIn != 0 {
			t.Errorf("turn %d: %+v; want %v tokens, %v cached", k+1, tu, want[k][0], want[k][1])
		}
		if fresh := tu.FreshTTFT; (k > 0) != (tu.FreshRequests == 1 && fresh != nil && fresh.N == 1 && fresh.Mean > 0) {
			t.Errorf("turn %d: %d fresh prompts, TTFT %+v", k+1, tu.FreshRequests, fresh)
		}
	}
	if sc := f.Cells[0].ServerCounts; sc == nil || sc.PrefixHitTokens == nil || *sc.PrefixHitTokens != 320 {
		t.Errorf("server counts %+v: want 320 prefix-cache hits", sc)
	}
	if !strings.Contains(stdout.String(), "| 1 | 112 | 3 | 1 | 272 | 192 | 70.6 |") || !strings.Contains(stdout.String(), "turn ÷ fresh") {
		t.Errorf("table:\n%s", stdout)
	}

	// A dataset of a text prompt, a token-id prompt and a chat: the chat
	// goes to /v1/chat/completions, and every answer is exact there too.
	ds := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(ds, []byte(`{"prompt":"The ls command lists"}
{"prompt":[1,300,301,302]}
{"messages":[{"role":"user","content":"What does ls do?"}]}
`), 0o644)
	ios, stdout, stderr = testStreams()
	if code := run(context.Background(), []string{"bench", "--url", base, "--dataset", ds, "--concurrency", "2", "--output-tokens", "16", "--duration", "1s", "--out", out}, ios); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if f, err = bench.Read(out); err != nil {
		t.Fatal(err)
	}
	c := f.Cells[0]
	if len(f.Cells) != 1 || c.Requests < 3 || len(c.Failures) != 0 || c.Sent.TokenEvents != c.Sent.CompletionTokens || strings.Join(f.Settings.Routes, " ") != "/v1/chat/completions /v1/completions" {
		t.Errorf("dataset cell %+v, routes %v", c, f.Settings.Routes)
	}
	if !strings.Contains(stdout.String(), "| 2 | dataset (") {
		t.Errorf("table:\n%s", stdout)
	}
}

// TestBenchInterrupt: Ctrl-C during a cell prints the table of what was
// measured, writes --out marked interrupted with the cell partial, and
// exits 1 saying so.
func TestBenchInterrupt(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"object":"list","data":[{"id":"slow","meta":{"n_vocab":100}}]}`))
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 4 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			w.Write([]byte("data: {\"choices\":[{\"text\":\"x\"}]}\n\n"))
			w.(http.Flusher).Flush()
		}
		w.Write([]byte("data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n"))
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	out := filepath.Join(t.TempDir(), "b.json")
	ios, stdout, stderr := testStreams()
	code := run(ctx, []string{"bench", "--url", hs.URL, "--concurrency", "2", "--prompt-tokens", "8", "--output-tokens", "4", "--duration", "1m", "--out", out}, ios)
	if code != exitFailure || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout.String(), "| 2 (partial) | 8 |") || !strings.Contains(stdout.String(), "interrupted: the last cell is partial") {
		t.Errorf("table:\n%s", stdout)
	}
	f, err := bench.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Interrupted || len(f.Cells) != 1 || f.Cells[0].Complete || f.Cells[0].Requests == 0 || len(f.Cells[0].Failures) != 0 {
		t.Errorf("%+v", f)
	}
}

// TestBenchAllFailedAndContext: a server that fails every request makes
// bench exit 1 after its report (the table shows the failures), and a run
// beyond the server's max_model_len is refused up front (exit 2) without
// a request.
func TestBenchAllFailedAndContext(t *testing.T) {
	var completions atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"object":"list","data":[{"id":"broken","max_model_len":64,"meta":{"n_vocab":100}}]}`))
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		completions.Add(1)
		http.Error(w, `{"error":{"message":"broken","type":"server_error"}}`, http.StatusInternalServerError)
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	ios, stdout, stderr := testStreams()
	code := run(context.Background(), []string{"bench", "--url", hs.URL, "--concurrency", "1", "--prompt-tokens", "8", "--output-tokens", "4", "--duration", "200ms", "--max-requests", "3"}, ios)
	if code != exitFailure || !strings.Contains(stderr.String(), "every request failed") || !strings.Contains(stdout.String(), "http_500") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	completions.Store(0)
	ios, _, stderr = testStreams()
	code = run(context.Background(), []string{"bench", "--url", hs.URL, "--concurrency", "1", "--prompt-tokens", "60", "--output-tokens", "8"}, ios)
	if code != exitUsage || !strings.Contains(stderr.String(), "--prompt-tokens: 60 + --output-tokens 8 = 68 tokens, beyond the server's max_model_len 64") || completions.Load() != 0 {
		t.Errorf("exit %d, %d requests: %s", code, completions.Load(), stderr)
	}
}

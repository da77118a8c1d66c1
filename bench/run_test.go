package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func quick(url string) Options {
	return Options{URL: url, Concurrency: []int{2}, PromptTokens: []int{16}, OutputTokens: 8,
		Duration: 300 * time.Millisecond, Logprobs: true, Seed: 1}
}

// TestExactAccounting: against fakes of vLLM and llama.cpp, every request
// generates exactly the tokens asked for (min_tokens and ignore_eos both
// sent), the bench's counts equal the fake's own (attempts, prompt and
// generated tokens) and what its /metrics says, and a token with no text
// of its own (vLLM with logprobs) is still an event.
func TestExactAccounting(t *testing.T) {
	for _, kind := range []string{"vllm", "llama.cpp"} {
		t.Run(kind, func(t *testing.T) {
			f, url := newFake(t, kind)
			f.stopAt = 3 // a model that would stop early
			f.tokenDelay = time.Millisecond
			o := quick(url)
			if kind == "vllm" {
				o.Vocab = f.vocab // vLLM does not report it
			}
			res, err := Run(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			c := res.Cells[0]
			f.mu.Lock()
			defer f.mu.Unlock()
			if c.Requests == 0 || len(c.Failures) != 0 {
				t.Fatalf("requests %d, failures %v %v", c.Requests, c.Failures, c.FailureSamples)
			}
			if c.Sent.Attempts != f.attempts || c.Sent.ByStatus["200"] != f.byStatus[200] {
				t.Errorf("sent %+v; the server counted %d attempts, %v", c.Sent, f.attempts, f.byStatus)
			}
			if c.Sent.CompletionTokens != int64(f.tokens) || c.Sent.PromptTokens != int64(f.prompt) || c.Sent.TokenEvents != int64(f.tokens) {
				t.Errorf("sent %+v; the server generated %d tokens for %d prompt tokens", c.Sent, f.tokens, f.prompt)
			}
			if c.Sent.CompletionTokens != int64(8*f.byStatus[200]) {
				t.Errorf("%d tokens for %d requests of 8", c.Sent.CompletionTokens, f.byStatus[200])
			}
			if sc := c.ServerCounts; sc == nil || sc.GenerationTokens == nil || *sc.GenerationTokens != int64(f.tokens) || *sc.PromptTokens != int64(f.prompt) {
				t.Errorf("server counts %+v, metrics %v; the server generated %d", c.ServerCounts, c.ServerMetrics, f.tokens)
			}
			if _, ok := c.ServerMetrics["process_cpu_seconds_total"]; ok {
				t.Error("a process metric was recorded")
			}
			if res.Server.Kind != kind || res.Server.Model == "" {
				t.Errorf("server %+v", res.Server)
			}
			for _, b := range f.bodies {
				if b["min_tokens"] != float64(8) || b["ignore_eos"] != true || b["stream"] != true {
					t.Fatalf("request body %v", b)
				}
			}
		})
	}
}

// TestShortAnswerFails: a server that stops early is a failure, not a
// faster cell: asked with min_tokens only, the llama.cpp fake stops after
// 3 of 8 tokens, every request counts as short, and none of their tokens
// counts towards the throughput.
func TestShortAnswerFails(t *testing.T) {
	f, url := newFake(t, "llama.cpp")
	f.stopAt = 3
	o := quick(url)
	o.Exact = ExactMinTokens
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cells[0]
	if c.Requests != 0 || c.Failures["short"] == 0 || c.OutputTokensPerSecond != 0 || c.TTFT.N != 0 {
		t.Errorf("requests %d, failures %v, %v tok/s, ttft %+v", c.Requests, c.Failures, c.OutputTokensPerSecond, c.TTFT)
	}
	if !strings.Contains(c.FailureSamples["short"], "3 tokens of the 8") {
		t.Errorf("sample %q", c.FailureSamples["short"])
	}
	if !strings.Contains(Markdown(res), "× short: 3 tokens of the 8 asked for") {
		t.Errorf("the table does not list the failures:\n%s", Markdown(res))
	}
}

// TestDisconnect: a server that drops the connection mid-stream fails
// every request as a disconnect.
func TestDisconnect(t *testing.T) {
	f, url := newFake(t, "llama.cpp")
	f.disconnectAt = 4
	res, err := Run(t.Context(), quick(url))
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cells[0]
	if c.Requests != 0 || c.Failures["disconnect"] == 0 || len(c.Failures) != 1 || c.OutputTokensPerSecond != 0 {
		t.Errorf("requests %d, failures %v %v", c.Requests, c.Failures, c.FailureSamples)
	}
}

// TestRetryAfter: 429 answers are retried after the server's Retry-After
// and counted; the requests then succeed.
func TestRetryAfter(t *testing.T) {
	f, url := newFake(t, "llama.cpp")
	f.retryAfter = "1"
	f.reject429.Store(2)
	o := quick(url)
	o.Concurrency = []int{1}
	o.Duration = 2500 * time.Millisecond
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cells[0]
	if c.Retries != 2 || c.Sent.ByStatus["429"] != 2 || len(c.Failures) != 0 || c.Requests == 0 {
		t.Errorf("retries %d, sent %+v, failures %v %v, requests %d", c.Retries, c.Sent, c.Failures, c.FailureSamples, c.Requests)
	}
	if c.RetryWaitSeconds != 2 {
		t.Errorf("waited %v s; Retry-After said 1 s twice", c.RetryWaitSeconds)
	}
	// Past the cell's end a Retry-After is not waited for: a failure.
	f.reject429.Store(1 << 20)
	f.retryAfter = "5"
	res, err = Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Cells[0]; c.Failures["http_429"] == 0 || c.Requests != 0 || !strings.Contains(c.FailureSamples["http_429"], "ends after the cell") {
		t.Errorf("failures %v %v", c.Failures, c.FailureSamples)
	}
}

// TestStaleConnection: a server that closes a kept-alive connection
// when the next request arrives on it (closeIdle: every request after the
// first on a connection) costs no request: each is sent again on a new
// connection, counted in resent and not as an attempt or a failure, and
// timed from the attempt that was answered. A server that closes fresh
// connections too (closeAll) still fails every request: only a reused
// connection that broke before any byte of an answer is sent again, and
// the one reused connection there is the one kept from reading /metrics
// before the cell.
func TestStaleConnection(t *testing.T) {
	f, url := newFake(t, "llama.cpp")
	f.closeIdle = true
	o := quick(url)
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cells[0]
	f.mu.Lock()
	closed, ok := f.closed, f.byStatus[200]
	f.mu.Unlock()
	if len(c.Failures) != 0 || c.Requests == 0 {
		t.Fatalf("requests %d, failures %v %v", c.Requests, c.Failures, c.FailureSamples)
	}
	// Every request after a stream's first met a closed connection once.
	if closed == 0 || c.Sent.Resent != closed || c.Resent == 0 || c.Resent > c.Sent.Resent {
		t.Errorf("resent %d (measured %d); the server closed %d connections unanswered", c.Sent.Resent, c.Resent, closed)
	}
	if c.Sent.Attempts != ok || c.Sent.ByStatus["none"] != 0 {
		t.Errorf("sent %+v; the server answered %d", c.Sent, ok)
	}
	if md := Markdown(res); !strings.Contains(md, "sent again on a new connection") {
		t.Errorf("the table does not say it:\n%s", md)
	}

	f, url = newFake(t, "llama.cpp")
	f.closeAll = true
	res, err = Run(t.Context(), quick(url))
	if err != nil {
		t.Fatal(err)
	}
	c = res.Cells[0]
	if c.Requests != 0 || c.Failures["connect"] == 0 || c.Sent.Resent > 1 || c.Sent.ByStatus["none"] != c.Sent.Attempts {
		t.Errorf("requests %d, failures %v, sent %+v", c.Requests, c.Failures, c.Sent)
	}
}

// TestBounds: a cell sends no more than MaxRequests, and an interrupt
// returns what was measured, marked partial.
func TestBounds(t *testing.T) {
	f, url := newFake(t, "llama.cpp")
	o := quick(url)
	o.MaxRequests = 5
	o.Duration = time.Minute
	start := time.Now()
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if f.attempts != 5 || res.Cells[0].Requests != 5 || time.Since(start) > 30*time.Second {
		t.Errorf("%d attempts, %d requests in %s", f.attempts, res.Cells[0].Requests, time.Since(start))
	}
	if w := res.Cells[0].WindowSeconds; w <= 0 || w > 30 {
		t.Errorf("window %v s: it ends when the count bound stops the cell", w)
	}

	f.tokenDelay = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	o.MaxRequests = 0
	o.Concurrency = []int{1, 2}
	res, err = Run(ctx, o)
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || !res.Interrupted || len(res.Cells) != 1 || res.Cells[0].Complete {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if c := res.Cells[0]; len(c.Failures) != 0 || c.Requests == 0 {
		t.Errorf("cancelled requests counted: %+v", c)
	}
	if !strings.Contains(Markdown(res), "1 (partial)") {
		t.Errorf("%s", Markdown(res))
	}
}

// TestVocabNeeded: a server that does not say its vocabulary size (vLLM)
// needs --vocab, named in the error.
func TestVocabNeeded(t *testing.T) {
	_, url := newFake(t, "vllm")
	_, err := Run(t.Context(), quick(url))
	var oe *OptionsError
	if !errors.As(err, &oe) || oe.Field != "vocab" {
		t.Errorf("err %v", err)
	}
}

// TestPercentiles: Summarize against hand-computed values (linear
// interpolation between closest ranks).
func TestPercentiles(t *testing.T) {
	tests := []struct {
		xs   []float64
		want Dist
	}{
		{[]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, Dist{N: 10, Mean: 5.5, Min: 1, P50: 5.5, P90: 9.1, P99: 9.91, Max: 10}},
		// ranks 0.5·2 = 1, 0.9·2 = 1.8, 0.99·2 = 1.98 of {0.1, 0.2, 0.4}
		{[]float64{0.4, 0.1, 0.2}, Dist{N: 3, Mean: 0.7 / 3, Min: 0.1, P50: 0.2, P90: 0.36, P99: 0.396, Max: 0.4}},
		{[]float64{7}, Dist{N: 1, Mean: 7, Min: 7, P50: 7, P90: 7, P99: 7, Max: 7}},
		{nil, Dist{}},
	}
	for _, tt := range tests {
		got := Summarize(tt.xs)
		g := []float64{float64(got.N), got.Mean, got.Min, got.P50, got.P90, got.P99, got.Max}
		w := []float64{float64(tt.want.N), tt.want.Mean, tt.want.Min, tt.want.P50, tt.want.P90, tt.want.P99, tt.want.Max}
		for i := range g {
			if math.Abs(g[i]-w[i]) > 1e-12 {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.xs, got, tt.want)
				break
			}
		}
	}
}

// TestSummarizeByHand: a cell's figures from records whose times are
// given, against values computed by hand: a 1 s window from t = 1 s; two
// measured requests and a warm-up one whose tokens in the window count
// towards the throughput only.
func TestSummarizeByHand(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
	ev := func(ms, n int) tokenEvent { return tokenEvent{At: at(ms), Tokens: n} }
	cr := &cellRun{o: &Options{OutputTokens: 4}, measureAt: t0.Add(time.Second)}
	cr.records = []*record{
		// warm-up, sent at 0.5 s: tokens at 0.9 s (outside) and 1.1 s ×3
		{first: t0.Add(500 * time.Millisecond), answered: t0.Add(500 * time.Millisecond), tokens: 4,
			stream: &streamResult{Events: []tokenEvent{ev(400, 1), ev(600, 3)}, End: at(650)}},
		// sent at 1.0 s: TTFT 100 ms, gaps 20, 30, 50 ms
		{first: t0.Add(time.Second), answered: t0.Add(time.Second), measured: true, tokens: 4, prompt: 10,
			stream: &streamResult{Events: []tokenEvent{ev(100, 1), ev(120, 1), ev(150, 1), ev(200, 1)}, End: at(210)}},
		// sent at 1.5 s, retried once, answered at 1.6 s: TTFT 200 ms,
		// then one chunk of 3 tokens 60 ms later (3 gaps of 20 ms); its
		// last token arrives at 1.86 s, in the window
		{first: t0.Add(1500 * time.Millisecond), answered: t0.Add(1600 * time.Millisecond), measured: true, tokens: 4, prompt: 20, retries: 1, wait: 100 * time.Millisecond,
			stream: &streamResult{Events: []tokenEvent{ev(200, 1), ev(260, 3)}, End: at(300)}},
		// a measured failure: not in any figure but the failures
		{first: t0.Add(1200 * time.Millisecond), answered: t0.Add(1200 * time.Millisecond), measured: true, kind: "short", msg: "2 tokens", tokens: 2,
			stream: &streamResult{Events: []tokenEvent{ev(50, 2)}, End: at(60)}},
	}
	cell := Cell{Failures: map[string]int{}, WindowSeconds: 1}
	cr.summarize(&cell, t0.Add(2*time.Second))
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// window tokens: 3 (warm-up) + 4 + 4
	near("tok/s", cell.OutputTokensPerSecond, 11)
	if cell.Requests != 2 || cell.Failures["short"] != 1 || cell.Retries != 1 {
		t.Errorf("requests %d, failures %v, retries %d", cell.Requests, cell.Failures, cell.Retries)
	}
	near("retry wait", cell.RetryWaitSeconds, 0.1)
	near("prompt mean", cell.PromptTokensMean, 15)
	near("ttft mean", cell.TTFT.Mean, 0.15)
	near("ttft p90", cell.TTFT.P90, 0.19)
	// ITL sample {0.02, 0.03, 0.05, 0.02, 0.02, 0.02}: sorted
	// {0.02, 0.02, 0.02, 0.02, 0.03, 0.05}; p50 at rank 2.5, p90 at 4.5
	near("itl mean", cell.ITL.Mean, 0.16/6)
	near("itl p50", cell.ITL.P50, 0.02)
	near("itl p90", cell.ITL.P90, 0.04)
	// per stream: 3 tokens over 0.1 s and over 0.06 s
	near("stream mean", cell.StreamTokensPerSecond.Mean, (30+50)/2.0)
	near("latency max", cell.Latency.Max, 0.3)
}

// TestReadStream: token counting in the streams of the three servers:
// logprobs entries (a token without text included), text chunks without
// logprobs, held text released after log-prob chunks (not a token),
// usage in its own chunk or with the finish, an error frame, a missing
// [DONE], and a line that is not JSON.
func TestReadStream(t *testing.T) {
	tests := []struct {
		name, stream      string
		events, usage     int
		done, err         bool
		finish, serverErr string
	}{
		{"vllm with logprobs", `data: {"choices":[{"text":"a","logprobs":{"tokens":["a"]}}]}

data: {"choices":[{"text":"","logprobs":{"tokens":["\ufffd"]}}]}

data: {"choices":[{"text":"bc","logprobs":{"tokens":["b","c"]}}]}

data: {"choices":[{"text":"\ufffd","finish_reason":"length"}]}

data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4}}

data: [DONE]
`, 4, 4, true, false, "length", ""},
		{"llama.cpp, usage with the finish", "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n", 2, 2, true, false, "length", ""},
		{"chat deltas", "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"logprobs\":null}]}\n\ndata: [DONE]\n", 2, -1, true, false, "", ""},
		{"error frame", "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n", 1, -1, true, false, "", "server_error: boom"},
		{"no [DONE]", "data: {\"choices\":[{\"text\":\"a\"}]}\n\n", 1, -1, false, false, "", ""},
		{"not JSON", "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {oops\n\n", 1, -1, false, true, "", ""},
		{"comments and CRLF", ": ping\r\nevent: message\r\ndata: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\ndata: [DONE]\r\n", 1, -1, true, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := readStream(strings.NewReader(tt.stream), func() time.Duration { return 0 })
			if (err != nil) != tt.err {
				t.Fatalf("err %v", err)
			}
			if got := res.tokens(); got != tt.events {
				t.Errorf("%d token events, want %d", got, tt.events)
			}
			if (res.Usage == nil) != (tt.usage < 0) || (res.Usage != nil && res.Usage.CompletionTokens != tt.usage) {
				t.Errorf("usage %+v, want %d", res.Usage, tt.usage)
			}
			if res.Done != tt.done || res.Finish != tt.finish || res.ServerError != tt.serverErr {
				t.Errorf("done %v finish %q error %q", res.Done, res.Finish, res.ServerError)
			}
		})
	}
	long := "data: " + strings.Repeat("x", maxLine+1) + "\n"
	if _, err := readStream(strings.NewReader(long), func() time.Duration { return 0 }); err == nil || !strings.Contains(err.Error(), "a line over") {
		t.Errorf("a line over the bound: %v", err)
	}
}

// TestParseMetrics: the servers' counters are kept (labels with spaces
// and escaped quotes too), gauges and process metrics are not, and a
// malformed line is an error naming it.
func TestParseMetrics(t *testing.T) {
	text := `# HELP lfmq_requests_total x
lfmq_requests_total{route="/v1/completions",status="200"} 12
lfmq_requests_total{route="/a b",status="4\"29"} 3 1700000000000
lfmq_num_requests_running 4
vllm:generation_tokens_total{model_name="m"} 1.5e3
lfmq_time_to_first_token_seconds_sum 0.25
process_cpu_seconds_total 9
`
	s, err := parseMetrics([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := samples{`lfmq_requests_total{route="/v1/completions",status="200"}`: 12, `lfmq_requests_total{route="/a b",status="4\"29"}`: 3,
		`vllm:generation_tokens_total{model_name="m"}`: 1500, "lfmq_time_to_first_token_seconds_sum": 0.25}
	if !maps.Equal(s, want) {
		t.Errorf("got %v", s)
	}
	for _, bad := range []string{"lfmq_x_total{a=\"b\" 1\n", "lfmq_x_total\n", "lfmq_x_total abc\n", "lfmq_x_total 1 2 3\n"} {
		if _, err := parseMetrics([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	d := delta(samples{"a_total": 5, "b_total": 7}, samples{"a_total": 8, "b_total": 2, "c_total": 1})
	if len(d) != 2 || d["a_total"] != 3 || d["c_total"] != 1 {
		t.Errorf("delta %v: a restarted counter (b) is left out", d)
	}
}

// TestSchemaDocumented: every field of the --out file is named in
// docs/bench.md's description of it (as `field`).
func TestSchemaDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, ok := strings.Cut(string(data), "## The `--out` file")
	if !ok {
		t.Fatal("docs/bench.md has no section on the --out file")
	}
	seen := map[reflect.Type]bool{}
	var walk func(ty reflect.Type, path string)
	walk = func(ty reflect.Type, path string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] || ty.PkgPath() == "encoding/json" {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Anonymous {
				walk(f.Type, path)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("docs/bench.md does not describe %s%s (`%s`)", path, f.Name, name)
			}
			walk(f.Type, path+f.Name+".")
		}
	}
	walk(reflect.TypeOf(File{}), "")
	if !strings.Contains(doc, "`"+Schema+"`") {
		t.Errorf("docs/bench.md does not name the schema %s", Schema)
	}
}

// TestMarkdownNotes: a cell whose requests outlast half its window, or
// with fewer requests than streams, is flagged; a cell of many short
// requests is not.
func TestMarkdownNotes(t *testing.T) {
	r := &Result{Cells: []Cell{
		{Concurrency: 4, PromptTokens: 128, Complete: true, Requests: 4, WindowSeconds: 10, Latency: Dist{P50: 14.87}},
		{Concurrency: 16, PromptTokens: 128, Complete: true, Requests: 9, Failures: map[string]int{"short": 2}, WindowSeconds: 10, Latency: Dist{P50: 1}},
		{Concurrency: 1, PromptTokens: 128, Complete: true, Requests: 200, WindowSeconds: 10, Latency: Dist{P50: 0.05}},
	}}
	md := Markdown(r)
	for _, want := range []string{
		"- 4 streams, prompt 128: 4 requests started in the 10 s window, taking 14.87 s each (p50)",
		"- 16 streams, prompt 128: 11 requests started in the 10 s window",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no note %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "- 1 streams") {
		t.Errorf("a steady cell is flagged:\n%s", md)
	}
}

// TestRequestLogprobs: the log-prob fields each setting sends, on the
// completions route (the legacy field counts alternatives, so 0 asks for
// the sampled token's alone) and the chat route (a flag and top_logprobs).
func TestRequestLogprobs(t *testing.T) {
	tests := []struct {
		name     string
		on       bool
		top      int
		chat     bool
		logprobs any // nil: absent
		topField any
	}{
		{"off", false, 0, false, nil, nil},
		{"sampled", true, 0, false, float64(0), nil},
		{"top 2", true, 2, false, float64(2), nil},
		{"chat off", false, 0, true, nil, nil},
		{"chat sampled", true, 0, true, true, nil},
		{"chat top 2", true, 2, true, true, float64(2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &Options{OutputTokens: 4, Logprobs: tt.on, TopLogprobs: tt.top, MaxRequests: 1}
			if tt.chat {
				o.Dataset = []Record{{Messages: []byte(`[{"role":"user","content":"hi"}]`)}}
			}
			cr := &cellRun{o: o, srv: &Server{Model: "m", Vocab: 10}, promptTokens: 3}
			data, _ := cr.body(0, nil)
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			if m["logprobs"] != tt.logprobs || m["top_logprobs"] != tt.topField {
				t.Errorf("logprobs %v, top_logprobs %v; want %v, %v", m["logprobs"], m["top_logprobs"], tt.logprobs, tt.topField)
			}
		})
	}
}

// TestMultiTurn: conversations of 3 turns against the fakes. Every later
// turn's prompt is an earlier request's prompt, the answer the fake
// generated for it (its token ids, returned by the vLLM fake) and 5 new
// ids, checked against the fake's own record of what it answered; the
// per-turn figures carry the context lengths (16, 16+8+5, 16+2·13) and
// the cached tokens the fake's block cache reports (none, then the whole
// blocks of the re-sent context: 16 and 32), and /metrics' prefix-cache
// counters agree with the usage. The llama.cpp fake returns no ids: the
// conversation goes on with stand-in answers, counted, which no cache
// matches beyond the first turn's prompt.
func TestMultiTurn(t *testing.T) {
	for _, kind := range []string{"vllm", "llama.cpp"} {
		t.Run(kind, func(t *testing.T) {
			f, url := newFake(t, kind)
			o := quick(url)
			o.Vocab, o.Turns, o.TurnTokens, o.MaxRequests = f.vocab, 3, 5, 12
			o.Duration = time.Minute
			res, err := Run(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			c := res.Cells[0]
			if c.Requests != 12 || len(c.Failures) != 0 || len(c.Turns) != 3 || res.Settings.Turns != 3 || res.Settings.TurnTokens != 5 {
				t.Fatalf("requests %d, failures %v, turns %+v", c.Requests, c.Failures, c.Turns)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			lengths := map[int]int{}
			for _, b := range f.bodies {
				var prompt []int
				for _, v := range b["prompt"].([]any) {
					prompt = append(prompt, int(v.(float64)))
				}
				lengths[len(prompt)]++
				if b["return_token_ids"] != true {
					t.Errorf("a turn without return_token_ids: %v", b["return_token_ids"])
				}
				if len(prompt) == 16 {
					continue
				}
				found := false
				for _, s := range f.seqs {
					if len(s)+5 == len(prompt) && slices.Equal(s, prompt[:len(s)]) {
						found = true
					}
				}
				if found != (kind == "vllm") {
					t.Errorf("a %d-token turn re-sends an earlier prompt and answer: %v", len(prompt), found)
				}
			}
			// Two streams share the 12 requests as they come: each runs
			// whole conversations but the last, which the bound cuts.
			if len(lengths) != 3 || lengths[16]+lengths[29]+lengths[42] != 12 || lengths[29] > lengths[16] || lengths[42] > lengths[29] || lengths[42] < 3 {
				t.Errorf("prompt lengths %v; want conversations of 16, 29, 42", lengths)
			}
			wantCached := []float64{0, 16, 32}
			if kind == "llama.cpp" {
				wantCached = []float64{0, 16, 16}
			}
			var cached float64
			for k, tu := range c.Turns {
				n := lengths[16+13*k]
				if tu.Turn != k+1 || tu.Requests != n || tu.PromptTokensMean != float64(16+13*k) || tu.CachedTokensMean != wantCached[k] || tu.TTFT.N != n {
					t.Errorf("turn %d: %+v; want %d requests of %d tokens, %v cached", k+1, tu, n, 16+13*k, wantCached[k])
				}
				if stand := tu.StandIn; (kind == "vllm" || k == 0) != (stand == 0) {
					t.Errorf("turn %d: %d stand-in answers", k+1, stand)
				}
				cached += float64(n) * tu.CachedTokensMean
			}
			if c.Sent.CachedPromptTokens != int64(cached) || c.Sent.CachedPromptTokens != int64(f.hits) {
				t.Errorf("sent %d cached tokens; the turns say %v, the fake %d", c.Sent.CachedPromptTokens, cached, f.hits)
			}
			if sc := c.ServerCounts; sc == nil || sc.PrefixHitTokens == nil || *sc.PrefixHitTokens != int64(f.hits) || *sc.PrefixQueryTokens != int64(f.queried) {
				t.Errorf("server counts %+v; the fake hit %d of %d", c.ServerCounts, f.hits, f.queried)
			}
			if acc, tps, ok := c.ServerCounts.DraftAcceptance(); !ok || math.Abs(acc-0.5) > 0.02 || math.Abs(tps-3) > 0.1 {
				t.Errorf("drafter acceptance %v, %v tokens per step (%v); the fake keeps 2 of 4, 3 tokens per step", acc, tps, ok)
			}
			if sc := c.ServerCounts; sc.DraftSeconds == nil || math.Abs(*sc.DraftSeconds-0.0015*float64(*sc.GenerationTokens)) > 1e-6 {
				got := "none"
				if sc.DraftSeconds != nil {
					got = fmt.Sprint(*sc.DraftSeconds)
				}
				t.Errorf("drafter seconds %s for %d tokens; the fake takes 1.5 ms a token", got, *sc.GenerationTokens)
			}
			md := Markdown(res)
			if !strings.Contains(md, fmt.Sprintf("| 2 | 16 | 3 | %d | 42 | ", lengths[42])) || !strings.Contains(md, "prefix cache found") || !strings.Contains(md, "drafter kept") || !strings.Contains(md, "drafter's passes and its context took") {
				t.Errorf("table:\n%s", md)
			}
		})
	}
}

// TestMultiTurnBaseline: with TurnBaseline each turn from the second on
// is followed by a fresh prompt of the turn's new tokens alone, which
// shares no prefix with the conversation, goes to its turn's FreshTTFT
// (timed from its own request: the fake prefills each uncached token for
// a millisecond) and not to the cell's requests, and the table gives the
// turn's ratio to it.
func TestMultiTurnBaseline(t *testing.T) {
	f, url := newFake(t, "vllm")
	f.prefillDelay = time.Millisecond
	o := quick(url)
	o.Concurrency = []int{1}
	o.Vocab, o.Turns, o.TurnTokens, o.TurnBaseline, o.MaxRequests = f.vocab, 3, 5, true, 6
	o.Duration = time.Minute
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cells[0]
	if c.Requests != 6 || len(c.Failures) != 0 || !res.Settings.TurnBaseline || c.Sent.Attempts != 6+4 {
		t.Fatalf("requests %d, failures %v, attempts %d; want 6 turns and 4 fresh prompts", c.Requests, c.Failures, c.Sent.Attempts)
	}
	if c.TTFT.N != 6 {
		t.Errorf("the cell's TTFT has %d samples; the fresh prompts must not count", c.TTFT.N)
	}
	for k, tu := range c.Turns {
		if k == 0 {
			if tu.FreshRequests != 0 || tu.FreshTTFT != nil {
				t.Errorf("turn 1 has a baseline: %+v", tu)
			}
			if tu.TTFT.Min < 0.016 {
				t.Errorf("turn 1 (16 uncached tokens) answered in %.4f s", tu.TTFT.Min)
			}
			continue
		}
		if tu.Requests != 2 || tu.FreshRequests != 2 || tu.FreshTTFT == nil || tu.FreshTTFT.N != 2 || tu.FreshTTFT.Min < 0.005 {
			t.Errorf("turn %d: %+v, fresh %+v; want 2 turns and 2 fresh prompts of 5 uncached tokens", k+1, tu, tu.FreshTTFT)
		}
	}
	f.mu.Lock()
	fresh := 0
	for _, b := range f.bodies {
		var prompt []int
		for _, v := range b["prompt"].([]any) {
			prompt = append(prompt, int(v.(float64)))
		}
		if len(prompt) != 5 {
			continue
		}
		fresh++
		for _, s := range f.seqs {
			if s[0] == prompt[0] && len(s) > 5+8 {
				t.Errorf("a fresh prompt %v starts like a conversation %v", prompt, s[:5])
			}
		}
	}
	f.mu.Unlock()
	if fresh != 4 {
		t.Errorf("%d fresh prompts of 5 tokens sent, want 4", fresh)
	}
	tu := c.Turns[2]
	row := fmt.Sprintf("| %s | %s×", fixed(tu.FreshTTFT.Mean*1000, 1), fixed(tu.TTFT.Mean/tu.FreshTTFT.Mean, 2))
	if md := Markdown(res); !strings.Contains(md, "turn ÷ fresh") || !strings.Contains(md, row) {
		t.Errorf("table has no ratio column or no %q:\n%s", row, md)
	}
	o.Turns, o.TurnBaseline = 1, true
	var oe *OptionsError
	if _, err := Run(t.Context(), o); !errors.As(err, &oe) || oe.Field != "turn-baseline" {
		t.Errorf("a baseline without turns: %v", err)
	}
}

// TestFitsContext: a run the server's max_model_len cannot hold is refused
// before anything is sent, naming the flags and the numbers; one that fits
// exactly runs.
func TestFitsContext(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(o *Options)
		wantErr string // the OptionsError's field; "" runs
	}{
		{"fits exactly", func(o *Options) { o.PromptTokens, o.OutputTokens = []int{92}, 8 }, ""},
		{"prompt plus output", func(o *Options) { o.PromptTokens, o.OutputTokens = []int{16, 93}, 8 }, "prompt-tokens"},
		{"turns", func(o *Options) { o.Turns, o.TurnTokens = 4, 20 }, "turns"},     // 16 + 8 + 3×(8+20) = 108
		{"turns that fit", func(o *Options) { o.Turns, o.TurnTokens = 3, 20 }, ""}, // 16 + 8 + 2×28 = 80
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, url := newFake(t, "llama.cpp")
			f.maxModelLen = 100
			o := quick(url)
			o.MaxRequests = 2
			tt.edit(&o)
			res, err := Run(t.Context(), o)
			var oe *OptionsError
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr == "":
				if res.Server.MaxModelLen != 100 {
					t.Errorf("max_model_len %d, the server says 100", res.Server.MaxModelLen)
				}
			case !errors.As(err, &oe) || oe.Field != tt.wantErr || !strings.Contains(oe.Msg, "max_model_len 100"):
				t.Fatalf("err %v, want an OptionsError for --%s naming max_model_len 100", err, tt.wantErr)
			case f.attempts != 0:
				t.Errorf("%d requests sent before the refusal", f.attempts)
			}
		})
	}
}

// TestAllFailed: a run whose every request failed says so (the command
// exits 1 on it); one request answered is enough not to.
func TestAllFailed(t *testing.T) {
	f, url := newFake(t, "llama.cpp")
	f.closeAll = true
	res, err := Run(t.Context(), quick(url))
	if err != nil {
		t.Fatal(err)
	}
	if !res.AllFailed() {
		t.Errorf("every request failed, AllFailed says no: %+v", res.Cells[0])
	}
	_, url = newFake(t, "llama.cpp")
	if res, err = Run(t.Context(), quick(url)); err != nil || res.AllFailed() {
		t.Errorf("a healthy run: AllFailed %v, err %v", res != nil && res.AllFailed(), err)
	}
}

// TestTurnRowsEmpty: a turn no request reached (a window too short for
// it) has no row in the turn table; the turns reached have theirs.
func TestTurnRowsEmpty(t *testing.T) {
	res := &Result{Settings: Settings{Turns: 3}, Cells: []Cell{{Concurrency: 2, PromptTokens: 16, Turns: []Turn{
		{Turn: 1, Requests: 4, PromptTokensMean: 16}, {Turn: 2, Requests: 2, PromptTokensMean: 40}, {Turn: 3},
	}}}}
	md := Markdown(res)
	if !strings.Contains(md, "| 2 | 16 | 2 | 2 |") || strings.Contains(md, "| 2 | 16 | 3 |") {
		t.Errorf("turn table:\n%s", md)
	}
}

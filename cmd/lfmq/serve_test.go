package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/evidence"
)

func TestServeFlags(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, []byte("s3cret\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	tests := []struct {
		name, args, wantErr string
		check               func(*serveOptions) bool
	}{
		{"defaults", "--model m", "", func(o *serveOptions) bool {
			return o.Host == "127.0.0.1" && o.Port == 8000 && o.MaxNumSeqs == 16 && o.MaxQueue == 64 && o.PrefillChunk == 512 &&
				o.ShutdownTimeout == 30*time.Second && *o.defaults.Temperature == 0.1 && *o.defaults.TopK == 50 && o.key == "" &&
				o.Speculate == "on" && o.SpecTokens == 4 && o.LookupMin == 3 && o.LookupMax == 5 && o.PrefixCaching == "on"
		}},
		{"preset and defaults", `--model m --sampling-preset agentic --default-sampling {"min_p":0.1,"max_new_tokens":64}`, "", func(o *serveOptions) bool {
			return *o.defaults.Temperature == 0.6 && *o.defaults.TopP == 0.95 && *o.defaults.MinP == 0.1 && *o.defaults.MaxNewTokens == 64
		}},
		{"key file", "--model m --api-key-file " + keyFile + " --cors-origin http://a --cors-origin http://b", "", func(o *serveOptions) bool {
			return o.key == "s3cret" && len(o.CORSOrigins) == 2
		}},
		{"speculation", "--model m --speculate off --spec-tokens 7 --lookup-min 2 --lookup-max 6 --prefix-caching off", "", func(o *serveOptions) bool {
			return o.Speculate == "off" && o.SpecTokens == 7 && o.LookupMin == 2 && o.LookupMax == 6 && o.PrefixCaching == "off"
		}},
		{"kv cache dtype", "--model m --kv-cache-dtype bf16", "", func(o *serveOptions) bool { return o.KVCacheDType == "bf16" }},
		{"bad kv cache dtype", "--model m --kv-cache-dtype f16", "--kv-cache-dtype", nil},
		{"speculate value", "--model m --speculate yes", "--speculate", nil},
		{"spec tokens", "--model m --spec-tokens 8", "--spec-tokens 8", nil},
		{"lookup", "--model m --lookup-min 4 --lookup-max 3", "--lookup-min 4", nil},
		{"prefix value", "--model m --prefix-caching maybe", "--prefix-caching", nil},
		{"no model", "--port 1", "--model is required", nil},
		{"unknown preset", "--model m --sampling-preset wild", "unknown sampling preset", nil},
		{"unknown default key", `--model m --default-sampling {"temp":1}`, "temp: unknown key", nil},
		{"bad default value", `--model m --default-sampling {"top_p":2}`, "top_p", nil},
		{"both keys", "--model m --api-key a --api-key-file " + keyFile, "exclude each other", nil},
		{"empty key file", "--model m --api-key-file " + empty, "is empty", nil},
		{"port", "--model m --port 70000", "--port", nil},
		{"seqs", "--model m --max-num-seqs 0", "--max-num-seqs", nil},
		{"chunk", "--model m --prefill-chunk 0", "--prefill-chunk", nil},
		{"log level", "--model m --log-level loud", "--log-level", nil},
		{"args", "--model m extra", "takes no arguments", nil},
		{"origins", "--model m --cors-origin * --cors-origin null --cors-origin https://app.example.com --cors-origin http://localhost:5173 --cors-origin chrome-extension://abcdef --cors-origin http://[::1]:8080", "", func(o *serveOptions) bool {
			return len(o.CORSOrigins) == 6
		}},
		{"origin with a trailing slash", "--model m --cors-origin https://app.example.com/", `a browser sends this origin as "https://app.example.com"`, nil},
		{"origin with a path", "--model m --cors-origin http://localhost:3000/chat", `as "http://localhost:3000"`, nil},
		{"origin with the default port", "--model m --cors-origin https://app.example.com:443", `as "https://app.example.com"`, nil},
		{"origin in capitals", "--model m --cors-origin HTTPS://App.Example.com", `as "https://app.example.com"`, nil},
		{"origin without a scheme", "--model m --cors-origin app.example.com", "is not an origin: want scheme://host[:port]", nil},
		{"origin with a user", "--model m --cors-origin https://me@app.example.com", "is not an origin", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams()
			var got *serveOptions
			err := executeWith(ios, newServeCmd(ios, func(o *serveOptions) error { got = o; return nil }), append([]string{"serve"}, strings.Fields(tt.args)...)...)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(got) {
				t.Errorf("options %+v", *got)
			}
		})
	}
	t.Setenv("LFMQ_API_KEY", "from-env")
	ios, _, _ := testStreams()
	var got *serveOptions
	if err := executeWith(ios, newServeCmd(ios, func(o *serveOptions) error { got = o; return nil }), "serve", "--model", "m"); err != nil || got.key != "from-env" {
		t.Errorf("LFMQ_API_KEY: %v %+v", err, got)
	}
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServe runs 'lfmq serve' in process and waits for /health; the
// returned function stops it (as SIGTERM does) and returns its exit code.
func startServe(t *testing.T, args ...string) (string, func() int) {
	t.Helper()
	base, stop, _ := startServeLog(t, args...)
	return base, stop
}

// startServeLog is startServe that also returns the server's log, to be
// read only once stop has returned.
func startServeLog(t *testing.T, args ...string) (string, func() int, *bytes.Buffer) {
	t.Helper()
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	ios, _, stderr := testStreams()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"serve", "--port", fmt.Sprint(port)}, args...), ios)
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case c := <-code:
			t.Fatalf("serve exited with %d: %s", c, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready: %s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var once sync.Once
	var exit int
	stop := func() int {
		once.Do(func() {
			cancel()
			select {
			case exit = <-code:
			case <-time.After(60 * time.Second):
				t.Fatal("serve did not stop")
			}
		})
		return exit
	}
	t.Cleanup(func() { stop() })
	return base, stop, stderr
}

// TestServedScoreEqualsInProcess: 'lfmq score' of the RTN fixture
// checkpoint served over HTTP, while 8 chat clients keep the batch full,
// gives the same figures (every field, every corpus) as scoring the same
// directory in process; the receipts record the URL and the identity the
// server reported, and both the default KV cache (bf16): no flag on
// either side. Then SIGTERM-style shutdown exits 0.
func TestServedScoreEqualsInProcess(t *testing.T) {
	dir := t.TempDir()
	rtn := filepath.Join(dir, "rtn")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", rtn, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	base, stop := startServe(t, "--model", rtn, "--api-key", "k", "--max-num-seqs", "9", "--prefill-chunk", "64")

	// Eight chat clients keep the batch full while scoring runs.
	ctx, stopClients := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var chats sync.Map
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("Tell me about item %d.", i)}}, "max_tokens": 40, "seed": c*1000 + i, "stream": i%2 == 0})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer k")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					chats.Store(fmt.Sprint(c, i), true)
				}
			}
		})
	}
	out := filepath.Join(dir, "ev.json")
	args := []string{"score", "--reference", tinyModel, "--candidate", "served=" + base, "--candidate", "dir=" + rtn, "--api-key", "k",
		"--corpus", "chat=" + filepath.Join(tinyCorpora, "chat.jsonl"), "--corpus", "code=" + filepath.Join(tinyCorpora, "code.jsonl"),
		"--max-records", "3", "--ctx", "256", "--out", out}
	ios, _, stderr = testStreams()
	code := run(context.Background(), args, ios)
	stopClients()
	wg.Wait()
	if code != 0 {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	n := 0
	chats.Range(func(any, any) bool { n++; return true })
	if n < 8 {
		t.Errorf("only %d chat requests completed alongside the scoring", n)
	}
	f, err := evidence.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]map[string]evidence.Result{}
	for _, r := range f.Results {
		if byName[r.Candidate] == nil {
			byName[r.Candidate] = map[string]evidence.Result{}
		}
		byName[r.Candidate][r.Corpus] = r
	}
	for _, corpus := range []string{"chat", "code", evidence.AllCorpora} {
		checkSameResult(t, corpus+": ", byName["served"][corpus], byName["dir"][corpus])
	}
	var served, local evidence.Checkpoint
	for _, c := range f.Receipts.Candidates {
		switch c.Name {
		case "served":
			served = c
		case "dir":
			local = c
		}
	}
	if served.URL != base || served.Identity != local.Identity || served.ManifestSHA256 != local.ManifestSHA256 || served.Format != "lfmq-1" || served.ServedModel != "rtn" || served.BinarySHA256 == "" {
		t.Errorf("served receipt %+v\nlocal %+v", served, local)
	}
	if served.KVCacheDType != "bf16" || local.KVCacheDType != "bf16" {
		t.Errorf("the default KV cache is recorded as %q (served) and %q (in process); want bf16 for both", served.KVCacheDType, local.KVCacheDType)
	}
	if strings.Contains(f.Receipts.Command, " k ") || strings.Contains(f.Receipts.Command, "--api-key k") {
		t.Errorf("the key is in the receipts: %s", f.Receipts.Command)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d after SIGTERM", code)
	}
}

// TestServedScoreKVCacheDType: a server with a BFP8 KV cache says so in
// /v1/models, and scoring it equals scoring in process with the same
// --kv-cache-dtype, digit for digit; both receipts record the format.
func TestServedScoreKVCacheDType(t *testing.T) {
	base, stop := startServe(t, "--model", tinyModel, "--kv-cache-dtype", "bfp8")
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			Lfmq struct {
				KVCacheDType string `json:"kv_cache_dtype"`
			} `json:"lfmq"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Data) != 1 || list.Data[0].Lfmq.KVCacheDType != "bfp8" {
		t.Fatalf("/v1/models: %+v, %v; want lfmq.kv_cache_dtype bfp8", list, err)
	}
	f := scoreFile(t, "score", "--reference", tinyModel, "--candidate", "served="+base, "--candidate", "dir="+tinyModel,
		"--corpus", "chat="+filepath.Join(tinyCorpora, "chat.jsonl"), "--max-records", "2", "--ctx", "128", "--kv-cache-dtype", "bfp8")
	rows := map[string]evidence.Result{}
	for _, r := range f.Results {
		if r.Corpus == "chat" {
			rows[r.Candidate] = r
		}
	}
	checkSameResult(t, "", rows["served"], rows["dir"])
	for _, c := range f.Receipts.Candidates {
		if c.KVCacheDType != "bfp8" {
			t.Errorf("candidate %s: kv_cache_dtype %q, want bfp8", c.Name, c.KVCacheDType)
		}
	}
	if !strings.Contains(f.Receipts.Command, "--kv-cache-dtype bfp8") {
		t.Errorf("command line %q lacks the KV cache format", f.Receipts.Command)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d after SIGTERM", code)
	}
}

// TestServeBadSetup: a directory that is not a checkpoint, a context
// longer than the model's and a KV pool shorter than the context are usage
// errors naming the flag; a port in use is a failure naming the address.
func TestServeBadSetup(t *testing.T) {
	port := freePort(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--model", t.TempDir(), "--port", "0"}, exitUsage, ": not a checkpoint directory (no config.json)"},
		{[]string{"--model", tinyModel, "--port", "0", "--max-model-len", "99999"}, exitUsage, "--max-model-len: 99999 is more than the model's context, 4096"},
		{[]string{"--model", tinyModel, "--port", "0", "--kv-pool-tokens", "10"}, exitUsage, "--kv-pool-tokens: 10 is less than the longest sequence, 4096 tokens"},
		{[]string{"--model", tinyModel, "--port", "0", "--kv-pool-tokens", "100", "--max-model-len", "512"}, exitUsage, "give at least 512, or lower --max-model-len"},
	} {
		ios, _, stderr := testStreams()
		if code := run(context.Background(), append([]string{"serve"}, tc.args...), ios); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, %s", tc.args, code, stderr)
		}
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"serve", "--model", tinyModel, "--port", fmt.Sprint(port)}, ios); code != exitFailure || !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("port in use: exit %d, %s", code, stderr)
	}
}

// TestServeCacheDirPersists: with --cache-dir the prefix cache survives a
// restart: the first request after it resumes from the saved blocks and
// answers as before.
func TestServeCacheDirPersists(t *testing.T) {
	cache := t.TempDir()
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("Tell me about the sea and the ships on it. ", 12) + `"}],"temperature":0,"max_tokens":12,"return_token_ids":true}`
	ask := func(base string) (cached int, ids []int) {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a struct {
			Choices []struct {
				TokenIDs []int `json:"token_ids"`
			} `json:"choices"`
			Usage struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || len(a.Choices) == 0 {
			t.Fatalf("%v %+v", err, a)
		}
		return a.Usage.Details.Cached, a.Choices[0].TokenIDs
	}
	base, stop := startServe(t, "--model", tinyModel, "--cache-dir", cache)
	c0, ids0 := ask(base)
	if code := stop(); code != 0 {
		t.Fatalf("first serve exited %d", code)
	}
	if _, err := os.Stat(filepath.Join(cache, "prefix-cache.lfmq")); err != nil {
		t.Fatalf("no saved cache: %v", err)
	}
	base, stop = startServe(t, "--model", tinyModel, "--cache-dir", cache)
	c1, ids1 := ask(base)
	stop()
	if c0 != 0 || c1 == 0 || !slices.Equal(ids0, ids1) {
		t.Errorf("cached tokens %d then %d after the restart; answers %v, %v", c0, c1, ids0, ids1)
	}
}

// TestServeChangedCheckpoint: the server hashes an lfmq-1 checkpoint while
// it serves; a changed byte shuts it down with exit 3.
func TestServeChangedCheckpoint(t *testing.T) {
	out := filepath.Join(t.TempDir(), "rtn")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", out, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	flipLastByte(t, filepath.Join(out, "global.safetensors"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ios, _, stderr = testStreams()
	if code := run(ctx, []string{"serve", "--model", out, "--port", "0"}, ios); code != exitMismatch || !strings.Contains(stderr.String(), "global.safetensors: hash mismatch") {
		t.Errorf("serve of a changed checkpoint: exit %d, want %d: %s", code, exitMismatch, stderr)
	}
}

// TestServeSecondSignal: the first SIGINT lets running requests finish
// (up to --shutdown-timeout), a second one stops at once with exit 1 and
// says so, rather than being swallowed while a person waits out the drain.
func TestServeSecondSignal(t *testing.T) {
	port := freePort(t)
	proc := startServeProcess(t, port, lfmqBinary(t), "serve", "--model", tinyModel, "--port", fmt.Sprint(port), "--shutdown-timeout", "5m", "--threads", "1")
	base, logs, exited := proc.base, proc.logs, proc.exited

	// A request that runs for the whole model context keeps the drain busy.
	go http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"The","max_tokens":4000,"min_tokens":4000,"temperature":0}`))
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s:\n%s", what, logs.String())
			}
		}
	}
	waitFor("running request", func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return strings.Contains(b.String(), "\nlfmq_num_requests_running 1")
	})
	proc.Process.Signal(os.Interrupt)
	waitFor("shutdown", func() bool { return strings.Contains(logs.String(), "shutting down") })
	proc.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !strings.Contains(logs.String(), "lfmq: interrupted again") {
			t.Errorf("second SIGINT: %v, want exit %d saying so:\n%s", err, exitFailure, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still draining 10s after a second SIGINT:\n%s", logs.String())
	}
}

// TestCompletion: shell completion offers the values of every closed
// choice, for serve and for launch, which passes serve's flags through.
func TestCompletion(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--sampling-preset", ""}, []string{"agentic", "greedy", "liquid", "none", "reasoning"}},
		{[]string{"launch", "--sampling-preset", ""}, []string{"agentic", "liquid"}},
		{[]string{"serve", "--speculate", ""}, []string{"on", "off"}},
		{[]string{"launch", "--prefix-caching", ""}, []string{"on", "off"}},
		{[]string{"serve", "--log-level", ""}, []string{"debug", "info", "warn", "error"}},
		{[]string{"quantize", "--experts", ""}, []string{"quantize", "keep"}},
		{[]string{"quantize", "--method", ""}, []string{"gptq", "rtn"}},
		{[]string{"bench", "--exact", ""}, []string{"both", "min_tokens", "ignore_eos", "none"}},
	}
	for _, tt := range tests {
		ios, stdout, stderr := testStreams()
		if code := run(context.Background(), append([]string{"__complete"}, tt.args...), ios); code != 0 {
			t.Fatalf("%v: exit %d %s", tt.args, code, stderr)
		}
		got := strings.Split(stdout.String(), "\n")
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("completing %v: %q missing from %q", tt.args, w, stdout)
			}
		}
	}
}

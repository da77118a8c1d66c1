package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
)

// longContextModel returns a copy of the tiny fixture model whose
// max_position_embeddings is ctx instead of 4,096 (longContextModelOf).
func longContextModel(t *testing.T, ctx int) string {
	t.Helper()
	return longContextModelOf(t, tinyModel, ctx)
}

// longContextModelOf returns a copy of the model in dir whose
// max_position_embeddings is ctx: the weights are the fixture's (linked,
// not copied). Its RoPE is the default one (an lfm3's, every attention
// kind's), with no scaling that depends on max_position_embeddings, so a
// position past the fixture's limit is computed exactly as the formula
// gives; the limit is the config's alone, and raising it in a copy is
// honest for a test of the engine's long-context machinery (not of the
// tiny model's quality there).
func longContextModelOf(t *testing.T, model string, ctx int) string {
	t.Helper()
	src, err := filepath.Abs(model)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "config.json" {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	rp, _ := cfg["rope_parameters"].(map[string]any)
	kinds := []map[string]any{rp}
	if cfg["model_type"] == "lfm3" { // one entry per attention kind
		kinds = kinds[:0]
		for _, v := range rp {
			kind, _ := v.(map[string]any)
			kinds = append(kinds, kind)
		}
	}
	for _, k := range kinds {
		if k["rope_type"] != "default" {
			t.Fatalf("the fixture's RoPE is %v; raising its context needs a RoPE without scaling", rp)
		}
	}
	cfg["max_position_embeddings"] = ctx
	out, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testLongRequest serves one request of n prompt tokens (and one new
// token) from a pool of poolTokens on the tiny model raised to n+1
// positions, then checks: the answer is the greedy token of an in-process
// forward of the same ids (when inProcess), the request's pages went to
// the prefix cache by reference (the pool holds exactly the cached blocks
// afterwards, which a copy would not fit beside the sequence's own pages
// when poolTokens is n+64), the same prompt again resumes all its whole
// blocks but the last token's and gives the same token, and the startup
// log states the pool's memory at most.
func testLongRequest(t *testing.T, n, poolTokens int, inProcess bool) {
	dir := longContextModel(t, n+1)
	base, stop, logBuf := startServeLog(t, "--model", dir, "--max-model-len", fmt.Sprint(n+1), "--kv-pool-tokens", fmt.Sprint(poolTokens), "--max-num-seqs", "1")
	ids := make([]int, n)
	for i := range ids {
		ids[i] = 20 + (i*7919)%8000
	}
	type answer struct {
		token, prompt, cached int
		logprob               float64   // the token's log-probability as served
		top                   []float64 // the top 20 log-probabilities as served
	}
	ask := func() answer {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"prompt": ids, "max_tokens": 1, "temperature": 0, "return_token_ids": true, "logprobs": 20})
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a struct {
			Choices []struct {
				TokenIDs []int `json:"token_ids"`
				Logprobs struct {
					TokenLogprobs []float64            `json:"token_logprobs"`
					TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage struct {
				Prompt  int `json:"prompt_tokens"`
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &a); err != nil || resp.StatusCode != 200 || len(a.Choices) != 1 || len(a.Choices[0].TokenIDs) != 1 {
			t.Fatalf("status %d: %v: %.500s", resp.StatusCode, err, raw)
		}
		lp := a.Choices[0].Logprobs
		if len(lp.TokenLogprobs) != 1 || len(lp.TopLogprobs) != 1 {
			t.Fatalf("logprobs %+v: %.500s", lp, raw)
		}
		var top []float64
		for _, v := range lp.TopLogprobs[0] {
			top = append(top, v)
		}
		return answer{a.Choices[0].TokenIDs[0], a.Usage.Prompt, a.Usage.Details.Cached, lp.TokenLogprobs[0], top}
	}
	first := ask()
	if first.prompt != n || first.cached != 0 {
		t.Fatalf("first request: %d prompt tokens, %d cached; want %d, 0", first.prompt, first.cached, n)
	}
	metrics := func() map[string]float64 {
		t.Helper()
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		out := map[string]float64{}
		for _, m := range regexp.MustCompile(`(?m)^lfmq_(kv_pool_\w+|prefix_cache_tokens) (\S+)$`).FindAllStringSubmatch(string(raw), -1) {
			out[m[1]], _ = strconv.ParseFloat(m[2], 64)
		}
		return out
	}
	// The prompt's n tokens were fed: n/64 whole blocks cached, and they
	// are the only pages in use once the request ended.
	blocks := float64(n / 64)
	if got := metrics(); got["prefix_cache_tokens"] != 64*blocks || got["kv_pool_pages_used"] != blocks || got["kv_pool_pages_shared"] != 0 ||
		got["kv_pool_pages"] != float64((poolTokens+63)/64) || got["kv_pool_pages_free"] != got["kv_pool_pages"]-blocks {
		t.Errorf("after the request: %v; want %v blocks cached and held once", got, blocks)
	}
	second := ask()
	if want := (n - 1) / 64 * 64; second.cached != want || second.token != first.token {
		t.Errorf("the same prompt again: %d tokens resumed (want %d), token %d (first %d)", second.cached, want, second.token, first.token)
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	// The log states the pool's memory at most, in the KV format.
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	perToken := 0
	for _, k := range cfg.LayerKinds {
		if k == config.Attention {
			perToken += 2 * cfg.NumKVHeads * cfg.HeadDim * 2 // bf16 keys and values, serve's default
		}
	}
	want := fmt.Sprintf("max_bytes=%d", (poolTokens+63)/64*64*perToken)
	if log := logBuf.String(); !strings.Contains(log, want) || !strings.Contains(log, "bytes_per_token="+fmt.Sprint(perToken)) {
		t.Errorf("the startup log does not state %s:\n%s", want, log)
	}
	if !inProcess {
		return
	}
	m, err := load.Load(dir, load.Options{MaxContext: n + 1, KVCacheDType: kvCacheDType(defaultKVCacheDType)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{ids}, model.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	best := 0
	for i, v := range out[0] {
		if v > out[0][best] {
			best = i
		}
	}
	if best != first.token {
		t.Errorf("served token %d; in process the greedy token is %d", first.token, best)
	}
	// The served log-probabilities are the in-process forward's, bit for
	// bit: the token's, and the top 20 (compared as values: the served map
	// is keyed by text, and texts may repeat).
	row := sample.LogProbs(nil, out[0])
	if float32(first.logprob) != row[first.token] {
		t.Errorf("served logprob %v; in process %v", first.logprob, row[first.token])
	}
	top := slices.Clone(row)
	slices.Sort(top)
	slices.Reverse(top)
	got := make([]float32, len(first.top))
	for i, v := range first.top {
		got[i] = float32(v)
	}
	slices.Sort(got)
	slices.Reverse(got)
	// Texts that repeat share a key: the served values are a subset of
	// the top 20, each one of them.
	for _, v := range got {
		if !slices.Contains(top[:20], v) {
			t.Errorf("served top log-probability %v is not among the in-process top 20 %v", v, top[:20])
		}
	}
	if len(got) == 0 || got[0] != top[0] {
		t.Errorf("served top %v; in process %v", got, top[:20])
	}
}

// TestServeLongRequest: one 32,768-token request (512 pages) served within
// a pool of 513 pages, its blocks cached by reference, its log-probabilities
// those of an in-process forward bit for bit. The 131,072-token version is
// TestServe131072 (-tags long, make test-long).
func TestServeLongRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("a 32,768-token prefill")
	}
	testLongRequest(t, 32768, 32768+64, true)
}

// TestServeBigPoolStarts: a 1,048,576-token pool is accepted on any
// machine (its pages are allocated when first used) and the startup log
// states what it would take full: 16,384 pages of 64 tokens of the tiny
// model's 768 bytes per token in the default bf16 cache, 768 MiB. For
// tiny-lfm3 (two full and two sliding layers of 2 KV heads of 32, window
// 32) the full layers take 2·2·64·2 = 512 bytes per token, and a sequence
// holds at most 11 window pages of the sliding layers' 64·512 = 32,768
// bytes (the positions from its window start less a page of slack, 31 +
// 64, to the end of a 512-token prefill chunk: 607 positions, on at most
// 10 + 1 pages), 360,448 bytes however long it grows; the pool would take
// 16,384 full and at most as many window pages, 1 GiB.
func TestServeBigPoolStarts(t *testing.T) {
	for _, c := range []struct {
		model string
		want  []string
	}{
		{tinyModel, []string{"tokens=1048576", "pages=16384", "kv_cache_dtype=bf16", "bytes_per_token=768", "max_bytes=805306368", `max="768.00 MiB"`}},
		{"../../testdata/tiny-lfm3/model", []string{"tokens=1048576", "pages=16384", "kv_cache_dtype=bf16", "bytes_per_token=512", "sliding_window=32",
			"window_pages_per_seq=11", "window_bytes_per_seq=360448", "max_bytes=1073741824", `max="1.00 GiB"`}},
	} {
		t.Run(filepath.Base(filepath.Dir(c.model)), func(t *testing.T) {
			_, stop, logBuf := startServeLog(t, "--model", c.model, "--kv-pool-tokens", "1048576")
			if code := stop(); code != 0 {
				t.Fatalf("serve exited %d", code)
			}
			for _, want := range c.want {
				if !strings.Contains(logBuf.String(), want) {
					t.Errorf("the startup log lacks %s:\n%s", want, logBuf)
				}
			}
		})
	}
}

//go:build long

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeLFM3262144 serves one 262,144-token request (262,128 prompt
// tokens and 16 generated ones, LFM3-1.7B's whole context) on the tiny
// LFM3 raised to 262,144 positions, in two fresh `lfmq serve` processes,
// and holds the two answers to the same hash: the generated ids and their
// log-probabilities as served. Each process's start-up log must state the
// KV memory the context needs. It is what a native LFM3 runtime's users
// check at 262,128 prompt tokens (issue 44); on the 2-core machines a
// prefill of that length takes tens of minutes, hence -tags long.
func TestServeLFM3262144(t *testing.T) {
	const ctx, prompt, gen = 262144, 262128, 16
	dir := longContextModelOf(t, lfm3Model, ctx)
	ids := make([]int, prompt)
	for i := range ids {
		ids[i] = 20 + (i*7919)%8000
	}
	body, _ := json.Marshal(map[string]any{"prompt": ids, "max_tokens": gen, "min_tokens": gen, "temperature": 0,
		"return_token_ids": true, "logprobs": 1})
	serveOnce := func(run int) string {
		t.Helper()
		port := freePort(t)
		proc := startServeProcess(t, port, lfmqBinary(t), "serve", "--model", dir, "--port", fmt.Sprint(port),
			"--max-model-len", fmt.Sprint(ctx), "--max-num-seqs", "1")
		defer proc.Process.Kill()
		base, logs := proc.base, proc.logs
		t0 := time.Now()
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var a struct {
			Choices []struct {
				TokenIDs []int `json:"token_ids"`
				Logprobs struct {
					TokenLogprobs []float64 `json:"token_logprobs"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(raw, &a); err != nil || resp.StatusCode != 200 || len(a.Choices) != 1 {
			t.Fatalf("run %d: status %d: %v: %.500s", run, resp.StatusCode, err, raw)
		}
		c := a.Choices[0]
		if a.Usage.Prompt != prompt || a.Usage.Completion != gen || len(c.TokenIDs) != gen || len(c.Logprobs.TokenLogprobs) != gen {
			t.Fatalf("run %d: %d prompt and %d completion tokens, %d ids, %d log-probabilities; want %d, %d",
				run, a.Usage.Prompt, a.Usage.Completion, len(c.TokenIDs), len(c.Logprobs.TokenLogprobs), prompt, gen)
		}
		if !regexp.MustCompile(`kv pool.*bytes_per_token=\d+`).MatchString(logs.String()) {
			t.Errorf("run %d: the start-up log does not state the KV memory:\n%s", run, logs.String())
		}
		out, _ := json.Marshal([]any{c.TokenIDs, c.Logprobs.TokenLogprobs})
		h := sha256.Sum256(out)
		t.Logf("run %d: %v for the request; ids %v; output sha256 %s", run, time.Since(t0).Round(time.Second), c.TokenIDs, hex.EncodeToString(h[:]))
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "kv pool") {
				t.Logf("run %d start-up: %s", run, line)
			}
		}
		return hex.EncodeToString(h[:])
	}
	if first, second := serveOnce(1), serveOnce(2); first != second {
		t.Errorf("the same request in a fresh process gave output %s, the first %s", second, first)
	}
}

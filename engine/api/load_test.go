package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/sched"
)

// TestLoad: 16 concurrent clients × 50 requests with random disconnects
// and a stream of bad requests: every request that was not cut off
// succeeds, bad ones get their 4xx, nothing leaks (goroutines, heap,
// scheduler state) and /metrics agrees with what was sent.
// About 20 s on 2 idle cores; it runs in make test.
func TestLoad(t *testing.T) {
	ts := newTestServer(t, Options{APIKey: "k"}, sched.Config{MaxNumSeqs: 8, MaxQueue: 64, MaxModelLen: 2048})
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	client := &http.Client{Transport: tr}
	ps := fixturePrompts(t)

	do := func(ctx context.Context, path string, body any, key string) (int, []byte, error) {
		data, _ := json.Marshal(body)
		if s, ok := body.(string); ok {
			data = []byte(s)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+path, bytes.NewReader(data))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}

	round := func(clients, perClient int, seed uint64) (sent, cancelled, failed int64, completion int64) {
		var wg sync.WaitGroup
		var nSent, nCancelled, nFailed, nTokens atomic.Int64
		for c := range clients {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(c)))
				for i := range perClient {
					p := ps[rng.IntN(len(ps))]
					body := map[string]any{"max_tokens": 8 + rng.IntN(40), "seed": i, "temperature": 0.7}
					path := "/v1/completions"
					if p.Kind == "chat" {
						path = "/v1/chat/completions"
						body["messages"] = p.Messages
						if len(p.Tools) > 0 && string(p.Tools) != "null" {
							body["tools"] = p.Tools
						}
					} else {
						body["prompt"] = p.InputIDs
					}
					stream := rng.IntN(2) == 0
					if stream {
						body["stream"] = true
						body["stream_options"] = map[string]any{"include_usage": true}
					}
					ctx, cancel := context.WithCancel(context.Background())
					cut := rng.IntN(5) == 0
					if cut {
						time.AfterFunc(time.Duration(rng.IntN(20))*time.Millisecond, cancel)
					}
					nSent.Add(1)
					status, out, err := do(ctx, path, body, "k")
					cancel()
					if cut && (err != nil || ctx.Err() != nil) {
						nCancelled.Add(1)
						continue
					}
					if err != nil || status != 200 || (stream && !bytes.HasSuffix(out, []byte("data: [DONE]\n\n"))) {
						nFailed.Add(1)
						t.Errorf("client %d request %d: %d %v %.300s", c, i, status, err, out)
						continue
					}
					nTokens.Add(int64(completionTokens(out, stream)))
				}
			})
		}
		// Bad requests alongside: each gets its 4xx.
		huge := make([]int, 100000)
		for i := range huge {
			huge[i] = 300
		}
		bad := []struct {
			path string
			body any
			key  string
			want int
		}{
			{"/v1/completions", `{"prompt":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, "k", 413},
			{"/v1/chat/completions", `{"messages":[`, "k", 400},
			{"/v1/chat/completions", `{"messages":"hi"}`, "k", 400},
			{"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": -1}, "k", 400},
			{"/v1/completions", map[string]any{"prompt": huge}, "k", 400},
			{"/v1/completions", map[string]any{"prompt": "hi", "model": "other"}, "k", 404},
			{"/v1/completions", map[string]any{"prompt": "hi"}, "", 401},
		}
		var badCount atomic.Int64
		wg.Go(func() {
			for range 3 {
				for _, b := range bad {
					status, out, err := do(context.Background(), b.path, b.body, b.key)
					badCount.Add(1)
					if err != nil || status != b.want {
						t.Errorf("bad request %s: %d %v %.200s, want %d", b.path, status, err, out, b.want)
					}
				}
			}
		})
		wg.Wait()
		return nSent.Load() + badCount.Load(), nCancelled.Load(), nFailed.Load(), nTokens.Load()
	}

	// idle waits for the server to go idle and returns its goroutines, its
	// heap and the part of it the prefix cache holds, which load grows
	// legitimately up to the KV pool (how far depends on which requests
	// the clients cut off).
	idle := func() (int, uint64, uint64) {
		tr.CloseIdleConnections()
		waitFor(t, func() bool { s := ts.sched.Stats(); return s.Running == 0 && s.Waiting == 0 && s.KVReservedTokens == 0 })
		time.Sleep(200 * time.Millisecond)
		// Twice: what sync.Pools held survives one collection (as their
		// victim cache) and would count as live.
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapAlloc, uint64(ts.sched.Stats().PrefixCachedBytes)
	}
	sent0, cancelled0, _, _ := round(4, 5, 1) // warm-up: pools and caches reach their size
	g0, h0, c0 := idle()
	start := time.Now()
	sent, cancelled, failed, tokens := round(16, 50, 2)
	elapsed := time.Since(start)
	g1, h1, c1 := idle()
	t.Logf("16 clients × 50 requests in %s: %d sent (incl. bad), %d cut off by the client, %d failed, %d completion tokens", elapsed.Round(time.Millisecond), sent, cancelled, failed, tokens)
	t.Logf("goroutines %d → %d, heap %.1f → %.1f MB, of which the prefix cache %.1f → %.1f MB", g0, g1, float64(h0)/1e6, float64(h1)/1e6, float64(c0)/1e6, float64(c1)/1e6)
	if failed > 0 {
		t.Errorf("%d requests failed that should have succeeded", failed)
	}
	if g1 > g0+4 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
	if c1 < c0 {
		c1 = c0 // the cache shrank: the heap had that much more room
	}
	if h1 > h0+(c1-c0)+16<<20 {
		t.Errorf("heap grew from %d to %d bytes, beyond the prefix cache's growth of %d", h0, h1, c1-c0)
	}
	// /metrics: every request counted once; the cancellations the server
	// saw are among those the clients cut off.
	total := 0.0
	for _, route := range []string{"/v1/completions", "/v1/chat/completions"} {
		for _, st := range []int{200, 400, 401, 404, 413} {
			total += metricValueOr(t, ts.URL, fmt.Sprintf(`lfmq_requests_total{route=%q,status="%d"}`, route, st))
		}
	}
	// A request cut off before it was sent never reaches the server.
	if all, cut := sent+sent0, cancelled+cancelled0; total > float64(all) || total < float64(all-cut) {
		t.Errorf("/metrics counts %v requests; sent %d, of which %d cut off by the client", total, all, cut)
	}
	if c := metricValue(t, ts.URL, "lfmq_request_cancellations_total"); c > float64(cancelled) {
		t.Errorf("%v cancellations counted, %d requests cut off", c, cancelled)
	}
	if gen := metricValue(t, ts.URL, "lfmq_generation_tokens_total"); gen < float64(tokens) {
		t.Errorf("generation tokens %v < the %d the answers report", gen, tokens)
	}
}

// completionTokens reads usage.completion_tokens from an answer or the
// usage chunk of a stream.
func completionTokens(body []byte, stream bool) int {
	if stream {
		i := bytes.LastIndex(body, []byte(`"usage":{`))
		if i < 0 {
			return 0
		}
		body = body[i+len(`"usage":`):]
		body = body[:bytes.IndexByte(body, '}')+1]
		var u struct {
			CompletionTokens int `json:"completion_tokens"`
		}
		json.Unmarshal(body, &u)
		return u.CompletionTokens
	}
	var a struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	json.Unmarshal(body, &a)
	return a.Usage.CompletionTokens
}

// metricValueOr is metricValue with 0 for an absent series.
func metricValueOr(t testing.TB, base, series string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

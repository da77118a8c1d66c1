package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer mimics the OpenAI routes of vLLM or llama.cpp's server, with
// the differences the bench must handle:
//
//   - vllm: /v1/models names no vocabulary size; min_tokens or ignore_eos
//     forbid an early stop; a chunk per token, with logprobs when asked,
//     where a token without text gets a chunk only with logprobs; usage
//     in a chunk of its own after the finish.
//   - llama.cpp: /v1/models has meta.n_vocab; only ignore_eos forbids an
//     early stop; log-probs only for logprobs > 0 (alternatives), in the
//     chat layout; usage in the chunk with the finish reason.
//
// It also fails on purpose: 429 with Retry-After for the first
// reject429 requests, a connection dropped after disconnectAt tokens, and
// with closeIdle a kept-alive connection closed, unanswered, when the
// next request arrives on it: what a server whose idle timeout ran out
// just as the client reused the connection does, made deterministic
// (every request after the first on a connection meets it). closeAll
// closes every connection on its first request, fresh ones too: a server
// that fails, not a stale connection.
type fakeServer struct {
	kind         string
	vocab        int
	tokenDelay   time.Duration
	prefillDelay time.Duration // before the first token, per prompt token not cached
	stopAt       int           // an early stop after this many tokens unless forbidden (0: none)
	disconnectAt int           // drop the connection after this many tokens (0: never)
	retryAfter   string
	reject429    atomic.Int32
	closeIdle    bool
	closeAll     bool
	maxModelLen  int // max_model_len in /v1/models (0: not said)

	mu       sync.Mutex
	attempts int
	byStatus map[int]int
	prompt   int // prompt tokens of requests answered 200
	tokens   int // tokens generated, all requests
	bodies   []map[string]any
	closed   int // requests whose connection was closed unanswered
	// seqs are the prompt+answer id sequences answered, the fake's
	// prefix cache: a prompt's cached tokens are its longest common
	// prefix with one of them, in whole blocks of cacheBlock tokens.
	seqs          [][]int
	queried, hits int
}

const cacheBlock = 16

// cachedPrefix returns how many of prompt's tokens the fake's prefix
// cache holds. Called with f.mu held.
func (f *fakeServer) cachedPrefix(prompt []int) int {
	best := 0
	for _, s := range f.seqs {
		n := 0
		for n < len(s) && n < len(prompt) && s[n] == prompt[n] {
			n++
		}
		best = max(best, n)
	}
	// A whole prompt is never served from the cache: its last token's
	// logits are needed.
	return min(best, len(prompt)-1) / cacheBlock * cacheBlock
}

// answerID is the id of token i of an answer to prompt: made up, but a
// function of both, so a conversation's context is what this fake said.
func (f *fakeServer) answerID(prompt []int, i int) int {
	return (len(prompt)*31 + i*7 + 3) % f.vocab
}

// connRequests counts the requests a connection has carried; the
// server's ConnContext puts one in each connection's context.
type connRequests struct{ n atomic.Int32 }

type connKey struct{}

func newFake(t testing.TB, kind string) (*fakeServer, string) {
	f := &fakeServer{kind: kind, vocab: 1000, byStatus: map[int]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", f.models)
	mux.HandleFunc("POST /v1/completions", f.completions)
	mux.HandleFunc("GET /metrics", f.metrics)
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, &connRequests{})
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return f, hs.URL
}

// closeUnanswered closes the request's connection without a byte of
// answer when closeIdle or closeAll says so, and reports whether it did.
func (f *fakeServer) closeUnanswered(w http.ResponseWriter, r *http.Request) bool {
	n := r.Context().Value(connKey{}).(*connRequests).n.Add(1)
	if !f.closeAll && (!f.closeIdle || n == 1) {
		return false
	}
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
	f.mu.Lock()
	f.closed++
	f.mu.Unlock()
	return true
}

func (f *fakeServer) models(w http.ResponseWriter, r *http.Request) {
	card := map[string]any{"id": "fake-" + f.kind, "object": "model", "owned_by": "vllm"}
	if f.kind == "llama.cpp" {
		card = map[string]any{"id": "fake.gguf", "object": "model", "owned_by": "llamacpp", "meta": map[string]any{"n_vocab": f.vocab}}
	}
	if f.maxModelLen > 0 {
		card["max_model_len"] = f.maxModelLen
	}
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{card}})
}

func (f *fakeServer) metrics(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(w, "# HELP vllm:generation_tokens_total Generated tokens.\n# TYPE vllm:generation_tokens_total counter\n")
	fmt.Fprintf(w, "vllm:generation_tokens_total{model_name=\"fake\"} %d\n", f.tokens)
	fmt.Fprintf(w, "vllm:prompt_tokens_total{model_name=\"fake\"} %d\n", f.prompt)
	fmt.Fprintf(w, "vllm:request_success_total{finished_reason=\"length\",model_name=\"fake\"} %d\n", f.byStatus[200])
	fmt.Fprintf(w, "vllm:prefix_cache_queries_total{model_name=\"fake\"} %d\n", f.queried)
	fmt.Fprintf(w, "vllm:prefix_cache_hits_total{model_name=\"fake\"} %d\n", f.hits)
	// A drafter that drafts 4 tokens every 4 generated and keeps 2.
	fmt.Fprintf(w, "vllm:spec_decode_num_drafts_total{model_name=\"fake\"} %d\n", f.tokens/4)
	fmt.Fprintf(w, "vllm:spec_decode_num_draft_tokens_total{model_name=\"fake\"} %d\n", 4*(f.tokens/4))
	fmt.Fprintf(w, "vllm:spec_decode_num_accepted_tokens_total{model_name=\"fake\"} %d\n", 2*(f.tokens/4))
	// lfmq's count of what its drafter's work took: 1.5 ms a token.
	fmt.Fprintf(w, "lfmq_drafter_pass_seconds_total %g\n", 0.001*float64(f.tokens))
	fmt.Fprintf(w, "lfmq_drafter_context_seconds_total %g\n", 0.0005*float64(f.tokens))
	fmt.Fprintf(w, "vllm:num_requests_running{model_name=\"fake\"} 3\n")
	fmt.Fprintf(w, "process_cpu_seconds_total 12.5\n")
}

func (f *fakeServer) status(code int) {
	f.mu.Lock()
	f.attempts++
	f.byStatus[code]++
	f.mu.Unlock()
}

func (f *fakeServer) completions(w http.ResponseWriter, r *http.Request) {
	if f.closeUnanswered(w, r) {
		return
	}
	var req struct {
		Prompt         []int `json:"prompt"`
		MaxTokens      int   `json:"max_tokens"`
		MinTokens      int   `json:"min_tokens"`
		IgnoreEOS      bool  `json:"ignore_eos"`
		Logprobs       *int  `json:"logprobs"`
		ReturnTokenIDs bool  `json:"return_token_ids"`
		StreamOptions  *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	var raw map[string]any
	body := json.NewDecoder(r.Body)
	var msg json.RawMessage
	if err := body.Decode(&msg); err != nil || json.Unmarshal(msg, &req) != nil || json.Unmarshal(msg, &raw) != nil {
		f.status(400)
		http.Error(w, `{"error":{"message":"bad JSON"}}`, 400)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, raw)
	f.mu.Unlock()
	if f.reject429.Add(-1) >= 0 {
		f.status(429)
		w.Header().Set("Retry-After", f.retryAfter)
		w.WriteHeader(429)
		w.Write([]byte(`{"error":{"message":"queue full","type":"rate_limit","code":"queue_full"}}`))
		return
	}
	for _, id := range req.Prompt {
		if id < 0 || id >= f.vocab {
			f.status(400)
			http.Error(w, `{"error":{"message":"token id outside the vocabulary"}}`, 400)
			return
		}
	}
	f.status(200)
	f.mu.Lock()
	f.prompt += len(req.Prompt)
	cached := f.cachedPrefix(req.Prompt)
	f.queried += len(req.Prompt)
	f.hits += cached
	f.mu.Unlock()
	time.Sleep(time.Duration(len(req.Prompt)-cached) * f.prefillDelay)
	answer := []int{}
	n := req.MaxTokens
	forbidden := req.IgnoreEOS || (f.kind == "vllm" && req.MinTokens >= n)
	if f.stopAt > 0 && !forbidden {
		n = min(n, f.stopAt)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	for i := range n {
		time.Sleep(f.tokenDelay)
		f.mu.Lock()
		f.tokens++
		f.mu.Unlock()
		if f.disconnectAt > 0 && i == f.disconnectAt {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		answer = append(answer, f.answerID(req.Prompt, i))
		text := fmt.Sprintf("t%d ", i)
		if f.kind == "vllm" && i%3 == 1 {
			text = "" // a byte of a character: no text of its own
		}
		choice := map[string]any{"index": 0, "text": text, "finish_reason": nil}
		switch {
		case req.Logprobs != nil && f.kind == "vllm":
			choice["logprobs"] = map[string]any{"tokens": []string{text}, "token_logprobs": []float64{-1}}
		case req.Logprobs != nil && *req.Logprobs > 0 && f.kind == "llama.cpp":
			// llama.cpp's server sends probabilities only for n_probs > 0,
			// in the chat layout.
			choice["logprobs"] = map[string]any{"content": []any{map[string]any{"token": text, "logprob": -1,
				"top_logprobs": []any{map[string]any{"token": text, "logprob": -1}}}}}
		case text == "":
			continue
		}
		if req.ReturnTokenIDs && f.kind == "vllm" {
			choice["token_ids"] = []int{answer[len(answer)-1]}
		}
		send(map[string]any{"object": "text_completion", "choices": []any{choice}})
	}
	f.mu.Lock()
	f.seqs = append(f.seqs, append(slices.Clone(req.Prompt), answer...))
	f.mu.Unlock()
	finish := "length"
	if n < req.MaxTokens {
		finish = "stop"
	}
	usage := map[string]any{"prompt_tokens": len(req.Prompt), "completion_tokens": n, "total_tokens": len(req.Prompt) + n,
		"prompt_tokens_details": map[string]int{"cached_tokens": cached}}
	last := map[string]any{"choices": []any{map[string]any{"index": 0, "text": "", "finish_reason": finish}}}
	if f.kind == "llama.cpp" {
		last["usage"] = usage
		send(last)
	} else {
		send(last)
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			send(map[string]any{"choices": []any{}, "usage": usage})
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

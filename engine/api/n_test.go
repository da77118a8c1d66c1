package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/sched"
)

// nChoice is what the n tests read of one choice: its text, token ids,
// log-probs and finish reason, from a response or summed over a stream's
// chunks of its index.
type nChoice struct {
	text      string
	reasoning string // chat's reasoning_content
	ids       []int
	lps       []float64
	finish    string
}

type nUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// nAnswer reads a chat or completions answer, streamed or not, into its
// choices by index and its usage.
func nAnswer(t *testing.T, body []byte, stream bool) (map[int]*nChoice, *nUsage) {
	t.Helper()
	type lp struct {
		Content       []struct{ Logprob float64 } `json:"content"`
		TokenLogprobs []*float64                  `json:"token_logprobs"`
	}
	type choice struct {
		Index   int
		Text    string
		Message struct {
			Content   *string
			Reasoning string `json:"reasoning_content"`
		}
		Delta struct {
			Content   *string
			Reasoning string `json:"reasoning_content"`
		}
		TokenIDs     []int   `json:"token_ids"`
		Logprobs     *lp     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	}
	type resp struct {
		Choices []choice
		Usage   *nUsage
	}
	var rs []resp
	if stream {
		for _, d := range sseData(body) {
			var r resp
			if err := json.Unmarshal([]byte(d), &r); err != nil {
				t.Fatalf("%v: %s", err, d)
			}
			rs = append(rs, r)
		}
	} else {
		var r resp
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		rs = append(rs, r)
	}
	out := map[int]*nChoice{}
	var usage *nUsage
	for _, r := range rs {
		if r.Usage != nil {
			usage = r.Usage
		}
		for _, c := range r.Choices {
			nc := out[c.Index]
			if nc == nil {
				nc = &nChoice{}
				out[c.Index] = nc
			}
			nc.text += c.Text
			nc.reasoning += c.Message.Reasoning + c.Delta.Reasoning
			for _, s := range []*string{c.Message.Content, c.Delta.Content} {
				if s != nil {
					nc.text += *s
				}
			}
			nc.ids = append(nc.ids, c.TokenIDs...)
			if c.Logprobs != nil {
				for _, e := range c.Logprobs.Content {
					nc.lps = append(nc.lps, e.Logprob)
				}
				for _, v := range c.Logprobs.TokenLogprobs {
					nc.lps = append(nc.lps, *v)
				}
			}
			if c.FinishReason != nil {
				nc.finish = *c.FinishReason
			}
		}
	}
	return out, usage
}

// TestNCandidates: n = 3 on both routes, streamed and not, greedy and
// seeded, with log-probs: candidate i answers as a request with n = 1
// and seed + i does (docs/serving.md §5), the same text, ids, log-probs
// and finish reason; greedy candidates are the fixture's greedy ids;
// usage counts the prompt once and every candidate's tokens.
func TestNCandidates(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{PrefillChunk: 48})
	ps := fixturePrompts(t)
	chatP, plainP := ps[4], ps[1] // chat_multiturn_unicode, plain_code
	const n, seed = 3, 41
	for _, route := range []string{"/v1/chat/completions", "/v1/completions"} {
		for _, greedy := range []bool{true, false} {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s greedy=%v stream=%v", strings.TrimPrefix(route, "/v1/"), greedy, stream)
				t.Run(name, func(t *testing.T) {
					p := plainP
					body := func(n, seed int) map[string]any {
						b := map[string]any{"n": n, "seed": seed, "max_tokens": 20, "return_token_ids": true}
						if route == "/v1/chat/completions" {
							b["messages"], b["logprobs"], b["top_logprobs"] = chatP.Messages, true, 2
						} else {
							b["prompt"], b["logprobs"] = p.InputIDs, 2
						}
						if greedy {
							b["temperature"] = 0
						} else {
							b["temperature"], b["top_k"] = 1.0, 40
						}
						return b
					}
					req := body(n, seed)
					if stream {
						req["stream"], req["stream_options"] = true, map[string]any{"include_usage": true}
					}
					status, got := post(t, ts.URL+route, req)
					if status != http.StatusOK {
						t.Fatalf("%d %s", status, got)
					}
					choices, usage := nAnswer(t, got, stream)
					if len(choices) != n {
						t.Fatalf("%d choices, want %d", len(choices), n)
					}
					wantUsage := nUsage{}
					texts := map[string]bool{}
					for i := range n {
						status, one := post(t, ts.URL+route, body(1, int(sched.CandidateSeed(seed, i))))
						if status != http.StatusOK {
							t.Fatalf("n = 1: %d %s", status, one)
						}
						want, u := nAnswer(t, one, false)
						wantUsage.PromptTokens = u.PromptTokens
						wantUsage.CompletionTokens += u.CompletionTokens
						c := choices[i]
						if c == nil {
							t.Fatalf("no choice %d", i)
						}
						w := want[0]
						if c.text != w.text || c.reasoning != w.reasoning || !slices.Equal(c.ids, w.ids) || !slices.Equal(c.lps, w.lps) || c.finish != w.finish {
							t.Errorf("choice %d: %q %v %v %s\nwant (n = 1, seed %d) %q %v %v %s", i, c.text, c.ids, c.lps, c.finish,
								sched.CandidateSeed(seed, i), w.text, w.ids, w.lps, w.finish)
						}
						if len(c.lps) != len(c.ids) && c.finish == "length" {
							t.Errorf("choice %d: %d log-probs for %d tokens", i, len(c.lps), len(c.ids))
						}
						if greedy && route == "/v1/completions" && !slices.Equal(c.ids, p.GreedyIDs[:len(c.ids)]) {
							t.Errorf("choice %d: %v, want the fixture's greedy %v", i, c.ids, p.GreedyIDs)
						}
						texts[c.reasoning+"|"+c.text] = true
					}
					if !greedy && len(texts) < 2 {
						t.Errorf("seeded candidates all wrote the same text: %v", texts)
					}
					if usage == nil || *usage != wantUsage {
						t.Errorf("usage %+v, want %+v (the prompt once, every candidate's tokens)", usage, wantUsage)
					}
				})
			}
		}
	}
}

// TestNPool: a bounded pool refuses n candidates that cannot fit (400
// naming the KV pool and n) while n = 1 of the same request fits, and a
// request whose candidates fit the pool exactly runs.
func TestNPool(t *testing.T) {
	ps := fixturePrompts(t)
	p := ps[3].InputIDs // 143 tokens: 2 whole pages and a partial one
	// n = 4, 8 tokens each: 3 pages + 3 candidates × 1 page of their own.
	ts := newTestServer(t, Options{}, sched.Config{KVPoolTokens: 6 * 64, PrefixCache: sched.PrefixConfig{Off: true}})
	for _, tc := range []struct {
		n, max int
		status int
	}{
		{4, 8, 200},
		{1, 200, 200},
		{4, 70, 400}, // 4 × 2 pages of their own + 2 shared = 10
	} {
		status, body := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": p, "n": tc.n, "max_tokens": tc.max, "temperature": 0})
		if status != tc.status {
			t.Fatalf("n = %d, max_tokens = %d: %d %s", tc.n, tc.max, status, body)
		}
		if status == 400 {
			a := decodeAnswer(t, body)
			if a.Error == nil || deref(a.Error.Param) != "n" || !strings.Contains(a.Error.Message, "--kv-pool-tokens") {
				t.Errorf("n = %d: %s", tc.n, body)
			}
			continue
		}
		if a := decodeAnswer(t, body); len(a.Choices) != tc.n {
			t.Errorf("n = %d: %d choices", tc.n, len(a.Choices))
		}
	}
	if v := metricValue(t, ts.URL, "lfmq_kv_pool_pages_used"); v != 0 {
		t.Errorf("kv_pool_pages_used %v after the requests, want 0", v)
	}
}

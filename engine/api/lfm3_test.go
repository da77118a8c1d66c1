package api

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sched"
)

// lfm3Model is the LFM3 fixture (model_type "lfm3", docs/lfm3.md): the MoE
// fixture's tokenizer, chat template and prompts, with sliding-window and
// gated attention.
const lfm3Model = "../../testdata/tiny-lfm3/model"

var (
	lfm3Once sync.Once
	lfm3Sess *generate.Session
	lfm3Err  error
)

// lfm3Session opens the LFM3 fixture once per test binary, with the float32
// KV cache its reference was computed in (load.Options' default).
func lfm3Session(t testing.TB) *generate.Session {
	t.Helper()
	lfm3Once.Do(func() { lfm3Sess, lfm3Err = generate.Open(lfm3Model, load.Options{}) })
	if lfm3Err != nil {
		t.Fatal(lfm3Err)
	}
	return lfm3Sess
}

// lfm3Prompt is one prompt of the LFM3 fixture's reference: the MoE
// fixture's input ids with the LFM3 model's own float32 greedy ids.
type lfm3Prompt struct {
	fixturePrompt
	// FirstStop is the index in GreedyIDs of the first stop token, or nil.
	FirstStop *int `json:"first_stop_token_index"`
}

func lfm3Prompts(t testing.TB) []lfm3Prompt {
	t.Helper()
	data, err := os.ReadFile("../../testdata/tiny-lfm3/reference/prompts.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct{ Prompts []lfm3Prompt }
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	moe := fixturePrompts(t)
	if len(ref.Prompts) != len(moe) {
		t.Fatalf("the LFM3 reference has %d prompts, the MoE fixture %d", len(ref.Prompts), len(moe))
	}
	// The LFM3 reference lists input ids and greedy ids; the messages and
	// tools they were rendered from are the MoE fixture's.
	for i := range ref.Prompts {
		p := &ref.Prompts[i]
		if p.Name != moe[i].Name || !slices.Equal(p.InputIDs, moe[i].InputIDs) {
			t.Fatalf("prompt %d: %s differs from the MoE fixture's %s", i, p.Name, moe[i].Name)
		}
		p.Messages, p.Tools = moe[i].Messages, moe[i].Tools
	}
	return ref.Prompts
}

// TestServeLFM3Reference: served greedy on the LFM3 fixture, every prompt
// past its sliding window included, is its independent float32 reference's
// greedy continuation up to the first stop token. Chat prompts go through
// /v1/chat/completions, so the fixture's chat template must render the
// reference's input ids; chat_tools' continuation,
// <|tool_call_start|>[math_eval(formula="616 - 711")]<|tool_call_end|>, is
// LFM2's Pythonic tool-call list (the LFM3 fixture's template is LFM2's) and
// comes back as a parsed call.
func TestServeLFM3Reference(t *testing.T) {
	ts := newTestServerOn(t, lfm3Session(t), Options{}, sched.Config{})
	for _, p := range lfm3Prompts(t) {
		t.Run(p.Name, func(t *testing.T) {
			want, finish := p.GreedyIDs, "length"
			if p.FirstStop != nil {
				want, finish = p.GreedyIDs[:*p.FirstStop], "stop"
			}
			var status int
			var body []byte
			if p.Kind == "chat" {
				req := map[string]any{"messages": p.Messages, "temperature": 0, "max_tokens": len(p.GreedyIDs), "return_token_ids": true}
				if len(p.Tools) > 0 && string(p.Tools) != "null" {
					req["tools"] = p.Tools
				}
				status, body = post(t, ts.URL+"/v1/chat/completions", req)
			} else {
				status, body = post(t, ts.URL+"/v1/completions", map[string]any{"prompt": p.InputIDs, "temperature": 0, "max_tokens": len(p.GreedyIDs), "return_token_ids": true})
			}
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, body)
			}
			a := decodeAnswer(t, body)
			if p.Kind == "chat" && !slices.Equal(a.PromptTokenIDs, p.InputIDs) {
				t.Errorf("prompt ids %v, want the reference's %v", a.PromptTokenIDs, p.InputIDs)
			}
			c := a.Choices[0]
			if !slices.Equal(c.TokenIDs, want) {
				t.Errorf("served greedy %v\nreference      %v", c.TokenIDs, want)
			}
			if p.Name == "chat_tools" {
				finish = "tool_calls"
				m := c.Message
				if m.Content != nil || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "math_eval" || m.ToolCalls[0].Function.Arguments != `{"formula":"616 - 711"}` {
					t.Errorf("tool call: %s", body)
				}
			}
			if c.FinishReason != finish {
				t.Errorf("finish_reason %q, want %q", c.FinishReason, finish)
			}
		})
	}
}

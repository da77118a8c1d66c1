package api

import (
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/sched"
)

// lfm3Model is the LFM3 fixture (model_type "lfm3", docs/lfm3.md): the MoE
// fixture's tokenizer, chat template and prompts, with sliding-window and
// gated attention.
const lfm3Model = "../../testdata/tiny-lfm3/model"

// lfm3Session opens the LFM3 fixture once per test binary, with the float32
// KV cache its reference was computed in (load.Options' default).
var lfm3Session = (&sharedSession{model: lfm3Model}).get

// lfm3Prompt is one prompt of the LFM3 fixture's reference: the MoE
// fixture's input ids with the LFM3 model's own float32 greedy ids.
type lfm3Prompt struct {
	fixturePrompt
	// FirstStop is the index in GreedyIDs of the first stop token, or nil.
	FirstStop *int `json:"first_stop_token_index"`
}

func lfm3Prompts(t testing.TB) []lfm3Prompt {
	t.Helper()
	prompts := readPrompts[lfm3Prompt](t, "../../testdata/tiny-lfm3/reference/prompts.json")
	moe := fixturePrompts(t)
	if len(prompts) != len(moe) {
		t.Fatalf("the LFM3 reference has %d prompts, the MoE fixture %d", len(prompts), len(moe))
	}
	// The LFM3 reference lists input ids and greedy ids; the messages and
	// tools they were rendered from are the MoE fixture's.
	for i := range prompts {
		p := &prompts[i]
		if p.Name != moe[i].Name || !slices.Equal(p.InputIDs, moe[i].InputIDs) {
			t.Fatalf("prompt %d: %s differs from the MoE fixture's %s", i, p.Name, moe[i].Name)
		}
		p.Messages, p.Tools = moe[i].Messages, moe[i].Tools
	}
	return prompts
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
			a, body := postGreedy(t, ts.URL, p.fixturePrompt, "reference")
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

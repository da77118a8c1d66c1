package api

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/sched"
)

// TestChatFollowUpResumesAnswer: an agent's next chat turn, sent as an
// OpenAI client does (the conversation, the answer's content as an
// assistant message, a new user message), renders through the template
// to the previous prompt's ids, the answer's ids and the <|im_end|> the
// answer stopped on, so the prefix cache supplies every whole block of
// what was fed: prompt and answer.
func TestChatFollowUpResumesAnswer(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	imEnd, ok := tinySession(t).Tokenizer.TokenID("<|im_end|>")
	if !ok {
		t.Fatal("the fixture's vocabulary has no <|im_end|>")
	}
	var msgs []map[string]any
	if err := json.Unmarshal(fixturePrompts(t)[5].Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		PromptTokenIDs []int `json:"prompt_token_ids"`
		Usage          struct {
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	ask := func(msgs []map[string]any, maxTokens int) (answer, []byte) {
		status, body := post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "temperature": 0, "max_tokens": maxTokens, "return_token_ids": true})
		if status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		var a answer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		return a, body
	}
	first, body := ask(msgs, 200)
	c := decodeAnswer(t, body).Choices[0]
	if c.FinishReason != "stop" || c.Message.Content == nil {
		t.Fatalf("the first turn ended with %q, content %v; the test needs an answer that stops", c.FinishReason, c.Message.Content)
	}
	next := append(slices.Clone(msgs), map[string]any{"role": "assistant", "content": *c.Message.Content},
		map[string]any{"role": "user", "content": "And then?"})
	second, _ := ask(next, 4)
	fed := slices.Concat(first.PromptTokenIDs, c.TokenIDs)
	if want := append(slices.Clone(fed), imEnd); len(second.PromptTokenIDs) <= len(want) || !slices.Equal(second.PromptTokenIDs[:len(want)], want) {
		t.Fatalf("the re-rendered conversation does not start with the ids fed and the stop:\nfed %v\ngot %v", want, second.PromptTokenIDs)
	}
	if want := len(fed) / 64 * 64; second.Usage.Details.Cached != want {
		t.Errorf("the follow-up resumed %d tokens; want %d, every whole block of the %d-token prompt and %d-token answer",
			second.Usage.Details.Cached, want, len(first.PromptTokenIDs), len(c.TokenIDs))
	}
}

package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
)

// chatAnswer is the part of a chat completion the tests read.
type chatAnswer struct {
	ID      string `json:"id"`
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			Reasoning        string  `json:"reasoning"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		TokenIDs     []int  `json:"token_ids"`
		Text         string `json:"text"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	PromptTokenIDs []int `json:"prompt_token_ids"`
	Error          *struct {
		Message, Type string
		Param, Code   *string
	} `json:"error"`
}

func decodeAnswer(t testing.TB, body []byte) chatAnswer {
	t.Helper()
	var a chatAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return a
}

// postGreedy asks the server at base for p's greedy continuation, as
// many tokens as p's greedy ids: a chat prompt through
// /v1/chat/completions with its messages and tools, whose prompt ids must
// be p's input ids (what names where p is from in the message), the others
// through /v1/completions with p's input ids. It returns the answer and
// its body.
func postGreedy(t *testing.T, base string, p fixturePrompt, what string) (chatAnswer, []byte) {
	t.Helper()
	var status int
	var body []byte
	if p.Kind == "chat" {
		req := map[string]any{"messages": p.Messages, "temperature": 0, "max_tokens": len(p.GreedyIDs), "return_token_ids": true}
		if len(p.Tools) > 0 && string(p.Tools) != "null" {
			req["tools"] = p.Tools
		}
		status, body = post(t, base+"/v1/chat/completions", req)
	} else {
		status, body = post(t, base+"/v1/completions", map[string]any{"prompt": p.InputIDs, "temperature": 0, "max_tokens": len(p.GreedyIDs), "return_token_ids": true})
	}
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	a := decodeAnswer(t, body)
	if p.Kind == "chat" && !slices.Equal(a.PromptTokenIDs, p.InputIDs) {
		t.Errorf("prompt ids %v, want the %s's %v", a.PromptTokenIDs, what, p.InputIDs)
	}
	return a, body
}

// TestGreedyEqualsGenerate: greedy output over HTTP equals lfmq generate's
// engine path (engine/generate) token for token on every fixture prompt,
// and both equal the fixture's independent greedy ids up to the first stop.
func TestGreedyEqualsGenerate(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	sess := tinySession(t)
	for _, p := range fixturePrompts(t) {
		t.Run(p.Name, func(t *testing.T) {
			res, err := sess.Run(context.Background(), p.InputIDs, generate.Options{MaxTokens: len(p.GreedyIDs), Params: greedyParams()})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Tokens, p.GreedyIDs[:len(res.Tokens)]) {
				t.Fatalf("generate %v differs from the fixture %v", res.Tokens, p.GreedyIDs)
			}
			a, _ := postGreedy(t, ts.URL, p, "fixture")
			if got := a.Choices[0].TokenIDs; !slices.Equal(got, res.Tokens) {
				t.Errorf("HTTP %v\ngenerate %v", got, res.Tokens)
			}
			wantFinish := "length"
			if res.Stopped {
				wantFinish = "stop"
				if len(a.Choices[0].Message.ToolCalls) > 0 {
					wantFinish = "tool_calls"
				}
			}
			if f := a.Choices[0].FinishReason; f != wantFinish {
				t.Errorf("finish_reason %q, want %q", f, wantFinish)
			}
			if a.Usage.PromptTokens != len(p.InputIDs) || a.Usage.TotalTokens != a.Usage.PromptTokens+a.Usage.CompletionTokens {
				t.Errorf("usage %+v", a.Usage)
			}
		})
	}
}

// TestPresetDefaults: a liquid server samples unless the request asks for
// greedy with both temperature 0 and repetition_penalty 1
// (docs/serving.md §2).
func TestPresetDefaults(t *testing.T) {
	liquid, _ := sample.Preset("liquid")
	ts := newTestServer(t, Options{Defaults: liquid}, sched.Config{})
	p := fixturePrompts(t)[0]
	res, err := tinySession(t).Run(context.Background(), p.InputIDs, generate.Options{MaxTokens: 32, Params: greedyParams()})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(extra map[string]any) []int {
		req := map[string]any{"prompt": p.InputIDs, "max_tokens": 32, "return_token_ids": true, "seed": 5}
		for k, v := range extra {
			req[k] = v
		}
		status, body := post(t, ts.URL+"/v1/completions", req)
		if status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		return decodeAnswer(t, body).Choices[0].TokenIDs
	}
	if got := ask(map[string]any{"temperature": 0, "repetition_penalty": 1}); !slices.Equal(got, res.Tokens) {
		t.Errorf("temperature 0 + repetition_penalty 1 is not greedy: %v", got)
	}
	// Temperature 0 alone keeps the preset's repetition penalty: greedy on
	// penalised logits, which for this prompt (it repeats "crown") differs.
	if got := ask(map[string]any{"temperature": 0}); slices.Equal(got, res.Tokens) {
		t.Errorf("the preset's repetition_penalty 1.05 was not applied: %v", got)
	}
}

// TestSeededBatchOfEight: seeded sampled requests give the same tokens
// alone and inside a batch of 8 mixed requests (chat, completions,
// streaming, different sampling settings).
func TestSeededBatchOfEight(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{PrefillChunk: 48})
	ps := fixturePrompts(t)
	type reqSpec struct {
		path string
		body map[string]any
	}
	var specs []reqSpec
	for i := range 8 {
		p := ps[i%len(ps)]
		body := map[string]any{"seed": 100 + i, "max_tokens": 10 + 4*i, "return_token_ids": true}
		switch i % 4 {
		case 0:
			body["temperature"], body["top_k"], body["repetition_penalty"] = 0.8, 50, 1.05
		case 1:
			body["temperature"], body["top_p"] = 0.6, 0.95
		case 2:
			body["temperature"], body["min_p"], body["presence_penalty"] = 1.1, 0.05, 0.4
		case 3:
			body["temperature"], body["frequency_penalty"] = 0.9, 0.3
		}
		if p.Kind == "chat" {
			body["messages"] = p.Messages
			if len(p.Tools) > 0 && string(p.Tools) != "null" {
				body["tools"] = p.Tools
			}
			if i%3 == 0 {
				body["stream"] = true
			}
			specs = append(specs, reqSpec{"/v1/chat/completions", body})
		} else {
			body["prompt"] = p.InputIDs
			specs = append(specs, reqSpec{"/v1/completions", body})
		}
	}
	run := func(s reqSpec) string {
		status, body := post(t, ts.URL+s.path, s.body)
		if status != 200 {
			t.Errorf("%d %s", status, body)
			return ""
		}
		if s.body["stream"] == true {
			// The stream's concatenated deltas stand for its tokens.
			return string(body)[strings.Index(string(body), `"delta"`):]
		}
		return fmt.Sprint(decodeAnswer(t, body).Choices[0].TokenIDs)
	}
	together := make([]string, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Go(func() { together[i] = run(s) })
	}
	wg.Wait()
	for i, s := range specs {
		alone := run(s)
		if s.body["stream"] == true {
			alone, together[i] = streamText(alone), streamText(together[i])
		}
		if alone != together[i] {
			t.Errorf("request %d: alone\n%s\nin a batch of 8\n%s", i, alone, together[i])
		}
	}
}

// sseData returns the payloads of an SSE body's data events, in order,
// without the closing [DONE].
func sseData(body []byte) []string {
	var out []string
	for _, ev := range strings.Split(string(body), "\n\n") {
		if data, ok := strings.CutPrefix(ev, "data: "); ok && data != "[DONE]" {
			out = append(out, data)
		}
	}
	return out
}

// streamText concatenates the content, reasoning and tool-call deltas of
// an SSE body (ids and timestamps differ between runs).
func streamText(body string) string {
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content          string
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
		}
		json.Unmarshal([]byte(data), &ch)
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content + "|" + c.Delta.ReasoningContent)
			for _, tc := range c.Delta.ToolCalls {
				b.WriteString(tc.Function.Name + tc.Function.Arguments)
			}
			if c.FinishReason != nil {
				b.WriteString("#" + *c.FinishReason)
			}
		}
	}
	return b.String()
}

// TestPromptLogprobsF32: the scoring request returns every prompt
// position's full-vocabulary log-probs as float32, bit-identical to
// sample.LogProbs of an in-process forward, while chat traffic shares the
// steps.
func TestPromptLogprobsF32(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{PrefillChunk: 100})
	sess := tinySession(t)
	ids := fixturePrompts(t)[5].InputIDs
	seq := sess.Model.NewSequence()
	logits, err := sess.Model.Forward(context.Background(), []*model.Sequence{seq}, [][]int{ids}, model.ForwardOptions{Logits: model.AllLogits})
	if err != nil {
		t.Fatal(err)
	}
	V := sess.Model.Config.VocabSize
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Tell me about the sea."}}, "max_tokens": 60, "seed": 1})
		})
	}
	status, body := post(t, ts.URL+"/v1/completions", map[string]any{"model": "tiny", "prompt": ids, "max_tokens": 0, "echo": true, "prompt_logprobs": -1, "temperature": 0})
	wg.Wait()
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var resp struct {
		Choices []struct {
			Text           string    `json:"text"`
			FinishReason   string    `json:"finish_reason"`
			PromptLogprobs any       `json:"prompt_logprobs"`
			F32            []*string `json:"prompt_logprobs_f32"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	if len(c.F32) != len(ids) || c.F32[0] != nil || c.PromptLogprobs != nil {
		t.Fatalf("%d rows (first %v), prompt_logprobs %v", len(c.F32), c.F32[0], c.PromptLogprobs)
	}
	want, _ := sess.Tokenizer.Decode(ids)
	if c.Text != strings.NewReplacer("<|startoftext|>", "", "<|im_start|>", "", "<|im_end|>", "").Replace(want) || c.FinishReason != "length" || resp.Usage.CompletionTokens != 0 || resp.Usage.PromptTokens != len(ids) {
		t.Errorf("text %q finish %q usage %+v", c.Text, c.FinishReason, resp.Usage)
	}
	var row []float32
	for j := 1; j < len(ids); j++ {
		raw, err := base64.StdEncoding.DecodeString(*c.F32[j])
		if err != nil || len(raw) != 4*V {
			t.Fatalf("row %d: %d bytes, %v", j, len(raw), err)
		}
		row = sample.LogProbs(row, logits[0][(j-1)*V:j*V])
		for v := range V {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*v:])); got != row[v] {
				t.Fatalf("row %d id %d: %v, want %v", j, v, got, row[v])
			}
		}
	}

	// Top-N prompt log-probs (vLLM's form): the prompt token's entry with
	// its rank, plus the top N.
	status, body = post(t, ts.URL+"/v1/completions", map[string]any{"prompt": ids[:5], "max_tokens": 1, "prompt_logprobs": 2, "temperature": 0})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var top struct {
		Choices []struct {
			PromptLogprobs []map[string]struct {
				Logprob float64
				Rank    int
			} `json:"prompt_logprobs"`
		}
	}
	json.Unmarshal(body, &top)
	pl := top.Choices[0].PromptLogprobs
	if len(pl) != 5 || pl[0] != nil || len(pl[1]) < 2 || len(pl[1]) > 3 {
		t.Fatalf("prompt_logprobs %+v", pl)
	}
	row = sample.LogProbs(row, logits[0][:V])
	e := pl[1][fmt.Sprint(ids[1])]
	if e.Logprob != float64(row[ids[1]]) || e.Rank < 1 {
		t.Errorf("prompt token entry %+v, want logprob %v", e, row[ids[1]])
	}
}

// TestStopStrings: a stop string ends generation and is not returned; the
// text before it is.
func TestStopStrings(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	p := fixturePrompts(t)[0] // greedy: " the\nwarger, and the sold of the crown of the crown…"
	status, body := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": p.InputIDs, "temperature": 0, "max_tokens": 32, "stop": []string{"crown"}})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	a := decodeAnswer(t, body)
	if got := a.Choices[0].Text; got != " the\nwarger, and the sold of the " || a.Choices[0].FinishReason != "stop" {
		t.Errorf("text %q finish %q", got, a.Choices[0].FinishReason)
	}
	// Streaming gives the same text.
	status, body = post(t, ts.URL+"/v1/completions", map[string]any{"prompt": p.InputIDs, "temperature": 0, "max_tokens": 32, "stop": "crown", "stream": true})
	var text strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
			var ch struct{ Choices []struct{ Text string } }
			json.Unmarshal([]byte(d), &ch)
			if len(ch.Choices) > 0 {
				text.WriteString(ch.Choices[0].Text)
			}
		}
	}
	if status != 200 || text.String() != " the\nwarger, and the sold of the " {
		t.Errorf("stream: %d %q", status, text.String())
	}
}

// TestErrors: bad requests get the status, type, code and param of
// docs/serving.md §5, and nothing else is affected.
func TestErrors(t *testing.T) {
	ts := newTestServer(t, Options{APIKey: "sekret"}, sched.Config{MaxModelLen: 512})
	auth := []string{"Authorization", "Bearer sekret"}
	user := `[{"role":"user","content":"hi"}]`
	huge := make([]int, 100000)
	for i := range huge {
		huge[i] = 300 + i%7000
	}
	hugeBody, _ := json.Marshal(map[string]any{"prompt": huge, "max_tokens": 4})
	tools := make([]any, maxTools+1)
	for i := range tools {
		tools[i] = map[string]any{"type": "function", "function": map[string]any{"name": fmt.Sprintf("f%d", i)}}
	}
	toolsBody, _ := json.Marshal(map[string]any{"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`), "tools": tools})
	tests := []struct {
		name, path, body string
		header           []string
		status           int
		typ, code, param string
	}{
		{"no key", "/v1/chat/completions", `{"messages":` + user + `}`, nil, 401, "authentication_error", "invalid_api_key", ""},
		{"wrong key", "/v1/chat/completions", `{"messages":` + user + `}`, []string{"Authorization", "Bearer nope"}, 401, "authentication_error", "invalid_api_key", ""},
		{"basic scheme", "/v1/chat/completions", `{"messages":` + user + `}`, []string{"Authorization", "Basic sekret"}, 401, "authentication_error", "invalid_api_key", ""},
		{"key without scheme", "/v1/chat/completions", `{"messages":` + user + `}`, []string{"Authorization", "sekret"}, 401, "authentication_error", "invalid_api_key", ""},
		{"invalid JSON", "/v1/chat/completions", `{"messages": [`, auth, 400, "invalid_request_error", "", ""},
		{"not an object", "/v1/chat/completions", `[1,2]`, auth, 400, "invalid_request_error", "", ""},
		{"empty body", "/v1/completions", ``, auth, 400, "invalid_request_error", "", ""},
		{"null body chat", "/v1/chat/completions", `null`, auth, 400, "invalid_request_error", "", ""},
		{"null body completions", "/v1/completions", ` null `, auth, 400, "invalid_request_error", "", ""},
		{"wrong type", "/v1/chat/completions", `{"messages":` + user + `,"temperature":"hot"}`, auth, 400, "invalid_request_error", "", "temperature"},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"hi"}]}`, auth, 400, "invalid_request_error", "", "messages"},
		{"missing content", "/v1/chat/completions", `{"messages":[{"role":"system","content":"a"},{"role":"user"}]}`, auth, 400, "invalid_request_error", "", "messages"},
		{"empty content", "/v1/chat/completions", `{"messages":[{"role":"user","content":""}]}`, auth, 400, "invalid_request_error", "", "messages"},
		{"negative max_tokens", "/v1/chat/completions", `{"messages":` + user + `,"max_tokens":-5}`, auth, 400, "invalid_request_error", "", "max_tokens"},
		{"zero max_tokens chat", "/v1/chat/completions", `{"messages":` + user + `,"max_tokens":0}`, auth, 400, "invalid_request_error", "", "max_tokens"},
		{"temperature range", "/v1/chat/completions", `{"messages":` + user + `,"temperature":2.5}`, auth, 400, "invalid_request_error", "", "temperature"},
		{"top_p range", "/v1/completions", `{"prompt":"hi","top_p":0}`, auth, 400, "invalid_request_error", "", "top_p"},
		{"logit_bias id", "/v1/completions", `{"prompt":"hi","logit_bias":{"99999":1}}`, auth, 400, "invalid_request_error", "", "logit_bias"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-4o","messages":` + user + `}`, auth, 404, "invalid_request_error", "model_not_found", "model"},
		{"no messages", "/v1/chat/completions", `{}`, auth, 400, "invalid_request_error", "", "messages"},
		{"bad role", "/v1/chat/completions", `{"messages":[{"content":"x"}]}`, auth, 400, "invalid_request_error", "", "messages"},
		{"image", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, auth, 400, "invalid_request_error", "unsupported_parameter", "messages"},
		{"tool_choice without tools", "/v1/chat/completions", `{"messages":` + user + `,"tool_choice":"auto"}`, auth, 400, "invalid_request_error", "", "tool_choice"},
		{"too many tools", "/v1/chat/completions", string(toolsBody), auth, 400, "invalid_request_error", "", "tools"},
		{"tool_choice required", "/v1/chat/completions", `{"messages":` + user + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, auth, 400, "invalid_request_error", "unsupported_parameter", "tool_choice"},
		{"n zero", "/v1/chat/completions", `{"messages":` + user + `,"n":0}`, auth, 400, "invalid_request_error", "", "n"},
		{"n over max_num_seqs", "/v1/completions", `{"prompt":"hi","n":17}`, auth, 400, "invalid_request_error", "", "n"},
		{"n with prompt_logprobs", "/v1/completions", `{"prompt":"hi","n":2,"prompt_logprobs":1}`, auth, 400, "invalid_request_error", "unsupported_parameter", "prompt_logprobs"},
		{"n with echoed logprobs", "/v1/completions", `{"prompt":"hi","n":2,"echo":true,"logprobs":1}`, auth, 400, "invalid_request_error", "unsupported_parameter", "echo"},
		{"best_of under n of 3", "/v1/completions", `{"prompt":"hi","n":3,"best_of":2}`, auth, 400, "invalid_request_error", "", "best_of"},
		{"stream_options alone", "/v1/chat/completions", `{"messages":` + user + `,"stream_options":{"include_usage":true}}`, auth, 400, "invalid_request_error", "", "stream_options"},
		{"top_logprobs alone", "/v1/chat/completions", `{"messages":` + user + `,"top_logprobs":2}`, auth, 400, "invalid_request_error", "", "top_logprobs"},
		{"top_logprobs range", "/v1/chat/completions", `{"messages":` + user + `,"logprobs":true,"top_logprobs":21}`, auth, 400, "invalid_request_error", "", "top_logprobs"},
		{"json mode", "/v1/chat/completions", `{"messages":` + user + `,"response_format":{"type":"json_object"}}`, auth, 400, "invalid_request_error", "unsupported_parameter", "response_format"},
		{"empty stop", "/v1/completions", `{"prompt":"hi","stop":[""]}`, auth, 400, "invalid_request_error", "", "stop"},
		{"null stop", "/v1/completions", `{"prompt":"hi","stop":["a",null]}`, auth, 400, "invalid_request_error", "", "stop"},
		{"min_tokens over max", "/v1/completions", `{"prompt":"hi","max_tokens":2,"min_tokens":3}`, auth, 400, "invalid_request_error", "", "min_tokens"},
		{"token out of range", "/v1/completions", `{"prompt":[1,99999]}`, auth, 400, "invalid_request_error", "", "prompt"},
		{"best_of", "/v1/completions", `{"prompt":"hi","best_of":2}`, auth, 400, "invalid_request_error", "unsupported_parameter", "best_of"},
		{"best_of under n", "/v1/completions", `{"prompt":"hi","best_of":0}`, auth, 400, "invalid_request_error", "", "best_of"},
		{"two prompts", "/v1/completions", `{"prompt":["a","b"]}`, auth, 400, "invalid_request_error", "unsupported_parameter", "prompt"},
		{"max_tokens over context", "/v1/completions", `{"prompt":"hi","max_tokens":600}`, auth, 400, "invalid_request_error", "context_length_exceeded", "prompt"},
		{"100k-token prompt", "/v1/completions", string(hugeBody), auth, 400, "invalid_request_error", "context_length_exceeded", "prompt"},
		{"body over the limit", "/v1/completions", `{"prompt":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, auth, 413, "invalid_request_error", "request_too_large", ""},
		{"unknown route", "/v1/embeddings", `{}`, auth, 404, "invalid_request_error", "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, ts.URL+tt.path, tt.body, tt.header...)
			a := decodeAnswer(t, body)
			if status != tt.status || a.Error == nil || a.Error.Type != tt.typ {
				t.Fatalf("%d %s, want %d %s", status, body, tt.status, tt.typ)
			}
			if code := deref(a.Error.Code); code != tt.code {
				t.Errorf("code %q, want %q (%s)", code, tt.code, body)
			}
			if param := deref(a.Error.Param); param != tt.param {
				t.Errorf("param %q, want %q (%s)", param, tt.param, body)
			}
			if a.Error.Message == "" {
				t.Error("empty message")
			}
			// A message's problem names the message and its field.
			if want, ok := map[string]string{"unknown role": `messages[0].role: "robot" is not a role`, "missing content": "messages[1].content: missing",
				"empty content": "messages[0].content: missing or empty"}[tt.name]; ok && !strings.Contains(a.Error.Message, want) {
				t.Errorf("message %q, want it to say %q", a.Error.Message, want)
			}
		})
	}
	// The counts are in the message.
	_, body := post(t, ts.URL+"/v1/completions", string(hugeBody), auth...)
	if msg := decodeAnswer(t, body).Error.Message; !strings.Contains(msg, "512") || !strings.Contains(msg, "100000") {
		t.Errorf("context message without the counts: %s", msg)
	}
	// Health and metrics need no key; the API still works.
	for _, path := range []string{"/health", "/metrics"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v", path, resp.StatusCode, err)
		}
		resp.Body.Close()
	}
	status, body := post(t, ts.URL+"/v1/chat/completions", `{"messages":`+user+`,"max_tokens":3}`, auth...)
	if status != 200 {
		t.Errorf("after the bad requests: %d %s", status, body)
	}
	// The scheme's name is case-insensitive.
	if status, body := post(t, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":1}`, "Authorization", "bearer sekret"); status != 200 {
		t.Errorf("lower-case bearer: %d %s", status, body)
	}
}

// TestRoutes: a model is retrieved by its name (which may hold a slash),
// a route's path with another method gets 405 with Allow, and what is
// not a route gets 404; each as an OpenAI error object.
func TestRoutes(t *testing.T) {
	ts := newTestServer(t, Options{APIKey: "sekret", ServedModelName: "LiquidAI/tiny-lfmq"}, sched.Config{})
	tests := []struct {
		name, method, path string
		status             int
		code, allow        string
	}{
		{"model by name", "GET", "/v1/models/LiquidAI/tiny-lfmq", 200, "", ""},
		{"model HEAD", "HEAD", "/v1/models/LiquidAI/tiny-lfmq", 200, "", ""},
		{"list with a slash", "GET", "/v1/models/", 200, "", ""},
		{"another model", "GET", "/v1/models/gpt-4o", 404, "model_not_found", ""},
		{"a prefix of the name", "GET", "/v1/models/LiquidAI", 404, "model_not_found", ""},
		{"delete a model", "DELETE", "/v1/models/LiquidAI/tiny-lfmq", 405, "method_not_allowed", "GET, HEAD"},
		{"GET chat", "GET", "/v1/chat/completions", 405, "method_not_allowed", "POST"},
		{"PUT completions", "PUT", "/v1/completions", 405, "method_not_allowed", "POST"},
		{"POST models", "POST", "/v1/models", 405, "method_not_allowed", "GET, HEAD"},
		{"POST health", "POST", "/health", 405, "method_not_allowed", "GET, HEAD"},
		{"unknown route", "GET", "/v1/embeddings", 404, "not_found", ""},
		{"trailing slash", "POST", "/v1/completions/", 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, ts.URL+tt.path, nil)
			req.Header.Set("Authorization", "Bearer sekret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow {
				t.Fatalf("%d Allow %q %s, want %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"), body, tt.status, tt.allow)
			}
			switch {
			case tt.method == "HEAD":
			case tt.status == 200:
				var card wire.Model
				if err := json.Unmarshal(body, &card); err != nil {
					t.Fatalf("%v: %s", err, body)
				}
				if tt.path == "/v1/models/" {
					var list wire.ModelList
					if err := json.Unmarshal(body, &list); err != nil || len(list.Data) != 1 {
						t.Fatalf("%v: %s", err, body)
					}
					card = list.Data[0]
				}
				if card.ID != "LiquidAI/tiny-lfmq" || card.Object != "model" || card.MaxModelLen == 0 {
					t.Errorf("card %s", body)
				}
			default:
				a := decodeAnswer(t, body)
				if a.Error == nil || a.Error.Type != "invalid_request_error" || deref(a.Error.Code) != tt.code || a.Error.Message == "" {
					t.Errorf("error %s, want code %q", body, tt.code)
				}
			}
		})
	}
	// The key is checked before the route: a wrong method without it is 401.
	req, _ := http.NewRequest("GET", ts.URL+"/v1/chat/completions", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("GET chat without the key: %d, want 401", resp.StatusCode)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestQueueFull: with one running sequence and a queue of one, a third
// request gets 429 queue_full with Retry-After; the others finish.
func TestQueueFull(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{MaxNumSeqs: 1, MaxQueue: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A long stream holds the only slot until cancelled.
	first := startStream(t, ctx, ts.URL, map[string]any{"prompt": "The sea", "max_tokens": 3000, "min_tokens": 3000, "temperature": 0, "stream": true})
	defer first.Body.Close()
	// The headers come before the scheduler admits the stream: wait until it
	// runs, or the next request could take the running slot's place in the
	// queue and the one after it would be refused instead of the third.
	waitFor(t, func() bool { st := ts.sched.Stats(); return st.Running == 1 && st.Waiting == 0 })
	second := make(chan int, 1)
	go func() {
		status, _ := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 2})
		second <- status
	}()
	waitFor(t, func() bool { return ts.sched.Stats().Waiting == 1 })
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":2}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := decodeAnswer(t, body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || a.Error == nil || a.Error.Type != "rate_limit_error" || deref(a.Error.Code) != "queue_full" {
		t.Errorf("%d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	cancel() // the client of the long stream goes away
	if s := <-second; s != 200 {
		t.Errorf("the queued request: %d", s)
	}
}

// startStream posts a streaming request and returns once the headers came.
func startStream(t testing.TB, ctx context.Context, base string, body map[string]any) *http.Response {
	t.Helper()
	data, _ := json.Marshal(body)
	path := "/v1/completions"
	if _, ok := body["messages"]; ok {
		path = "/v1/chat/completions"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(string(data)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	return resp
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestDisconnect: a client that goes away mid-stream, or before a
// non-streamed answer, is cancelled at the next step and its slot and state
// are freed; /metrics counts it (the second as status 499).
func TestDisconnect(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{MaxNumSeqs: 1})
	for _, body := range []map[string]any{
		{"prompt": "The sea", "max_tokens": 3000, "min_tokens": 3000, "temperature": 0, "stream": true},
		{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 3000, "min_tokens": 3000, "temperature": 0, "stream": true},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		resp := startStream(t, ctx, ts.URL, body)
		br := bufio.NewReader(resp.Body)
		br.ReadString('\n') // the first event arrived: the request runs
		cancel()
		resp.Body.Close()
		waitFor(t, func() bool {
			s := ts.sched.Stats()
			return s.Running == 0 && s.KVReservedTokens == 0 && s.KVUsedTokens == 0
		})
	}
	// A client that goes away before a non-streamed answer is counted as
	// 499 (client closed request): not as the 200 it never got, nor as the
	// 503 shutting_down of a cancellation by the server.
	ctx, cancel := context.WithCancel(context.Background())
	data, _ := json.Marshal(map[string]any{"prompt": "The sea", "max_tokens": 3000, "min_tokens": 3000, "temperature": 0})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/completions", bytes.NewReader(data))
	go func() {
		waitFor(t, func() bool { return ts.sched.Stats().Running == 1 })
		cancel()
	}()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Error("the cancelled request got an answer")
	}
	// The handler notices the closed connection on its own time.
	const closed = `lfmq_requests_total{route="/v1/completions",status="499"}`
	waitFor(t, func() bool { v, ok := findMetric(t, ts.URL, closed); return ok && v == 1 })
	status, _ := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 2})
	if status != 200 {
		t.Errorf("after the disconnects: %d", status)
	}
	if got := metricValue(t, ts.URL, "lfmq_request_cancellations_total"); got != 3 {
		t.Errorf("cancellations %v, want 3", got)
	}
	if _, ok := findMetric(t, ts.URL, `lfmq_requests_total{route="/v1/completions",status="503"}`); ok {
		t.Error("a client's disconnect was counted as a 503")
	}
	if got := metricValue(t, ts.URL, `lfmq_requests_total{route="/v1/completions",status="200"}`); got != 2 {
		t.Errorf("completions answered 200: %v, want 2 (the stream, and the request after)", got)
	}
}

// metricValue reads one sample from /metrics (the line "name value").
func metricValue(t testing.TB, base, series string) float64 {
	t.Helper()
	v, ok := findMetric(t, base, series)
	if !ok {
		t.Fatalf("no series %s in /metrics", series)
	}
	return v
}

// findMetric is metricValue for a series that may not be there (yet).
func findMetric(t testing.TB, base, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f, true
		}
	}
	return 0, false
}

// TestMetricsConsistent: /metrics agrees with what was sent and answered.
func TestMetricsConsistent(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	prompt, completion := 0, 0
	for i := range 5 {
		status, body := post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": fmt.Sprint("Count to ", i)}}, "max_tokens": 5 + i, "seed": i})
		if status != 200 {
			t.Fatal(status)
		}
		a := decodeAnswer(t, body)
		prompt += a.Usage.PromptTokens
		completion += a.Usage.CompletionTokens
	}
	post(t, ts.URL+"/v1/chat/completions", `{"messages": 3}`)
	checks := map[string]float64{
		`lfmq_requests_total{route="/v1/chat/completions",status="200"}`: 5,
		`lfmq_requests_total{route="/v1/chat/completions",status="400"}`: 1,
		"lfmq_prompt_tokens_total":                                       float64(prompt),
		"lfmq_generation_tokens_total":                                   float64(completion),
		"lfmq_num_requests_running":                                      0,
		"lfmq_kv_pool_reserved_tokens":                                   0,
		"lfmq_time_to_first_token_seconds_count":                         5,
	}
	for series, want := range checks {
		if got := metricValue(t, ts.URL, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// TestReasoningAndTools: the fixture's thinking prompt yields reasoning
// content (unterminated at max tokens: all reasoning, finish length); its
// tools prompt yields a parsed tool call (finish tool_calls) with content
// null; include_reasoning false drops the reasoning.
func TestReasoningAndTools(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	ps := fixturePrompts(t)
	think, tools := ps[4], ps[3]
	status, body := post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": think.Messages, "temperature": 0, "max_tokens": 32})
	a := decodeAnswer(t, body)
	m := a.Choices[0].Message
	if status != 200 || !strings.HasPrefix(m.ReasoningContent, "37 * 80") || m.Reasoning != m.ReasoningContent || deref(m.Content) != "" || a.Choices[0].FinishReason != "length" {
		t.Errorf("thinking: %d %s", status, body)
	}
	_, body = post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": think.Messages, "temperature": 0, "max_tokens": 32, "include_reasoning": false})
	if m := decodeAnswer(t, body).Choices[0].Message; m.ReasoningContent != "" || a.Usage.CompletionTokens != 32 {
		t.Errorf("include_reasoning false: %s", body)
	}
	status, body = post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": tools.Messages, "tools": tools.Tools, "temperature": 0, "max_tokens": 32})
	a = decodeAnswer(t, body)
	m = a.Choices[0].Message
	if status != 200 || m.Content != nil || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "calculate" ||
		m.ToolCalls[0].Function.Arguments != `{"expression":"619 + 419"}` || a.Choices[0].FinishReason != "tool_calls" || !strings.HasPrefix(m.ToolCalls[0].ID, "chatcmpl-tool-") {
		t.Errorf("tools: %d %s", status, body)
	}
	// tool_choice none: no tools rendered, no parsing.
	_, body = post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": tools.Messages, "tools": tools.Tools, "tool_choice": "none", "temperature": 0, "max_tokens": 32})
	if a := decodeAnswer(t, body); len(a.Choices[0].Message.ToolCalls) != 0 || a.Choices[0].FinishReason == "tool_calls" {
		t.Errorf("tool_choice none: %s", body)
	}
}

// TestToolHistory: an assistant turn's tool_calls sent back by a client
// are rendered as the model wrote them (<|tool_call_start|>[…]
// <|tool_call_end|> as control tokens) for the fixture's LFM2 template,
// so the next turn's prompt holds exactly the tokens it generated.
func TestToolHistory(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	tools := fixturePrompts(t)[3]
	status, body := post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": tools.Messages, "tools": tools.Tools, "temperature": 0, "max_tokens": 32, "return_token_ids": true})
	first := decodeAnswer(t, body)
	if status != 200 || len(first.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("%d %s", status, body)
	}
	var msgs []any
	json.Unmarshal(tools.Messages, &msgs)
	call := first.Choices[0].Message.ToolCalls[0]
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": call.ID, "type": "function",
			"function": map[string]any{"name": call.Function.Name, "arguments": call.Function.Arguments}}}},
		map[string]any{"role": "tool", "tool_call_id": call.ID, "content": `{"result": 1038}`})
	status, body = post(t, ts.URL+"/v1/chat/completions", map[string]any{"messages": msgs, "tools": tools.Tools, "temperature": 0, "max_tokens": 16, "return_token_ids": true})
	second := decodeAnswer(t, body)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	// The second prompt starts with the first prompt and the tokens the
	// model generated for the call (up to <|tool_call_end|>).
	gen := first.Choices[0].TokenIDs
	end := slices.Index(gen, 11)
	if end < 0 {
		t.Fatalf("no <|tool_call_end|> in %v", gen)
	}
	want := slices.Concat(first.PromptTokenIDs, gen[:end+1])
	if got := second.PromptTokenIDs; len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("second prompt\n%v\ndoes not continue the first turn\n%v", got, want)
	}
}

// TestEchoOnly: max_tokens 0 with echo returns the prompt without running
// the model; without echo (and without prompt_logprobs) it is refused.
func TestEchoOnly(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	status, body := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": "The sea is wide", "max_tokens": 0, "echo": true})
	a := decodeAnswer(t, body)
	if status != 200 || a.Choices[0].Text != "The sea is wide" || a.Usage.CompletionTokens != 0 || a.Choices[0].FinishReason != "length" {
		t.Errorf("%d %s", status, body)
	}
	if steps := ts.sched.Stats().Steps; steps != 0 {
		t.Errorf("%d engine steps for an echo", steps)
	}
	if status, body := post(t, ts.URL+"/v1/completions", map[string]any{"prompt": "x", "max_tokens": 0}); status != 400 {
		t.Errorf("max_tokens 0 without echo: %d %s", status, body)
	}
}

// TestCacheAndSpeculationOverHTTP: a repeated chat prompt reports its
// resumed tokens as usage.prompt_tokens_details.cached_tokens, gives the
// same answer, and /metrics counts the hits; speculation counters move.
func TestCacheAndSpeculationOverHTTP(t *testing.T) {
	checkCacheAndSpeculation(t, newTestServer(t, Options{}, sched.Config{}), fixturePrompts(t)[5].Messages)
}

// checkCacheAndSpeculation asks ts the chat long twice and returns the
// answer's token ids.
func checkCacheAndSpeculation(t *testing.T, ts *testServer, long json.RawMessage) []int {
	req := map[string]any{"messages": long, "temperature": 0, "max_tokens": 40, "return_token_ids": true}
	var usages [2]struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	var ids [2][]int
	for i := range 2 {
		status, body := post(t, ts.URL+"/v1/chat/completions", req)
		if status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		json.Unmarshal(body, &usages[i])
		ids[i] = decodeAnswer(t, body).Choices[0].TokenIDs
	}
	if usages[0].Usage.Details.Cached != 0 || usages[1].Usage.Details.Cached != (usages[1].Usage.PromptTokens-1)/64*64 {
		t.Errorf("cached tokens %d then %d (prompt %d)", usages[0].Usage.Details.Cached, usages[1].Usage.Details.Cached, usages[1].Usage.PromptTokens)
	}
	if !slices.Equal(ids[0], ids[1]) {
		t.Errorf("resumed answer %v differs from the cold one %v", ids[1], ids[0])
	}
	if hit := metricValue(t, ts.URL, "lfmq_prefix_cache_hit_tokens_total"); hit != float64(usages[1].Usage.Details.Cached) {
		t.Errorf("hit tokens %v", hit)
	}
	if steps := metricValue(t, ts.URL, "lfmq_spec_verify_steps_total"); steps == 0 {
		t.Error("no verify steps counted on the fixture's repetitive answers")
	}
	return ids[0]
}

// TestErrorsSpeakJSON: a value of the wrong JSON type is named by its path
// in the request and by the JSON type expected, never by the Go types the
// server decodes into.
func TestErrorsSpeakJSON(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{MaxModelLen: 512})
	tests := []struct {
		name, body, param, want string
		route                   string // default /v1/chat/completions
	}{
		{"body an array", `[1,2]`, "", "the request body must be a JSON object, not a JSON array", ""},
		{"messages a string", `{"messages":"hi"}`, "messages", "messages: expected an array of messages, got JSON string", ""},
		{"message a number", `{"messages":[1]}`, "messages", `messages[0]: expected an object such as {"role": "user", "content": "Hi"}, got JSON number`, ""},
		{"role a number", `{"messages":[{"role":1,"content":"x"}]}`, "messages", "messages[0].role: expected a string, got JSON number", ""},
		{"tool_calls an object", `{"messages":[{"role":"assistant","tool_calls":{}}]}`, "messages", "messages[0].tool_calls: expected an array, got JSON object", ""},
		{"tool a string", `{"messages":[{"role":"user","content":"x"}],"tools":["calculate"]}`, "tools", "tools[0]: a tool is an object", ""},
		// A body sent to the other route says where it belongs.
		{"chat body to completions", `{"messages":[{"role":"user","content":"x"}]}`, "prompt", "prompt is required; messages is a field of POST /v1/chat/completions", "/v1/completions"},
		{"completions body to chat", `{"prompt":"x"}`, "messages", "messages is required; prompt is a field of POST /v1/completions", ""},
		// A bound is written as it reads: ">=", not "\u003e=".
		{"top_k bound", `{"messages":[{"role":"user","content":"x"}],"top_k":-2}`, "top_k", "top_k: -2; use 0 or -1 for off, else >= 1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			route := "/v1/chat/completions"
			if tt.route != "" {
				route = tt.route
			}
			status, body := post(t, ts.URL+route, tt.body)
			a := decodeAnswer(t, body)
			if status != 400 || a.Error == nil {
				t.Fatalf("%d %s, want 400", status, body)
			}
			if deref(a.Error.Param) != tt.param || !strings.HasPrefix(a.Error.Message, tt.want) || strings.Contains(a.Error.Message, "Go ") {
				t.Errorf("param %q message %q, want param %q and a message starting %q", deref(a.Error.Param), a.Error.Message, tt.param, tt.want)
			}
			for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
				if strings.Contains(string(body), esc) {
					t.Errorf("HTML-escaped body %s", body)
				}
			}
		})
	}
}

// TestEchoLogprobsStream: a streamed completion with echo and logprobs
// carries what the non-streamed answer does: the echo chunk holds the
// prompt tokens' entries, and the text, tokens, log-probs and offsets of
// all chunks joined equal the non-streamed choice.
func TestEchoLogprobsStream(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	type lp struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []*float64           `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
	type answer struct {
		Choices []struct {
			Text     string `json:"text"`
			Logprobs *lp    `json:"logprobs"`
		} `json:"choices"`
	}
	tests := []struct {
		name   string
		prompt any
		max    int
	}{
		{"text", "The sea is wide", 4},
		{"token ids", fixturePrompts(t)[0].InputIDs[:6], 3},
		{"echo only", "The sea is wide", 0},
		{"non-ASCII", "Ünïcode façade — 😀 naïve", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := map[string]any{"prompt": tt.prompt, "echo": true, "logprobs": 2, "max_tokens": tt.max, "temperature": 0}
			status, body := post(t, ts.URL+"/v1/completions", req)
			var want answer
			if err := json.Unmarshal(body, &want); status != 200 || err != nil {
				t.Fatalf("%d %v %s", status, err, body)
			}
			req["stream"] = true
			status, body = post(t, ts.URL+"/v1/completions", req)
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			var text string
			got := lp{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
			for _, data := range sseData(body) {
				var ch answer
				if err := json.Unmarshal([]byte(data), &ch); err != nil {
					t.Fatalf("%v: %s", err, data)
				}
				if len(ch.Choices) == 0 {
					continue
				}
				text += ch.Choices[0].Text
				if l := ch.Choices[0].Logprobs; l != nil {
					got.Tokens = append(got.Tokens, l.Tokens...)
					got.TokenLogprobs = append(got.TokenLogprobs, l.TokenLogprobs...)
					got.TopLogprobs = append(got.TopLogprobs, l.TopLogprobs...)
					got.TextOffset = append(got.TextOffset, l.TextOffset...)
				}
			}
			w := want.Choices[0]
			if text != w.Text {
				t.Errorf("streamed text %q, want %q", text, w.Text)
			}
			if w.Logprobs == nil {
				t.Fatalf("no log-probs in the non-streamed answer")
			}
			// Each entry's offset is where its token is in the text, in code
			// points; the BOS the tokenizer added is not in the text.
			runes := []rune(w.Text)
			for i, tok := range w.Logprobs.Tokens {
				off := w.Logprobs.TextOffset[i]
				if tok == "<|startoftext|>" || strings.ContainsRune(tok, utf8.RuneError) {
					continue
				}
				if off > len(runes) || !strings.HasPrefix(string(runes[off:]), tok) {
					t.Errorf("token %d %q at text_offset %d of %q", i, tok, off, w.Text)
				}
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(w.Logprobs)
			if string(gb) != string(wb) {
				t.Errorf("streamed log-probs\n%s\nwant\n%s", gb, wb)
			}
		})
	}
}

// TestCompletionTopLogprobsHoldChosen: a completions top_logprobs map
// holds the top N and the chosen token too (OpenAI: "the logprobs most
// likely tokens, as well the chosen tokens"; vLLM answers the same), for
// generated and echoed prompt tokens alike, streamed or not.
func TestCompletionTopLogprobsHoldChosen(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	for _, n := range []int{0, 1, 3} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("logprobs=%d/stream=%v", n, stream), func(t *testing.T) {
				// A high temperature makes chosen tokens outside the top N likely.
				req := map[string]any{"prompt": "The sea is wide and", "echo": true, "logprobs": n, "max_tokens": 12,
					"temperature": 2, "seed": 3, "stream": stream}
				status, body := post(t, ts.URL+"/v1/completions", req)
				if status != 200 {
					t.Fatalf("%d %s", status, body)
				}
				entries := 0
				for _, data := range strings.Split(string(body), "\n\n") {
					data = strings.TrimPrefix(data, "data: ")
					if data == "" || data == "[DONE]" {
						continue
					}
					var a struct {
						Choices []struct {
							Logprobs *struct {
								Tokens        []string             `json:"tokens"`
								TokenLogprobs []*float64           `json:"token_logprobs"`
								TopLogprobs   []map[string]float64 `json:"top_logprobs"`
							} `json:"logprobs"`
						} `json:"choices"`
					}
					if err := json.Unmarshal([]byte(data), &a); err != nil {
						t.Fatalf("%v: %s", err, data)
					}
					if len(a.Choices) == 0 || a.Choices[0].Logprobs == nil {
						continue
					}
					l := a.Choices[0].Logprobs
					for i, tok := range l.Tokens {
						if l.TokenLogprobs[i] == nil {
							continue // the first prompt token
						}
						entries++
						top := l.TopLogprobs[i]
						if v, ok := top[tok]; !ok || v != *l.TokenLogprobs[i] || len(top) > n+1 {
							t.Errorf("token %q (%v): top_logprobs %v", tok, *l.TokenLogprobs[i], top)
						}
					}
				}
				if entries < 12 {
					t.Errorf("%d entries checked: %s", entries, body)
				}
			})
		}
	}
}

// TestStreamReturnTokenIDs: return_token_ids streamed as vLLM streams it:
// the first chunk carries prompt_token_ids, each chunk the ids of the
// tokens it delivers, and the chunks joined give the non-streamed ids,
// for chat and completions, with a stop string holding text back.
func TestStreamReturnTokenIDs(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	ps := fixturePrompts(t)
	tests := []struct {
		name, path string
		body       map[string]any
	}{
		{"chat", "/v1/chat/completions", map[string]any{"messages": ps[2].Messages, "max_tokens": 12}},
		{"chat reasoning", "/v1/chat/completions", map[string]any{"messages": ps[4].Messages, "max_tokens": 12}},
		{"completions", "/v1/completions", map[string]any{"prompt": ps[0].InputIDs, "max_tokens": 16}},
		{"completions stop", "/v1/completions", map[string]any{"prompt": ps[0].InputIDs, "max_tokens": 32, "stop": "crown"}},
		{"completions echo", "/v1/completions", map[string]any{"prompt": "The sea", "max_tokens": 5, "echo": true}},
	}
	type ids struct {
		PromptTokenIDs []int `json:"prompt_token_ids"`
		Choices        []struct {
			TokenIDs       []int `json:"token_ids"`
			PromptTokenIDs []int `json:"prompt_token_ids"`
		} `json:"choices"`
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["temperature"], tt.body["return_token_ids"] = 0, true
			status, body := post(t, ts.URL+tt.path, tt.body)
			var want ids
			if err := json.Unmarshal(body, &want); status != 200 || err != nil {
				t.Fatalf("%d %v %s", status, err, body)
			}
			wantPrompt := append(want.PromptTokenIDs, want.Choices[0].PromptTokenIDs...)
			tt.body["stream"] = true
			status, body = post(t, ts.URL+tt.path, tt.body)
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			var gotIDs, gotPrompt []int
			promptChunks := 0
			for _, data := range sseData(body) {
				var ch ids
				if err := json.Unmarshal([]byte(data), &ch); err != nil {
					t.Fatalf("%v: %s", err, data)
				}
				p := ch.PromptTokenIDs
				if len(ch.Choices) > 0 {
					gotIDs = append(gotIDs, ch.Choices[0].TokenIDs...)
					p = append(p, ch.Choices[0].PromptTokenIDs...)
				}
				if len(p) > 0 {
					promptChunks++
					gotPrompt = p
				}
			}
			if !slices.Equal(gotIDs, want.Choices[0].TokenIDs) || len(gotIDs) == 0 {
				t.Errorf("streamed token_ids %v, want %v", gotIDs, want.Choices[0].TokenIDs)
			}
			if promptChunks != 1 || !slices.Equal(gotPrompt, wantPrompt) {
				t.Errorf("prompt_token_ids in %d chunks: %v, want %v once", promptChunks, gotPrompt, wantPrompt)
			}
		})
	}
}

// TestStreamPromptLogprobs: a streamed completion with prompt_logprobs N
// carries them on its first chunk, equal to the non-streamed answer's,
// with or without echo and generated tokens.
func TestStreamPromptLogprobs(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	tests := []struct {
		name string
		body map[string]any
	}{
		{"top 2", map[string]any{"prompt": "The sea is wide", "prompt_logprobs": 2, "max_tokens": 3}},
		{"top 0 echo logprobs", map[string]any{"prompt": "The sea is wide", "prompt_logprobs": 0, "echo": true, "logprobs": 1, "max_tokens": 3}},
		{"prompt only", map[string]any{"prompt": []int{1, 669, 5008, 6054}, "prompt_logprobs": 1, "max_tokens": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["temperature"] = 0
			status, body := post(t, ts.URL+"/v1/completions", tt.body)
			var want struct {
				Choices []struct {
					PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(body, &want); status != 200 || err != nil || len(want.Choices[0].PromptLogprobs) < 10 {
				t.Fatalf("%d %v %s", status, err, body)
			}
			tt.body["stream"] = true
			status, body = post(t, ts.URL+"/v1/completions", tt.body)
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			var got []json.RawMessage
			for i, data := range sseData(body) {
				var ch struct {
					Choices []struct {
						PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(data), &ch); err != nil {
					t.Fatalf("%v: %s", err, data)
				}
				if len(ch.Choices) > 0 && string(ch.Choices[0].PromptLogprobs) != "null" {
					if i != 0 {
						t.Errorf("prompt_logprobs on event %d", i)
					}
					got = append(got, ch.Choices[0].PromptLogprobs)
				}
			}
			if len(got) != 1 || string(got[0]) != string(want.Choices[0].PromptLogprobs) {
				t.Errorf("streamed prompt_logprobs %s, want %s once", got, want.Choices[0].PromptLogprobs)
			}
		})
	}
}

package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/choice"
	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/sched"
)

const triageSchema = `{"type":"object","additionalProperties":false,"required":["queue","urgent"],
 "properties":{"queue":{"type":"string","enum":["billing","shipping","tech"]},"urgent":{"type":"boolean"}}}`

func schemaRequest(stream bool) map[string]any {
	return map[string]any{
		"messages":        []map[string]string{{"role": "user", "content": "My parcel never arrived and I need it tomorrow."}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "triage", "schema": json.RawMessage(triageSchema)}},
		"stream":          stream,
	}
}

// TestSchemaAnswer: a closed-schema request is answered by scoring: the
// content is schema-valid JSON, equal to engine/choice's answer for the
// same prompt, with every candidate's score in logprobs.fields; the
// stream carries the same content in one chunk.
func TestSchemaAnswer(t *testing.T) {
	checkSchemaAnswer(t, newTestServer(t, Options{}, sched.Config{}), tinySession(t))
}

// checkSchemaAnswer asks ts, serving the model of sess, the triage schema.
func checkSchemaAnswer(t *testing.T, ts *testServer, sess *generate.Session) {
	status, body := post(t, ts.URL+"/v1/chat/completions", schemaRequest(false))
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
			Logprobs     struct {
				Fields []struct {
					Field      string `json:"field"`
					Value      any    `json:"value"`
					Logprob    float64
					Candidates []struct {
						Value   any
						Logprob float64
					}
				} `json:"fields"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	var got map[string]any
	if err := json.Unmarshal([]byte(c.Message.Content), &got); err != nil || len(got) != 2 || c.FinishReason != "stop" {
		t.Fatalf("content %q: %v", c.Message.Content, err)
	}
	if _, ok := got["urgent"].(bool); !ok || !slices.Contains([]any{"billing", "shipping", "tech"}, got["queue"]) {
		t.Errorf("not schema-valid: %v", got)
	}
	if f := c.Logprobs.Fields; len(f) != 2 || f[0].Field != "queue" || len(f[0].Candidates) != 3 || len(f[1].Candidates) != 2 || f[0].Value != got["queue"] {
		t.Errorf("fields %+v", f)
	}

	// In process, from the same conversation: the same answer.
	sch, _ := choice.Parse([]byte(triageSchema))
	msgs := sch.WithInstruction([]chat.Message{{Role: "user", Content: "My parcel never arrived and I need it tomorrow."}})
	rendered, err := sess.EncodeChatRequest(chat.Request{Messages: msgs, AddGenerationPrompt: true}, chat.TrustAssistant())
	if err != nil {
		t.Fatal(err)
	}
	prompt := append(rendered, sess.Tokenizer.EncodeOrdinary(choice.Open)...)
	a, err := sch.Score(context.Background(), sess.Model, prompt, sch.Encode(sess.Tokenizer))
	if err != nil || a.Text != c.Message.Content {
		t.Errorf("in process %q (%v), served %q", a.Text, err, c.Message.Content)
	}
	for i, f := range c.Logprobs.Fields {
		for j, cand := range f.Candidates {
			if cand.Logprob != a.Scores[i][j] {
				t.Errorf("field %d candidate %d: %v served, %v in process", i, j, cand.Logprob, a.Scores[i][j])
			}
		}
	}

	status, body = post(t, ts.URL+"/v1/chat/completions", schemaRequest(true))
	if status != 200 || streamText(string(body)) != "|"+c.Message.Content+"||#stop" || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("stream: %d %q", status, streamText(string(body)))
	}
}

// TestSchemaUnsupported: other schemas are a 400 naming the construct.
func TestSchemaUnsupported(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	for schema, want := range map[string]string{
		`{"type":"object","additionalProperties":false,"required":["n"],"properties":{"n":{"type":"integer"}}}`:                                      "properties.n.type",
		`{"type":"object","additionalProperties":false,"required":[],"properties":{"n":{"type":"boolean"}}}`:                                         "properties.n",
		`{"type":"object","required":["n"],"properties":{"n":{"type":"boolean"}}}`:                                                                   "additionalProperties",
		`{"type":"object","additionalProperties":false,"required":["n"],"properties":{"n":{"type":"object","properties":{"x":{"type":"boolean"}}}}}`: "properties.n.properties",
		`{"type":"object","additionalProperties":false,"required":["s"],"properties":{"s":{"type":"string"}}}`:                                       "properties.s",
	} {
		req := schemaRequest(false)
		req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": json.RawMessage(schema)}}
		status, body := post(t, ts.URL+"/v1/chat/completions", req)
		a := decodeAnswer(t, body)
		if status != 400 || a.Error == nil || deref(a.Error.Param) != "response_format" || deref(a.Error.Code) != "unsupported_parameter" || !strings.Contains(a.Error.Message, want) {
			t.Errorf("%s: %d %s", schema, status, body)
		}
	}
}

// TestSchemaOpenAISDK: the official SDK's json_schema response format.
func TestSchemaOpenAISDK(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	var schema map[string]any
	json.Unmarshal([]byte(triageSchema), &schema)
	client := sdkClient(ts.URL, "")
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("The invoice charged me twice.")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "triage", Schema: schema, Strict: openai.Bool(true)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Queue  string `json:"queue"`
		Urgent *bool  `json:"urgent"`
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &got); err != nil || got.Urgent == nil || !slices.Contains([]string{"billing", "shipping", "tech"}, got.Queue) {
		t.Errorf("%q: %v", resp.Choices[0].Message.Content, err)
	}
}

// TestSchemaChecksSamplingFields: a scored answer takes no sampling, but
// its request's fields are checked as for any chat request, so n > 1 is
// never answered with one choice and a value refused elsewhere is refused
// here too.
func TestSchemaChecksSamplingFields(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	tests := []struct {
		field       string
		value       any
		param, code string
	}{
		{"n", 3, "n", "unsupported_parameter"},
		{"temperature", 9, "temperature", ""},
		{"top_p", 0, "top_p", ""},
		{"max_tokens", -4, "max_tokens", ""},
		{"max_completion_tokens", 0, "max_completion_tokens", ""},
		{"logit_bias", map[string]any{"999999": 1}, "logit_bias", ""},
		{"stop", []string{""}, "stop", ""},
		{"stop_token_ids", []int{-1}, "stop_token_ids", ""},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			req := schemaRequest(false)
			req[tt.field] = tt.value
			status, body := post(t, ts.URL+"/v1/chat/completions", req)
			a := decodeAnswer(t, body)
			if status != 400 || a.Error == nil || deref(a.Error.Param) != tt.param || deref(a.Error.Code) != tt.code {
				t.Errorf("%d %s, want 400 with param %q code %q", status, body, tt.param, tt.code)
			}
		})
	}
	// Valid values are accepted (and do not change the scored answer).
	req := schemaRequest(false)
	req["n"], req["temperature"], req["max_tokens"], req["seed"] = 1, 0.7, 64, 5
	if status, body := post(t, ts.URL+"/v1/chat/completions", req); status != 200 {
		t.Errorf("valid fields: %d %s", status, body)
	}
}

// TestSchemaStreamPromptTokenIDs: with return_token_ids, a streamed
// closed-schema answer carries the prompt's ids on its first chunk, as the
// non-streamed answer does.
func TestSchemaStreamPromptTokenIDs(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	req := schemaRequest(false)
	req["return_token_ids"] = true
	_, body := post(t, ts.URL+"/v1/chat/completions", req)
	want := decodeAnswer(t, body).PromptTokenIDs
	req["stream"] = true
	_, body = post(t, ts.URL+"/v1/chat/completions", req)
	first, _, _ := strings.Cut(strings.TrimPrefix(string(body), "data: "), "\n\n")
	var ch struct {
		PromptTokenIDs []int `json:"prompt_token_ids"`
	}
	if err := json.Unmarshal([]byte(first), &ch); err != nil || len(want) == 0 || !slices.Equal(ch.PromptTokenIDs, want) {
		t.Errorf("first chunk %s (%v), want prompt_token_ids %v", first, err, want)
	}
}

// TestSchemaPool: a closed-schema answer's prompt and branches take their
// pages from the server's KV pool (a lease of choice.Reservation's pages):
// a pool of exactly that answers as an unbounded one does, one page less
// is a 400 naming the pool, and the pages go back after.
func TestSchemaPool(t *testing.T) {
	req := schemaRequest(false)
	req["return_token_ids"] = true
	_, want := post(t, newTestServer(t, Options{}, sched.Config{}).URL+"/v1/chat/completions", req)
	prompt := decodeAnswer(t, want).PromptTokenIDs
	sch, err := choice.Parse(json.RawMessage(triageSchema))
	if err != nil {
		t.Fatal(err)
	}
	_, pages := choice.Reservation(len(prompt), sch.Encode(tinySession(t).Tokenizer))
	t.Logf("%d prompt tokens: %d pages", len(prompt), pages)
	for _, tc := range []struct {
		pages, status int
	}{{pages, 200}, {pages - 1, 400}} {
		ts := newTestServer(t, Options{}, sched.Config{KVPoolTokens: tc.pages * 64, PrefixCache: sched.PrefixConfig{Off: true}})
		status, body := post(t, ts.URL+"/v1/chat/completions", req)
		if status != tc.status {
			t.Fatalf("%d pages: %d %s", tc.pages, status, body)
		}
		if status == 400 {
			a := decodeAnswer(t, body)
			if deref(a.Error.Param) != "response_format" || !strings.Contains(a.Error.Message, "--kv-pool-tokens") {
				t.Errorf("%d pages: %s", tc.pages, body)
			}
			continue
		}
		// Equal but for the id and time.
		strip := func(b []byte) string {
			var m map[string]any
			json.Unmarshal(b, &m)
			delete(m, "id")
			delete(m, "created")
			out, _ := json.Marshal(m)
			return string(out)
		}
		if strip(body) != strip(want) {
			t.Errorf("on the pool: %s\nunbounded: %s", body, want)
		}
		if v := metricValue(t, ts.URL, "lfmq_kv_pool_pages_used"); v != 0 {
			t.Errorf("kv_pool_pages_used %v after the answer, want 0", v)
		}
	}
}

package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/sched"
)

// fuzzServer is a ready server whose scheduler never runs: the fuzz
// targets exercise decoding, validation and prompt rendering only.
func fuzzServer(t testing.TB) (*Server, *engineState) {
	sess := tinySession(t)
	s := New(Options{ServedModelName: "tiny"})
	sch, err := sched.New(sess.Model, sched.Config{MaxModelLen: 1024})
	if err != nil {
		t.Fatal(err)
	}
	s.SetReady(&Engine{Session: sess, Sched: sch})
	return s, s.engine.Load()
}

func checkJob(t *testing.T, j *job, e *engineState) {
	if len(j.prompt) == 0 || len(j.prompt)+j.maxTokens > e.maxLen {
		t.Fatalf("accepted a job with %d prompt tokens and max %d (limit %d)", len(j.prompt), j.maxTokens, e.maxLen)
	}
	if j.maxTokens > 0 {
		if err := j.params.Validate(e.vocabSize); err != nil {
			t.Fatalf("accepted invalid params: %v", err)
		}
	}
}

// FuzzChatRequest: any body gives a job that is valid, or an API error
// with a 4xx status; never a panic.
func FuzzChatRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto","max_tokens":5,"stop":["x"],"logit_bias":{"5":3}}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"a\":[1,{\"b\":null}]}"}}]}],"temperature":0.5,"top_k":-1,"seed":-1}`,
		`{"messages":[],"n":2}`, `{"stream_options":{}}`, `[]`, `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"messages":1}}`,
	} {
		f.Add([]byte(seed))
	}
	s, e := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		var req wire.ChatRequest
		_, aerr := decodeBody(httptest.NewRecorder(), r, &req, chatFields)
		var cj *chatJob
		if aerr == nil {
			cj, aerr = s.chatJob(e, &req, time.Now())
		}
		if aerr != nil {
			if aerr.Status < 400 || aerr.Status >= 500 || aerr.Message == "" {
				t.Fatalf("bad error %+v", aerr)
			}
			return
		}
		checkJob(t, cj.job, e)
	})
}

// FuzzCompletionRequest: as FuzzChatRequest for /v1/completions.
func FuzzCompletionRequest(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"hello"}`, `{"prompt":[1,2,3],"max_tokens":0,"echo":true,"prompt_logprobs":-1}`,
		`{"prompt":[[1,2]],"logprobs":3,"echo":true}`, `{"prompt":["a","b"]}`, `{"prompt":"x","max_tokens":4096}`,
		`{"prompt":"x","stop":"y","min_tokens":2,"max_tokens":1}`,
	} {
		f.Add([]byte(seed))
	}
	s, e := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", bytes.NewReader(body))
		var req wire.CompletionRequest
		_, aerr := decodeBody(httptest.NewRecorder(), r, &req, completionFields)
		var cj *completionJob
		if aerr == nil {
			cj, aerr = s.completionJob(e, &req, time.Now())
		}
		if aerr != nil {
			if aerr.Status < 400 || aerr.Status >= 500 || aerr.Message == "" {
				t.Fatalf("bad error %+v", aerr)
			}
			return
		}
		checkJob(t, cj.job, e)
	})
}

// TestFieldSets: the known-field lists hold the request fields of
// docs/serving.md §5 (a field missing here would be logged as ignored
// while being used).
func TestFieldSets(t *testing.T) {
	for _, f := range []string{"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options",
		"max_tokens", "max_completion_tokens", "stop", "seed", "n", "temperature", "top_p", "logit_bias", "presence_penalty",
		"frequency_penalty", "logprobs", "top_logprobs", "response_format", "top_k", "min_p", "repetition_penalty", "min_tokens",
		"stop_token_ids", "include_reasoning", "chat_template_kwargs", "skip_special_tokens", "return_token_ids"} {
		if !chatFields[f] {
			t.Errorf("chat field %q unknown", f)
		}
	}
	for _, f := range []string{"model", "prompt", "max_tokens", "echo", "logprobs", "stop", "prompt_logprobs", "stream", "temperature", "suffix", "best_of"} {
		if !completionFields[f] {
			t.Errorf("completion field %q unknown", f)
		}
	}
	if chatFields["prompt"] || completionFields["messages"] {
		t.Error("a field of the other route is known")
	}
}

package task

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lfmq/lfmq/engine/api/client"
	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/evidence"
)

// Bounds on what a server may answer (a model list: client.ModelsLimit).
const (
	maxAnswerBytes = 64 << 20
	// maxRetries bounds the attempts repeated after 429 or 503.
	maxRetries = 10
)

// Client asks an OpenAI-compatible server; only URL is contacted.
type Client struct {
	// URL is the base URL, scheme://host[:port]; routes are under /v1.
	URL string
	// APIKey is sent as a bearer token when set; never recorded.
	APIKey string
	// Model is the model id to ask for (Identify fills it in when empty).
	Model string
	// HTTP sends the requests (http.DefaultClient when nil).
	HTTP *http.Client
	// Timeout bounds one request (no bound when 0).
	Timeout time.Duration
	// MaxModelLen is the context length, in tokens, that /v1/models
	// reported for Model (Identify fills it in; 0: not reported).
	MaxModelLen int
}

// ServerError is a request that got no usable answer: the route, the
// status (0 when none came) and the server's message or the cause.
type ServerError = client.Failure

// Identify reads /v1/models: the server's answer, compacted, for the
// receipts, and the model to ask for (the one listed when Model is empty;
// several listed then is an error).
func (c *Client) Identify(ctx context.Context) (Server, error) {
	u := c.URL + "/v1/models"
	data, list, err := c.api().Models(ctx, c.retry())
	if err != nil {
		return Server{}, client.Fail("task", err, client.ModelsLimit, answerMessage)
	}
	ids := list.IDs()
	switch {
	case c.Model == "" && len(ids) == 1:
		c.Model = ids[0]
	case c.Model == "":
		return Server{}, &ServerError{Who: "task", URL: u, Status: 200, Msg: fmt.Sprintf("lists %d models (%s); name one with --served-model", len(ids), strings.Join(ids, ", "))}
	case !slices.Contains(ids, c.Model):
		return Server{}, &ServerError{Who: "task", URL: u, Status: 200, Msg: fmt.Sprintf("does not serve %q; it lists %s", c.Model, strings.Join(ids, ", "))}
	}
	for _, d := range list.Data {
		if d.ID == c.Model {
			c.MaxModelLen = d.MaxModelLen
		}
	}
	var compact bytes.Buffer
	json.Compact(&compact, data) // valid: it was just parsed
	return Server{URL: c.URL, Model: c.Model, Models: compact.Bytes()}, nil
}

func (c *Client) api() *client.Client {
	return &client.Client{URL: c.URL, APIKey: c.APIKey, HTTP: c.HTTP}
}

// retry repeats a request the server refused for now (429, 503) after its
// Retry-After, at most maxRetries times, each attempt bounded by Timeout.
func (c *Client) retry() client.Retry {
	return client.Retry{Max: maxRetries, Timeout: c.Timeout}
}

// post sends body to route and returns the answer.
func (c *Client) post(ctx context.Context, route string, body any) ([]byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	data, err = c.api().Do(ctx, client.Request{Method: http.MethodPost, Path: route, Body: data}, maxAnswerBytes, 0, c.retry())
	return data, client.Fail("task", err, maxAnswerBytes, answerMessage)
}

// answerMessage is an error answer's message: its OpenAI error object's,
// or the start of the body.
func answerMessage(e *client.Error) string {
	if e.Message != "" {
		return e.Message
	}
	s := string(e.Body)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// chatAnswer is the part of a chat completion a GSM8K item keeps.
type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wire.Usage `json:"usage"`
}

// Chat asks for one completion of a single user message and returns the
// reasoning, the final answer, the finish reason and the usage.
func (c *Client) Chat(ctx context.Context, user string, maxTokens int, s Sampling, seed *uint64) (reasoning, text, finish string, promptTokens, generated int, err error) {
	body := map[string]any{
		"model":    c.Model,
		"messages": []map[string]string{{"role": "user", "content": user}},
		"stream":   false,
	}
	if maxTokens > 0 {
		body["max_tokens"] = maxTokens
	}
	if seed != nil {
		body["seed"] = *seed
	}
	s.addTo(body)
	data, err := c.post(ctx, "/v1/chat/completions", body)
	if err != nil {
		return "", "", "", 0, 0, err
	}
	var a chatAnswer
	bad := func(msg string) error {
		return &ServerError{Who: "task", URL: c.URL + "/v1/chat/completions", Status: 200, Msg: msg}
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return "", "", "", 0, 0, bad("not a chat completion: " + err.Error())
	}
	if len(a.Choices) != 1 {
		return "", "", "", 0, 0, bad(fmt.Sprintf("%d choices, expected 1", len(a.Choices)))
	}
	if a.Usage == nil {
		return "", "", "", 0, 0, bad("no usage")
	}
	m := a.Choices[0].Message
	switch {
	case m.ReasoningContent != nil:
		reasoning = *m.ReasoningContent
	case m.Reasoning != nil:
		reasoning = *m.Reasoning
	}
	if m.Content != nil {
		text = *m.Content
	}
	return reasoning, text, a.Choices[0].FinishReason, a.Usage.PromptTokens, a.Usage.CompletionTokens, nil
}

// PromptTokens returns the tokens of user's chat prompt as the server
// counts them: the usage of a greedy one-token answer.
func (c *Client) PromptTokens(ctx context.Context, user string) (int, error) {
	zero := evidence.Float(0)
	_, _, _, pt, _, err := c.Chat(ctx, user, 1, Sampling{Temperature: &zero}, nil)
	return pt, err
}

// addTo sets the sampling fields that are set.
func (s Sampling) addTo(body map[string]any) {
	if s.Temperature != nil {
		body["temperature"] = float64(*s.Temperature)
	}
	if s.TopP != nil {
		body["top_p"] = float64(*s.TopP)
	}
	if s.TopK != nil {
		body["top_k"] = *s.TopK
	}
	if s.MinP != nil {
		body["min_p"] = float64(*s.MinP)
	}
	if s.RepetitionPenalty != nil {
		body["repetition_penalty"] = float64(*s.RepetitionPenalty)
	}
}

// completionLogprobs is the part of a completions answer with echo and
// logprobs that likelihood scoring reads.
type completionLogprobs struct {
	Choices []struct {
		Index    int `json:"index"`
		Logprobs *struct {
			TokenLogprobs []*float64 `json:"token_logprobs"`
		} `json:"logprobs"`
	} `json:"choices"`
}

// PromptLogprobs sends the request lm-evaluation-harness's
// local-completions sends for a log-likelihood (prompt as one list of
// token ids, echo, logprobs 1, max_tokens 1, temperature 0) and returns
// the log-prob of each of the prompt's tokens after the first, read as
// the harness reads them: token_logprobs from the prompt's second entry,
// the generated token's entry dropped.
func (c *Client) PromptLogprobs(ctx context.Context, ids []int) ([]float64, error) {
	body := map[string]any{
		"model": c.Model, "prompt": [][]int{ids}, "temperature": 0, "max_tokens": 1,
		"logprobs": 1, "seed": 1234, "echo": true,
	}
	data, err := c.post(ctx, "/v1/completions", body)
	if err != nil {
		return nil, err
	}
	u := c.URL + "/v1/completions"
	var a completionLogprobs
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, &ServerError{Who: "task", URL: u, Status: 200, Msg: "not a completion: " + err.Error()}
	}
	if len(a.Choices) != 1 || a.Choices[0].Logprobs == nil {
		return nil, &ServerError{Who: "task", URL: u, Status: 200, Msg: "no choice with logprobs"}
	}
	lp := a.Choices[0].Logprobs.TokenLogprobs
	// The prompt's entries, then the one generated token's (a stop token
	// too: it is generated and has a log-prob).
	if len(lp) != len(ids)+1 {
		return nil, &ServerError{Who: "task", URL: u, Status: 200, Msg: fmt.Sprintf("%d token_logprobs for a %d-token prompt and one generated token", len(lp), len(ids))}
	}
	out := make([]float64, len(ids)-1)
	for j := 1; j < len(ids); j++ {
		if lp[j] == nil {
			return nil, &ServerError{Who: "task", URL: u, Status: 200, Msg: fmt.Sprintf("token_logprobs[%d] is null", j)}
		}
		out[j-1] = *lp[j]
	}
	return out, nil
}

var errNoTokenizer = errors.New("task: the choice task over HTTP needs a tokenizer")

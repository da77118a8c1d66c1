package wire

import (
	"encoding/json"
)

// CompletionResponse is a POST /v1/completions answer, or one event of
// its stream.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   any                `json:"usage,omitempty"`
}

// CompletionChoice is one answer of a CompletionResponse.
type CompletionChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *CompletionLogprobs `json:"logprobs"`
	FinishReason   *string             `json:"finish_reason"`
	PromptLogprobs any                 `json:"prompt_logprobs"`
	// F32 is a placeholder the writer replaces by the rows.
	F32            json.RawMessage `json:"prompt_logprobs_f32,omitempty"`
	TokenIDs       []int           `json:"token_ids,omitempty"`
	PromptTokenIDs []int           `json:"prompt_token_ids,omitempty"`
}

// CompletionLogprobs is the legacy completions log-prob object.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// PromptLogprob is vLLM's per-token prompt log-prob value.
type PromptLogprob struct {
	Logprob      float64 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

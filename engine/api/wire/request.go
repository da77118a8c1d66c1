package wire

import (
	"encoding/json"
)

// Sampling are the request fields that chat and completions share
// (OpenAI's and vLLM's extras). A nil pointer is a field the
// request did not set (JSON null reads as not set).
type Sampling struct {
	MaxTokens         *int               `json:"max_tokens"`
	Stop              json.RawMessage    `json:"stop"`
	StopTokenIDs      []int              `json:"stop_token_ids"`
	Seed              *int64             `json:"seed"`
	N                 *int               `json:"n"`
	Temperature       *float64           `json:"temperature"`
	TopP              *float64           `json:"top_p"`
	TopK              *int               `json:"top_k"`
	MinP              *float64           `json:"min_p"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	MinTokens         *int               `json:"min_tokens"`
	SkipSpecialTokens *bool              `json:"skip_special_tokens"`
	// ReturnTokenIDs adds the prompt's and the output's token ids to the
	// response (vLLM's return_token_ids).
	ReturnTokenIDs bool `json:"return_token_ids"`
	// CacheSalt separates prefix-cache entries (vLLM's cache_salt):
	// requests with different salts never share cached state.
	CacheSalt string `json:"cache_salt"`
}

// StreamOptions is a request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatRequest is a POST /v1/chat/completions body.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	IncludeReasoning    *bool           `json:"include_reasoning"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	// Prompt is not a chat field: it is read only to send a completions
	// body posted here to the right route.
	Prompt json.RawMessage `json:"prompt"`
	Sampling
}

// CompletionRequest is a POST /v1/completions body.
type CompletionRequest struct {
	Model          string          `json:"model"`
	Prompt         json.RawMessage `json:"prompt"`
	Suffix         *string         `json:"suffix"`
	Echo           bool            `json:"echo"`
	Logprobs       *int            `json:"logprobs"`
	PromptLogprobs *int            `json:"prompt_logprobs"`
	Stream         bool            `json:"stream"`
	StreamOptions  *StreamOptions  `json:"stream_options"`
	// BestOf is read only to refuse best_of > 1: ignored, it would answer
	// one sample as if it were the best of several.
	BestOf *int `json:"best_of"`
	// Messages is not a completions field: it is read only to send a chat
	// body posted here to the right route.
	Messages json.RawMessage `json:"messages"`
	Sampling
}

package wire

// ChatResponse is a non-streaming POST /v1/chat/completions answer.
type ChatResponse struct {
	ID             string       `json:"id"`
	Object         string       `json:"object"`
	Created        int64        `json:"created"`
	Model          string       `json:"model"`
	Choices        []ChatChoice `json:"choices"`
	Usage          *Usage       `json:"usage"`
	PromptTokenIDs []int        `json:"prompt_token_ids,omitempty"`
}

// ChatChoice is one answer of a ChatResponse.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      ChatMessage   `json:"message"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
	TokenIDs     []int         `json:"token_ids,omitempty"`
}

// ChatMessage is the assistant message of a non-streaming answer.
type ChatMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	Reasoning        string     `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a function call in an assistant message or a stream's
// delta (Index is set in a delta only).
type ToolCall struct {
	Index    *int     `json:"index,omitempty"`
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a tool call's function: its name and JSON arguments.
type Function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ChatLogprobs is a chat choice's log-probs: one entry per token.
type ChatLogprobs struct {
	Content []Logprob `json:"content"`
	// Fields holds a closed-schema answer's per-field candidate scores.
	Fields []FieldScores `json:"fields,omitempty"`
}

// Logprob is one token's log-prob in a chat answer, with its top
// alternatives.
type Logprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one of a token's top alternatives.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// FieldScores is one field of a closed-schema answer in logprobs: the
// chosen value and every candidate's log-likelihood.
type FieldScores struct {
	Field      string           `json:"field"`
	Value      any              `json:"value"`
	Logprob    float64          `json:"logprob"`
	Candidates []CandidateScore `json:"candidates"`
}

// CandidateScore is one candidate value of a closed-schema field.
type CandidateScore struct {
	Value   any     `json:"value"`
	Logprob float64 `json:"logprob"`
}

// ChatChunk is one SSE event of a streaming chat answer.
type ChatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when Usage is asked for,
	// absent otherwise.
	Usage any `json:"usage,omitempty"`
	// PromptTokenIDs is on the first chunk with return_token_ids.
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

// ChunkChoice is a ChatChunk's choice: the delta it adds.
type ChunkChoice struct {
	Index        int           `json:"index"`
	Delta        Delta         `json:"delta"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	// TokenIDs are the ids of the tokens the chunk delivers, with
	// return_token_ids (held text's ids come with the text).
	TokenIDs []int `json:"token_ids,omitempty"`
}

// Delta is what one chunk adds to a streamed assistant message.
type Delta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	Reasoning        string     `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

package wire

// Usage is the OpenAI Usage object.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details"`
}

// PromptTokensDetails says how many prompt tokens the prefix cache
// supplied.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

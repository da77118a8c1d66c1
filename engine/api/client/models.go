package client

import (
	"context"
	"encoding/json"

	"github.com/lfmq/lfmq/engine/api/wire"
)

// ModelsLimit bounds a /v1/models answer; real ones are well under a
// kilobyte.
const ModelsLimit = 1 << 20

// Models is a /v1/models answer as lfmq serve, vLLM and llama.cpp's
// server give it: the fields any of them sets that a client reads.
type Models struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model is one listed model.
type Model struct {
	ID          string `json:"id"`
	OwnedBy     string `json:"owned_by"` // "vllm" from vLLM
	MaxModelLen int    `json:"max_model_len"`
	// Lfmq is lfmq serve's description of the checkpoint and binary.
	Lfmq *wire.ModelDetail `json:"lfmq"`
	// Meta is llama.cpp's server's: the vocabulary size.
	Meta *struct {
		NVocab int `json:"n_vocab"`
	} `json:"meta"`
}

// IDs returns the listed models' ids, in order.
func (m *Models) IDs() []string {
	ids := make([]string, len(m.Data))
	for i, d := range m.Data {
		ids[i] = d.ID
	}
	return ids
}

// DecodeError is an answer that is not the JSON it should be.
type DecodeError struct {
	URL string
	Err error
}

func (e *DecodeError) Error() string { return "client: " + e.URL + ": " + e.Err.Error() }

func (e *DecodeError) Unwrap() error { return e.Err }

// Models reads GET /v1/models, retrying as retry allows: the answer as
// sent, for a caller's receipts, and the list read from it (a
// *DecodeError when it is not one).
func (c *Client) Models(ctx context.Context, retry Retry) ([]byte, *Models, error) {
	data, err := c.Do(ctx, Request{Path: "/v1/models", Accept: "application/json"}, ModelsLimit, 4<<10, retry)
	if err != nil {
		return nil, nil, err
	}
	var list Models
	if err := json.Unmarshal(data, &list); err != nil {
		return data, nil, &DecodeError{URL: c.URL + "/v1/models", Err: err}
	}
	return data, &list, nil
}

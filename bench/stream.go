package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lfmq/lfmq/engine/api/client"
	"github.com/lfmq/lfmq/engine/api/wire"
)

// maxLine bounds one line of an event stream.
const maxLine = client.MaxLine

// maxIDs bounds the generated token ids kept from one stream (more than
// any --output-tokens the bench asks for).
const maxIDs = 1 << 20

// tokenEvent is a stream chunk that delivered tokens: when it arrived
// (since the request was sent) and how many tokens it carried.
type tokenEvent struct {
	At     time.Duration
	Tokens int
}

// streamResult is what one streamed answer held.
type streamResult struct {
	Events []tokenEvent
	// Usage is the last usage object the stream carried (vLLM and lfmq
	// send it in a chunk of its own after the last choice; llama.cpp's
	// server in the chunk with the finish reason); nil when none came.
	Usage  *Usage
	Finish string // the last finish_reason seen
	// Done is set when the stream ended with data: [DONE].
	Done bool
	// ServerError is the message of an error object sent in the stream.
	ServerError string
	// End is when the stream ended, since the request was sent.
	End time.Duration
	// IDs are the generated token ids the chunks carried in token_ids
	// (return_token_ids: lfmq serve and vLLM), in order.
	IDs []int
	// logprobs is set once a chunk carried log-probs.
	logprobs bool
}

// Usage is an answer's token counts as the server reports them.
// PromptTokensDetails.CachedTokens is how many prompt tokens the server's
// prefix cache supplied (lfmq serve, vLLM and llama.cpp's server report
// it); nil where the answer does not say.
type Usage = wire.Usage

// cached returns the cached prompt tokens u reports, 0 when it does not.
func cached(u *Usage) int {
	if u == nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// tokens returns the tokens the events delivered.
func (r *streamResult) tokens() int {
	n := 0
	for _, e := range r.Events {
		n += e.Tokens
	}
	return n
}

// chunk is the part of a streamed completion or chat chunk the bench
// reads. Token strings and log-probs are not decoded, only counted.
type chunk struct {
	Choices []struct {
		Text  *string `json:"text"`
		Delta *struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		Logprobs *struct {
			Tokens  []json.RawMessage `json:"tokens"`  // completions
			Content []json.RawMessage `json:"content"` // chat
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
		TokenIDs     []int   `json:"token_ids"`
	} `json:"choices"`
	Usage *Usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// StreamError is an event stream that could not be read: a line over the
// bound, or a data line that is not the JSON of a chunk.
type StreamError struct {
	Line int // 1-based line of the stream
	Msg  string
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("bench: event stream line %d: %s", e.Line, e.Msg)
}

// readStream reads a server-sent event stream of completion or chat
// chunks until data: [DONE] or the end of r, calling now for each line's
// arrival time. A chunk's tokens are the entries of its logprobs when it
// has them (one per token, so a token without text still counts), else
// one when it carries any text and no chunk before it had log-probs. An error from r (a connection that broke)
// is returned with what was read before it.
func readStream(r io.Reader, now func() time.Duration) (*streamResult, error) {
	res := &streamResult{}
	s := client.NewStream(r)
	for {
		data, err := s.Next()
		if err != nil {
			res.End = now()
			switch {
			case errors.Is(err, io.EOF):
				return res, nil
			case errors.Is(err, client.ErrLongLine):
				return res, &StreamError{Line: s.Line(), Msg: err.Error()}
			}
			return res, err
		}
		if string(data) == "[DONE]" {
			res.Done, res.End = true, now()
			return res, nil
		}
		var c chunk
		if jerr := json.Unmarshal(data, &c); jerr != nil {
			res.End = now()
			return res, &StreamError{Line: s.Line(), Msg: "not a JSON chunk: " + jerr.Error()}
		}
		at := now()
		if len(c.Error) > 0 && string(c.Error) != "null" {
			res.ServerError = errorMessage(c.Error)
		}
		if c.Usage != nil {
			u := *c.Usage
			res.Usage = &u
		}
		n := 0
		for _, ch := range c.Choices {
			switch {
			case ch.Logprobs != nil && (len(ch.Logprobs.Tokens) > 0 || len(ch.Logprobs.Content) > 0):
				n += len(ch.Logprobs.Tokens) + len(ch.Logprobs.Content)
				res.logprobs = true
			case res.logprobs:
				// Once tokens come with log-probs, text without them is
				// held text a server releases at the end (the bytes of an
				// incomplete character, as U+FFFD), not a token.
			case ch.Text != nil && *ch.Text != "":
				n++
			case ch.Delta != nil && (nonEmpty(ch.Delta.Content) || nonEmpty(ch.Delta.ReasoningContent) || nonEmpty(ch.Delta.Reasoning) || (len(ch.Delta.ToolCalls) > 0 && string(ch.Delta.ToolCalls) != "null")):
				n++
			}
			if len(res.IDs)+len(ch.TokenIDs) <= maxIDs {
				res.IDs = append(res.IDs, ch.TokenIDs...)
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				res.Finish = *ch.FinishReason
			}
		}
		if n > 0 {
			res.Events = append(res.Events, tokenEvent{At: at, Tokens: n})
		}
	}
}

func nonEmpty(s *string) bool { return s != nil && *s != "" }

// errorMessage reads an OpenAI error object ({"message", "type", "code"})
// or a bare string as one line of text, bounded.
func errorMessage(raw json.RawMessage) string {
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	var s string
	switch {
	case json.Unmarshal(raw, &e) == nil && (e.Message != "" || e.Type != ""):
		s = strings.TrimSpace(e.Type + ": " + e.Message)
	case json.Unmarshal(raw, &s) == nil:
	default:
		s = string(raw)
	}
	return clip(s)
}

// clip bounds a server's text kept in a report to one short line.
func clip(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "?")), " ")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

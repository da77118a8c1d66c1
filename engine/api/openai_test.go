package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/lfmq/lfmq/engine/sched"
)

// sdkClient is the official OpenAI Go SDK pointed at a test server.
func sdkClient(base, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithRequestTimeout(60*time.Second))
}

// sdkWant is what a fixture model answers to checkOpenAISDK's requests.
type sdkWant struct {
	// chat is the start of the greedy answer to "What does the ls command
	// do?" (16 prompt tokens, 32 generated).
	chat string
	// toolFinish is the finish reason of the tool-call turn: "tool_calls"
	// when the model ends its turn after the call, "length" when it runs on.
	toolFinish string
	// reasoning is the start of the reasoning_content of the thinking
	// prompt; empty for a model that does not think there.
	reasoning string
}

// TestOpenAISDK drives the server with github.com/openai/openai-go: model
// list, chat, streaming chat with usage, a tool-call round trip, reasoning
// content, and the 400/401/404/429 error shapes.
func TestOpenAISDK(t *testing.T) {
	ts := newTestServer(t, Options{APIKey: "k-123"}, sched.Config{MaxNumSeqs: 1, MaxQueue: 1})
	// The fixture's greedy continuation of chat_single.
	checkOpenAISDK(t, ts, sdkWant{chat: "mkm - a file system. The  file  file", toolFinish: "tool_calls", reasoning: `"37 * 80`})
}

// checkOpenAISDK runs the SDK's requests against ts, a server whose API
// key is "k-123" with one sequence slot and a queue of one.
func checkOpenAISDK(t *testing.T, ts *testServer, want sdkWant) {
	client := sdkClient(ts.URL, "k-123")
	ctx := context.Background()

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != "tiny" || page.Data[0].OwnedBy != "lfmq" {
			t.Errorf("models %+v", page.Data)
		}
		m, err := client.Models.Get(ctx, "tiny")
		if err != nil || m.ID != "tiny" {
			t.Errorf("get tiny: %+v %v", m, err)
		}
		var apiErr *openai.Error
		if _, err := client.Models.Get(ctx, "gpt-4o"); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
			t.Errorf("get gpt-4o: %v", err)
		}
	})

	t.Run("chat", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:       "tiny",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What does the ls command do?")},
			Temperature: openai.Float(0),
			MaxTokens:   openai.Int(32),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; !strings.HasPrefix(got, want.chat) || resp.Choices[0].FinishReason != "length" {
			t.Errorf("%q %q", got, resp.Choices[0].FinishReason)
		}
		if resp.Usage.PromptTokens != 16 || resp.Usage.CompletionTokens != 32 || resp.Usage.TotalTokens != 48 {
			t.Errorf("usage %+v", resp.Usage)
		}
	})

	t.Run("streaming with usage", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         "tiny",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What does the ls command do?")},
			Temperature:   openai.Float(0),
			MaxTokens:     openai.Int(32),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		acc := openai.ChatCompletionAccumulator{}
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; !strings.HasPrefix(got, want.chat) || acc.Choices[0].FinishReason != "length" || chunks < 4 {
			t.Errorf("%q %q after %d chunks", got, acc.Choices[0].FinishReason, chunks)
		}
		if acc.Usage.CompletionTokens != 32 || acc.Usage.PromptTokens != 16 {
			t.Errorf("usage %+v", acc.Usage)
		}
	})

	t.Run("tool call round trip", func(t *testing.T) {
		tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        "calculate",
			Description: openai.String("Evaluate an arithmetic expression."),
			Parameters: shared.FunctionParameters{"type": "object",
				"properties": map[string]any{"expression": map[string]any{"type": "string"}}, "required": []string{"expression"}},
		})}
		msgs := []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a helpful assistant."),
			openai.UserMessage("Please compute 128 + 256."),
		}
		params := openai.ChatCompletionNewParams{Model: "tiny", Messages: msgs, Tools: tools, Temperature: openai.Float(0), MaxTokens: openai.Int(32)}
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		msg := resp.Choices[0].Message
		if string(resp.Choices[0].FinishReason) != want.toolFinish || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "calculate" {
			t.Fatalf("first turn: %+v", resp.Choices[0])
		}
		if !strings.Contains(msg.ToolCalls[0].Function.Arguments, `"expression"`) {
			t.Errorf("arguments %s", msg.ToolCalls[0].Function.Arguments)
		}
		// Assistant tool call → tool result → final answer.
		params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(`{"result": 384}`, msg.ToolCalls[0].ID))
		final, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if final.Usage.PromptTokens <= resp.Usage.PromptTokens+resp.Usage.CompletionTokens || final.Choices[0].FinishReason == "" {
			t.Errorf("final turn: usage %+v after %+v, finish %q", final.Usage, resp.Usage, final.Choices[0].FinishReason)
		}
		// Streamed, the same first turn gives the same call.
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "tiny", Messages: msgs, Tools: tools, Temperature: openai.Float(0), MaxTokens: openai.Int(32)})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.ToolCalls; len(got) != 1 || got[0].Function.Arguments != msg.ToolCalls[0].Function.Arguments || acc.Choices[0].FinishReason != want.toolFinish {
			t.Errorf("streamed calls %+v, finish %q", got, acc.Choices[0].FinishReason)
		}
	})

	t.Run("reasoning content", func(t *testing.T) {
		if want.reasoning == "" {
			t.Skip("this model does not think on the prompt")
		}
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("Quick check: what is 15 + 30?"),
				openai.AssistantMessage("15 + 30 = 45."),
				openai.UserMessage("What is 27 times 45? Réponds vite — merci! 日本語も。"),
			},
			Temperature: openai.Float(0), MaxTokens: openai.Int(32),
		})
		if err != nil {
			t.Fatal(err)
		}
		raw := resp.Choices[0].Message.JSON.ExtraFields["reasoning_content"].Raw()
		if !strings.HasPrefix(raw, want.reasoning) {
			t.Errorf("reasoning_content %s", raw)
		}
	})

	t.Run("errors", func(t *testing.T) {
		var apiErr *openai.Error
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, Temperature: openai.Float(7)})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" || apiErr.Param != "temperature" {
			t.Errorf("400: %v", err)
		}
		bad := sdkClient(ts.URL, "wrong")
		_, err = bad.Models.List(ctx)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
			t.Errorf("401: %v", err)
		}
		_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
			t.Errorf("404: %v", err)
		}
		// 429: one long stream runs, one request waits, the next is refused.
		// min_tokens keeps the stream running past the stop tokens, so the
		// slot stays taken however fast the machine is.
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		long := client.Chat.Completions.NewStreaming(sctx, openai.ChatCompletionNewParams{Model: "tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(3000), Temperature: openai.Float(0)},
			option.WithJSONSet("min_tokens", 3000))
		long.Next()
		// The first chunk can come before the scheduler admits the stream
		// (see TestQueueFull): wait until it runs.
		waitFor(t, func() bool { st := ts.sched.Stats(); return st.Running == 1 && st.Waiting == 0 })
		queued := make(chan error, 1)
		go func() {
			_, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(2)})
			queued <- err
		}()
		waitFor(t, func() bool { return ts.sched.Stats().Waiting == 1 })
		_, err = client.Completions.New(ctx, openai.CompletionNewParams{Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(2)})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "queue_full" || apiErr.Type != "rate_limit_error" {
			t.Errorf("429: %v", err)
		}
		cancel()
		long.Close()
		if err := <-queued; err != nil {
			t.Errorf("the queued request: %v", err)
		}
	})
}

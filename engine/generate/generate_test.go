package generate

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

type refPrompt struct {
	Name         string          `json:"name"`
	Kind         string          `json:"kind"`
	Rendered     string          `json:"rendered_text"`
	InputIDs     []int           `json:"input_ids"`
	GreedyIDs    []int           `json:"greedy_ids"`
	GreedyText   string          `json:"greedy_text"`
	FirstStop    *int            `json:"first_stop_token_index"`
	Messages     json.RawMessage `json:"messages"`
	Tools        json.RawMessage `json:"tools"`
	AddGenPrompt bool            `json:"add_generation_prompt"`
}

func loadPrompts(t *testing.T) []refPrompt {
	t.Helper()
	data, err := os.ReadFile("../../testdata/tiny-lfm2-moe/reference/prompts.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Prompts []refPrompt `json:"prompts"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Prompts
}

func openTiny(t *testing.T) *Session {
	t.Helper()
	s, err := Open(tinyModel, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func greedy() sample.Params {
	p := sample.Neutral()
	p.Temperature = 0
	return p
}

// TestFixtureGreedy: prompts tokenize to the fixture's ids, and greedy
// generation reproduces the fixture's float32 greedy continuation up to the
// first stop token.
func TestFixtureGreedy(t *testing.T) {
	s := openTiny(t)
	if !slices.Equal(s.StopIDs, []int{2, 7}) {
		t.Errorf("stop ids %v, want [2 7] (<|endoftext|>, <|im_end|> = eos)", s.StopIDs)
	}
	for _, p := range loadPrompts(t) {
		t.Run(p.Name, func(t *testing.T) {
			var ids []int
			if p.Kind == "plain" {
				ids = s.EncodeText(p.Rendered)
			} else {
				msgs, err := chat.ParseMessages(p.Messages)
				if err != nil {
					t.Fatal(err)
				}
				req := chat.Request{Messages: msgs, AddGenerationPrompt: p.AddGenPrompt}
				if len(p.Tools) > 0 && string(p.Tools) != "null" {
					if req.Tools, err = chat.ParseTools(p.Tools); err != nil {
						t.Fatal(err)
					}
				}
				if ids, err = s.EncodeChatRequest(req); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(ids, p.InputIDs) {
				t.Fatalf("prompt ids differ from the fixture:\n got %v\nwant %v", ids, p.InputIDs)
			}
			var text strings.Builder
			res, err := s.Run(context.Background(), ids, Options{MaxTokens: 32, Params: greedy(), OnText: func(x string) { text.WriteString(x) }})
			if err != nil {
				t.Fatal(err)
			}
			want := p.GreedyIDs
			if p.FirstStop != nil {
				want = want[:*p.FirstStop]
				if !res.Stopped {
					t.Error("generation did not stop at the stop token")
				}
			}
			if !slices.Equal(res.Tokens, want) {
				t.Errorf("greedy tokens\n got %v\nwant %v", res.Tokens, want)
			}
			wantText, _ := s.Tokenizer.Decode(want)
			if text.String() != wantText {
				t.Errorf("streamed text %q, want %q", text.String(), wantText)
			}
		})
	}
}

func TestSeededSampling(t *testing.T) {
	s := openTiny(t)
	ids, err := s.EncodeChat([]byte(`[{"role":"user","content":"Tell me about the ls command."}]`), nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	p := sample.Neutral()
	p.Temperature, p.TopK, p.Seed = 0.8, 50, 2026
	a, err := s.Run(context.Background(), ids, Options{MaxTokens: 24, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Run(context.Background(), ids, Options{MaxTokens: 24, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Tokens, b.Tokens) {
		t.Errorf("same seed, different tokens:\n%v\n%v", a.Tokens, b.Tokens)
	}
	p.Seed = 2027
	c, _ := s.Run(context.Background(), ids, Options{MaxTokens: 24, Params: p})
	if slices.Equal(a.Tokens, c.Tokens) && len(a.Tokens) > 4 {
		t.Error("a different seed gave the same tokens")
	}
}

func TestErrors(t *testing.T) {
	s := openTiny(t)
	if _, err := s.Run(context.Background(), nil, Options{MaxTokens: 1, Params: greedy()}); err == nil {
		t.Error("empty prompt accepted")
	}
	long := make([]int, 5000)
	for i := range long {
		long[i] = 300
	}
	if _, err := s.Run(context.Background(), long, Options{MaxTokens: 1, Params: greedy()}); err == nil || !strings.Contains(err.Error(), "4096") {
		t.Errorf("prompt over the context: err = %v", err)
	}
	bad := sample.Neutral()
	bad.Temperature = 5
	if _, err := s.Run(context.Background(), []int{1}, Options{MaxTokens: 1, Params: bad}); err == nil || !strings.Contains(err.Error(), "temperature") {
		t.Errorf("bad temperature: err = %v", err)
	}
	if _, err := s.EncodeChat([]byte(`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]`), nil, time.Time{}); err == nil {
		t.Error("image content accepted")
	}
}

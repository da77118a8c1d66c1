package prompt

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

func load(t *testing.T) (*tokenizer.Tokenizer, *chat.Template) {
	t.Helper()
	tok, err := tokenizer.Load(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Load(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	return tok, tmpl
}

// TestFixturePrompts: the chat prompts of reference/prompts.json encode to
// the fixture's input ids (made independently with HF tokenizers).
func TestFixturePrompts(t *testing.T) {
	tok, tmpl := load(t)
	enc := New(tok, tmpl)
	data, err := os.ReadFile("../../testdata/tiny-lfm2-moe/reference/prompts.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Prompts []struct {
			Name     string          `json:"name"`
			Kind     string          `json:"kind"`
			InputIDs []int           `json:"input_ids"`
			Messages json.RawMessage `json:"messages"`
			Tools    json.RawMessage `json:"tools"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range f.Prompts {
		if p.Kind != "chat" {
			continue
		}
		n++
		msgs, err := chat.ParseMessages(p.Messages)
		if err != nil {
			t.Fatal(err)
		}
		req := chat.Request{Messages: msgs, AddGenerationPrompt: true}
		if len(p.Tools) > 0 && string(p.Tools) != "null" {
			if req.Tools, err = chat.ParseTools(p.Tools); err != nil {
				t.Fatal(err)
			}
		}
		ids, err := enc.Chat(req)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, p.InputIDs) {
			t.Errorf("%s: ids differ\n got %v\nwant %v", p.Name, ids, p.InputIDs)
		}
	}
	if n == 0 {
		t.Fatal("no chat prompts in the fixture")
	}
}

// TestUserSpecialsStayText: a special-token string typed by the user is
// encoded as ordinary text, never as the control id.
func TestUserSpecialsStayText(t *testing.T) {
	tok, tmpl := load(t)
	imEnd, _ := tok.TokenID("<|im_end|>")
	ids, err := New(tok, tmpl).Chat(chat.Request{Messages: []chat.Message{{Role: "user", Content: "a<|im_end|>b"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The template emits exactly one <|im_end|>, after the user turn.
	if c := countOf(ids, imEnd); c != 1 {
		t.Errorf("<|im_end|> appears %d times as a control id, want 1 (the template's)", c)
	}
}

func countOf(ids []int, id int) int {
	n := 0
	for _, v := range ids {
		if v == id {
			n++
		}
	}
	return n
}

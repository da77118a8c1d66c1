package chat

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixture = "../../testdata/tiny-lfm2-moe"

// fixtureSpecials reads the special added tokens of the fixture tokenizer,
// indexed by id.
func fixtureSpecials(t *testing.T) map[int]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixture, "model/tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &tok); err != nil {
		t.Fatal(err)
	}
	m := map[int]string{}
	for _, a := range tok.AddedTokens {
		if a.Special {
			m[a.ID] = a.Content
		}
	}
	return m
}

func loadFixture(t *testing.T) *Template {
	t.Helper()
	tmpl, err := Load(filepath.Join(fixture, "model"))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestFixtureCorpora renders every chat and instruct record of the fixture
// from its messages and tools and compares with the record's text, which
// the fixture's builder rendered with Hugging Face (no generation prompt).
// The special segments are checked against the record's input_ids, which
// were tokenized with special tokens matched.
func TestFixtureCorpora(t *testing.T) {
	tmpl := loadFixture(t)
	specials := fixtureSpecials(t)
	var specialList []string
	for _, s := range specials {
		specialList = append(specialList, s)
	}
	for _, corpus := range []string{"chat", "instruct"} {
		t.Run(corpus, func(t *testing.T) {
			f, err := os.Open(filepath.Join(fixture, "corpora", corpus+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<24)
			records, idChecks := 0, 0
			for sc.Scan() {
				var rec struct {
					ID       string          `json:"id"`
					Messages json.RawMessage `json:"messages"`
					Tools    json.RawMessage `json:"tools"`
					Text     string          `json:"text"`
					InputIDs []int           `json:"input_ids"`
				}
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					t.Fatal(err)
				}
				records++
				msgs, err := ParseMessages(rec.Messages)
				if err != nil {
					t.Fatalf("%s: %v", rec.ID, err)
				}
				req := Request{Messages: msgs}
				if rec.Tools != nil {
					if req.Tools, err = ParseTools(rec.Tools); err != nil {
						t.Fatalf("%s: %v", rec.ID, err)
					}
				}
				got, err := tmpl.Render(req)
				if err != nil {
					t.Fatalf("%s: %v", rec.ID, err)
				}
				if got != rec.Text {
					t.Errorf("%s: render mismatch\n got: %q\nwant: %q", rec.ID, got, rec.Text)
					continue
				}
				segs, err := tmpl.RenderSegments(req, specialList, TrustAssistant())
				if err != nil {
					t.Fatalf("%s: %v", rec.ID, err)
				}
				if joinSegments(segs) != rec.Text {
					t.Errorf("%s: segments do not join to the text", rec.ID)
				}
				// Without specials typed in non-assistant messages, the
				// special segments are exactly the special ids.
				typed := false
				for _, m := range msgs {
					for _, s := range specialList {
						if m.Role != "assistant" && strings.Contains(m.Content, s) {
							typed = true
						}
					}
				}
				if typed {
					continue
				}
				idChecks++
				var want, gotSpecials []string
				for _, id := range rec.InputIDs {
					if s, ok := specials[id]; ok {
						want = append(want, s)
					}
				}
				for _, s := range segs {
					if s.Special {
						gotSpecials = append(gotSpecials, s.Text)
					}
				}
				if strings.Join(gotSpecials, " ") != strings.Join(want, " ") {
					t.Errorf("%s: special segments\n got: %v\nwant: %v", rec.ID, gotSpecials, want)
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if records == 0 || idChecks == 0 {
				t.Fatalf("checked %d records, %d against ids", records, idChecks)
			}
			t.Logf("%d records rendered, %d checked against special ids", records, idChecks)
		})
	}
}

// TestFixturePrompts renders the chat prompts of reference/prompts.json.
func TestFixturePrompts(t *testing.T) {
	tmpl := loadFixture(t)
	data, err := os.ReadFile(filepath.Join(fixture, "reference/prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Prompts []struct {
			Name                string          `json:"name"`
			Kind                string          `json:"kind"`
			RenderedText        string          `json:"rendered_text"`
			Messages            json.RawMessage `json:"messages"`
			Tools               json.RawMessage `json:"tools"`
			AddGenerationPrompt bool            `json:"add_generation_prompt"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range file.Prompts {
		if p.Kind != "chat" {
			continue
		}
		n++
		t.Run(p.Name, func(t *testing.T) {
			msgs, err := ParseMessages(p.Messages)
			if err != nil {
				t.Fatal(err)
			}
			tools, err := ParseTools(p.Tools)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(Request{Messages: msgs, Tools: tools, AddGenerationPrompt: p.AddGenerationPrompt})
			if err != nil {
				t.Fatal(err)
			}
			if got != p.RenderedText {
				t.Errorf("got  %q\nwant %q", got, p.RenderedText)
			}
		})
	}
	if n != 4 {
		t.Fatalf("found %d chat prompts, want 4", n)
	}
}

func TestLoad(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join(fixture, "model/tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Messages: []Message{{Role: "user", Content: "hi"}}, AddGenerationPrompt: true}
	const want = "<|startoftext|><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"

	t.Run("tokenizer_config only", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		tmpl, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tmpl.Render(req); err != nil || got != want {
			t.Fatalf("Render = %q, %v; want %q", got, err, want)
		}
	})
	t.Run("jinja file wins", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{{ eos_token }}|{{ bos_token }}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		tmpl, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tmpl.Render(req); err != nil || got != "<|im_end|>|<|startoftext|>" {
			t.Fatalf("Render = %q, %v", got, err)
		}
	})
	t.Run("named templates and token objects", func(t *testing.T) {
		dir := t.TempDir()
		body := `{"bos_token": {"content": "<B>", "lstrip": false}, "eos_token": null,
			"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "{{ bos_token }}{{ eos_token is defined }}"}]}`
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		tmpl, err := Load(dir, WithToken("pad_token", "<P>"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tmpl.Render(req); err != nil || got != "<B>False" {
			t.Fatalf("Render = %q, %v", got, err)
		}
	})
	t.Run("no template", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"bos_token": "<s>"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir)
		if !errors.Is(err, ErrNoTemplate) {
			t.Fatalf("err = %v, want ErrNoTemplate", err)
		}
		if _, err := Load(t.TempDir()); !errors.Is(err, ErrNoTemplate) {
			t.Fatalf("empty dir: err = %v, want ErrNoTemplate", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir); err == nil || errors.Is(err, ErrNoTemplate) {
			t.Fatalf("err = %v, want a decode error", err)
		}
	})
}

func BenchmarkRenderSegments(b *testing.B) {
	tmpl, err := Load(filepath.Join(fixture, "model"))
	if err != nil {
		b.Fatal(err)
	}
	tools, err := ParseTools([]byte(`[{"name": "calculate", "description": "Evaluate an arithmetic expression.", "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "Expression to evaluate"}}, "required": ["expression"]}}]`))
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Tools: tools, AddGenerationPrompt: true}
	for i := range 50 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		req.Messages = append(req.Messages, Message{Role: role, Content: strings.Repeat("Some text with <tags> and <|im_end|>. ", 20)})
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := tmpl.RenderSegments(req, []string{"<|im_start|>", "<|im_end|>", "<|tool_list_start|>", "<|tool_list_end|>", "<|startoftext|>"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderTools renders a one-message chat with n small tools
// through the fixture's LFM2 template, which appends each tool's JSON to
// one growing string: the time grows with the square of n, which is why
// the server takes at most 128 tools (engine/api maxTools).
func BenchmarkRenderTools(b *testing.B) {
	tmpl, err := Load(filepath.Join(fixture, "model"))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{128, 1000, 4000} {
		var list strings.Builder
		list.WriteString("[")
		for i := range n {
			if i > 0 {
				list.WriteString(",")
			}
			fmt.Fprintf(&list, `{"type": "function", "function": {"name": "tool_%d", "description": "Does thing %d.", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}`, i, i)
		}
		list.WriteString("]")
		tools, err := ParseTools([]byte(list.String()))
		if err != nil {
			b.Fatal(err)
		}
		req := Request{Tools: tools, AddGenerationPrompt: true, Messages: []Message{{Role: "user", Content: "hi"}}}
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := tmpl.Render(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

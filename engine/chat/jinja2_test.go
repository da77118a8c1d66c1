package chat

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
)

// pinnedNow is the clock of testdata/gen_jinja2_cases.py.
var pinnedNow = time.Date(2025, 3, 4, 5, 6, 7, 0, time.Local)

// messagesFromHF builds messages from Hugging Face-shaped dictionaries
// (thinking, tool_calls with object arguments).
func messagesFromHF(t *testing.T, v any) []Message {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("messages: got %T", v)
	}
	str := func(o *Object, k string) string {
		s, _ := o.vals[k].(string)
		return s
	}
	var msgs []Message
	for _, item := range list {
		o := item.(*Object)
		m := Message{Role: str(o, "role"), Content: str(o, "content"), Thinking: str(o, "thinking"),
			ToolCallID: str(o, "tool_call_id"), Name: str(o, "name")}
		if calls, ok := o.vals["tool_calls"].([]any); ok {
			for _, c := range calls {
				co := c.(*Object)
				fn := co.vals["function"].(*Object)
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: str(co, "id"), Type: str(co, "type"),
					Name: str(fn, "name"), Arguments: fn.vals["arguments"].(*Object)})
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestJinja2Cases renders every case of testdata/jinja2_cases.json, whose
// expected output came from Python Jinja2 set up as transformers sets it up.
func TestJinja2Cases(t *testing.T) {
	raw, err := os.ReadFile("testdata/jinja2_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Data  json.RawMessage `json:"data"`
		Cases []struct {
			Name     string  `json:"name"`
			Template string  `json:"template"`
			Want     *string `json:"want"`
			Error    *string `json:"error"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	dv, err := DecodeJSON(file.Data)
	if err != nil {
		t.Fatal(err)
	}
	data := dv.(*Object)
	req := Request{Now: pinnedNow, Kwargs: map[string]any{}}
	var bos string
	for _, k := range data.Keys() {
		v, _ := data.Get(k)
		switch k {
		case "messages":
			req.Messages = messagesFromHF(t, v)
		case "tools":
			req.Tools = v.([]any)
		case "add_generation_prompt":
			req.AddGenerationPrompt = v.(bool)
		case "bos_token":
			bos = v.(string)
		default:
			req.Kwargs[k] = v
		}
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			tmpl, err := Parse(c.Template, WithToken("bos_token", bos))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := tmpl.Render(req)
			if c.Error != nil {
				var ex *ExceptionError
				if !errors.As(err, &ex) || ex.Message != *c.Error {
					t.Fatalf("Render error = %v, want exception %q", err, *c.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != *c.Want {
				t.Errorf("Render mismatch\n got: %q\nwant: %q\ntranslated: %q", got, *c.Want, mustTranslate(t, c.Template))
			}
		})
	}
}

func mustTranslate(t *testing.T, src string) string {
	t.Helper()
	out, err := translate(src)
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}

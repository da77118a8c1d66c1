package chat

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMessages(t *testing.T) {
	msgs, err := ParseMessages([]byte(`[
		{"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
		{"role": "user", "content": "hi", "name": "ann"},
		{"role": "assistant", "content": null, "reasoning_content": "think", "reasoning": "ignored",
		 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": {\"q\": [true]}}"}},
		                {"function": {"name": "g", "arguments": {"k": "v"}}},
		                {"function": {"name": "h", "arguments": ""}}]},
		{"role": "assistant", "reasoning": "only reasoning"},
		{"role": "tool", "tool_call_id": "c1", "content": "42"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 {
		t.Fatalf("got %d messages", len(msgs))
	}
	if msgs[0].Content != "a\nb" {
		t.Errorf("text parts = %q, want %q", msgs[0].Content, "a\nb")
	}
	if msgs[1].Name != "ann" || msgs[4].ToolCallID != "c1" || msgs[4].Content != "42" {
		t.Errorf("name / tool_call_id lost: %+v %+v", msgs[1], msgs[4])
	}
	a := msgs[2]
	if a.Content != "" || a.Thinking != "think" || len(a.ToolCalls) != 3 {
		t.Fatalf("assistant = %+v", a)
	}
	if got := strings.Join(a.ToolCalls[0].Arguments.Keys(), ","); got != "z,a" {
		t.Errorf("argument order = %s", got)
	}
	if a.ToolCalls[1].Name != "g" || a.ToolCalls[1].Arguments.Len() != 1 || a.ToolCalls[2].Arguments.Len() != 0 {
		t.Errorf("tool calls = %+v", a.ToolCalls)
	}
	if msgs[3].Thinking != "only reasoning" {
		t.Errorf("reasoning = %q", msgs[3].Thinking)
	}

	// The template sees the documented shape.
	tmpl, err := Parse(`{% for m in messages %}{{ m | tojson }}
{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(Request{Messages: msgs[1:3]})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"role": "user", "content": "hi", "name": "ann"}
{"role": "assistant", "content": "", "thinking": "think", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": {"q": [true]}}}}, {"type": "function", "function": {"name": "g", "arguments": {"k": "v"}}}, {"type": "function", "function": {"name": "h", "arguments": {}}}]}
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestParseMessagesErrors(t *testing.T) {
	tests := []struct {
		name, body, field string
		is                error
		// msg, when set, is the whole message: the request's terms, never
		// Go types or package prefixes.
		msg string
	}{
		{"not an array", `{"role": "user"}`, "messages", nil, ""},
		{"string part", `[{"role": "user", "content": ["hi"]}]`, "messages[0].content[0]", nil,
			`messages[0].content[0]: expected a content part such as {"type": "text", "text": "…"}, got JSON string`},
		{"arguments not JSON", `[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]`, "messages[0].tool_calls[0].function.arguments", nil,
			"messages[0].tool_calls[0].function.arguments: not valid JSON: invalid character 'b'"},
		{"missing role", `[{"content": "x"}]`, "messages[0].role", nil, ""},
		{"image part", `[{"role": "user", "content": "x"}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:"}}]}]`, "messages[1].content[1]", ErrImageContent, ""},
		{"audio part", `[{"role": "user", "content": [{"type": "input_audio"}]}]`, "messages[0].content[0]", ErrContentPart, ""},
		{"text part without text", `[{"role": "user", "content": [{"type": "text"}]}]`, "messages[0].content[0].text", nil, ""},
		{"number content", `[{"role": "user", "content": 5}]`, "messages[0].content", nil, ""},
		{"bad arguments", `[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]`, "messages[0].tool_calls[0].function.arguments", nil, ""},
		{"array arguments", `[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]`, "messages[0].tool_calls[0].function.arguments", nil, ""},
		{"missing function name", `[{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]`, "messages[0].tool_calls[0].function.name", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMessages([]byte(tt.body))
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RequestError", err)
			}
			if re.Field != tt.field {
				t.Errorf("Field = %q, want %q", re.Field, tt.field)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.is)
			}
			if got := re.Field + ": " + re.Err.Error(); tt.msg != "" && got != tt.msg {
				t.Errorf("message %q, want %q", got, tt.msg)
			}
		})
	}
}

func TestParseTools(t *testing.T) {
	tools, err := ParseTools([]byte(`[{"name": "f", "parameters": {"b": 1, "a": 2}}]`))
	if err != nil || len(tools) != 1 {
		t.Fatalf("ParseTools = %v, %v", tools, err)
	}
	if tools, err := ParseTools([]byte(`null`)); err != nil || tools != nil {
		t.Errorf("null: %v, %v", tools, err)
	}
	var re *RequestError
	if _, err := ParseTools([]byte(`{"name": "f"}`)); !errors.As(err, &re) || re.Field != "tools" {
		t.Errorf("object: err = %v", err)
	}
}

func TestRenderErrors(t *testing.T) {
	t.Run("raise_exception", func(t *testing.T) {
		tmpl, err := Parse(`{% for m in messages %}{% if m.role == 'bot' %}{{ raise_exception('Unknown role: ' + m.role) }}{% endif %}{{ m.content }}{% endfor %}`)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tmpl.Render(Request{Messages: []Message{{Role: "user", Content: "a"}, {Role: "bot", Content: "b"}}})
		var ex *ExceptionError
		if !errors.As(err, &ex) || ex.Message != "Unknown role: bot" {
			t.Fatalf("err = %v, want ExceptionError", err)
		}
	})
	t.Run("raise_exception in a macro", func(t *testing.T) {
		tmpl, err := Parse(`{% macro check(x) %}{% if x %}{{ raise_exception('nested') }}{% endif %}{% endmacro %}{{ check(true) }}`)
		if err != nil {
			t.Fatal(err)
		}
		var ex *ExceptionError
		if _, err := tmpl.Render(Request{}); !errors.As(err, &ex) || ex.Message != "nested" {
			t.Fatalf("err = %v, want ExceptionError", err)
		}
	})
	t.Run("engine error", func(t *testing.T) {
		tmpl, err := Parse(`{{ x | no_such_filter }}`, WithName("t.jinja"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tmpl.Render(Request{})
		var re *RenderError
		if !errors.As(err, &re) || re.Name != "t.jinja" {
			t.Fatalf("err = %v, want RenderError", err)
		}
	})
	t.Run("reserved kwarg", func(t *testing.T) {
		tmpl, err := Parse(`x`)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"messages", "raise_exception", fnToJSON} {
			var re *RequestError
			if _, err := tmpl.Render(Request{Kwargs: map[string]any{k: 1}}); !errors.As(err, &re) || re.Field != "chat_template_kwargs."+k {
				t.Errorf("%s: err = %v", k, err)
			}
		}
		var re *RequestError
		if _, err := tmpl.Render(Request{Kwargs: map[string]any{"x": struct{}{}}}); !errors.As(err, &re) {
			t.Errorf("unsupported type: err = %v", err)
		}
	})
	t.Run("kwargs override tokens", func(t *testing.T) {
		tmpl, err := Parse(`{{ bos_token }}{{ keep_past_thinking | default(false) }}{{ m.b }}{{ m | tojson }}`, WithToken("bos_token", "<s>"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(Request{Kwargs: map[string]any{"bos_token": "", "keep_past_thinking": true, "m": map[string]any{"b": 2, "a": []string{"x"}}}})
		if err != nil || got != `True2{"a": ["x"], "b": 2}` {
			t.Errorf("Render = %q, %v", got, err)
		}
	})
}

// TestParseToolsRefusesNonTools: a tool that names no function would be
// rendered into the prompt as given (a bare string, an OpenAI wrapper
// whose function was left out), so it is refused naming the element.
func TestParseToolsRefusesNonTools(t *testing.T) {
	tests := []struct {
		name, tools, field string
	}{
		{"string", `["calculate"]`, "tools[0]"},
		{"number", `[{"name": "f"}, 1]`, "tools[1]"},
		{"wrapper without function", `[{"type": "function"}]`, "tools[0]"},
		{"function not an object", `[{"type": "function", "function": "f"}]`, "tools[0]"},
		{"function without name", `[{"type": "function", "function": {"parameters": {}}}]`, "tools[0]"},
		{"empty name", `[{"name": ""}]`, "tools[0]"},
		{"object without name", `[{"parameters": {}}]`, "tools[0]"},
		{"parameters a string", `[{"type": "function", "function": {"name": "f", "parameters": "x"}}]`, "tools[0]"},
		{"parameters an array", `[{"name": "f", "parameters": []}]`, "tools[0]"},
		{"not JSON", `[{"name": "f"`, "tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTools([]byte(tt.tools))
			var re *RequestError
			if !errors.As(err, &re) || re.Field != tt.field {
				t.Fatalf("ParseTools(%s) = %v, want a RequestError for %s", tt.tools, err, tt.field)
			}
		})
	}
	for _, ok := range []string{
		`[]`,
		`[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]`,
		`[{"name": "f", "description": "bare form"}]`,
		`[{"name": "f", "parameters": null}]`,
	} {
		if _, err := ParseTools([]byte(ok)); err != nil {
			t.Errorf("ParseTools(%s): %v", ok, err)
		}
	}
}

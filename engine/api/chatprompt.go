package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/engine/chat"
)

// toolChoice is the resolved tool_choice of a chat request.
type toolChoice int

const (
	toolsAuto toolChoice = iota // tools rendered, parser on
	toolsNone                   // tools not rendered, parser off
)

// parseToolChoice applies docs/serving.md §5: "auto" (the default with
// tools) and "none" are served; "required" and a named function would
// need constrained decoding and are refused; tool_choice without tools is a 400.
func parseToolChoice(raw json.RawMessage, haveTools bool) (toolChoice, *Error) {
	if isNull(raw) {
		return toolsAuto, nil
	}
	if !haveTools {
		return 0, badRequest("tool_choice", "tool_choice needs tools")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "auto":
			return toolsAuto, nil
		case "none":
			return toolsNone, nil
		case "required":
			return 0, unsupported("tool_choice", `tool_choice "required" needs constrained decoding, which this server does not do; use "auto"`)
		}
		return 0, badRequest("tool_choice", `tool_choice %q; use "auto" or "none"`, s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err == nil && named.Type == "function" {
		return 0, unsupported("tool_choice", "a named tool_choice (%q) needs constrained decoding, which this server does not do; use \"auto\"", named.Function.Name)
	}
	return 0, badRequest("tool_choice", `tool_choice must be "auto", "none", "required" or {"type":"function",…}`)
}

// requestError turns the chat package's errors about a request into 400s.
func requestError(err error) *Error {
	var re *chat.RequestError
	var ee *chat.ExceptionError
	var rend *chat.RenderError
	switch {
	case errors.As(err, &re):
		param := re.Field
		if i := strings.IndexAny(param, ".["); i > 0 {
			param = param[:i]
		}
		if errors.Is(err, chat.ErrImageContent) {
			return unsupported(param, "%s: image content is not supported: this is a text-only model", re.Field)
		}
		return badRequest(param, "%s: %v", re.Field, re.Err)
	case errors.As(err, &ee):
		return badRequest("messages", "the chat template refused the conversation: %s", ee.Message)
	case errors.As(err, &rend):
		return badRequest("messages", "the chat template could not render the conversation: %v", rend.Err)
	}
	return nil
}

// historyToolCalls implements the server's assistant-history policy for
// templates that do not render tool_calls themselves (the LFM2 generation
// renders assistant content as given): the calls an OpenAI client sends
// back on an assistant message are written into its content in the form
// the model produced them, <|tool_call_start|>[name(key=value, …)]
// <|tool_call_end|>, before any text, so that the next turn sees the same
// history the model generated. Templates that mention tool_calls get them
// as structured data instead.
func historyToolCalls(msgs []chat.Message) {
	for i := range msgs {
		m := &msgs[i]
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		var b strings.Builder
		b.WriteString("<|tool_call_start|>[")
		for j, tc := range m.ToolCalls {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tc.Name)
			b.WriteByte('(')
			for k, key := range tc.Arguments.Keys() {
				if k > 0 {
					b.WriteString(", ")
				}
				v, _ := tc.Arguments.Get(key)
				b.WriteString(key)
				b.WriteByte('=')
				writePython(&b, v)
			}
			b.WriteByte(')')
		}
		b.WriteString("]<|tool_call_end|>")
		m.Content = b.String() + m.Content
		m.ToolCalls = nil
	}
}

// writePython writes a JSON value (chat.DecodeJSON's types) as a Python
// literal the way LFM2 models write call arguments: strings double-quoted
// with JSON escapes (also valid Python), True/False/None.
func writePython(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if t {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		b.WriteString(jsonString(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case float64:
		data, _ := json.Marshal(t)
		b.Write(data)
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writePython(b, e)
		}
		b.WriteByte(']')
	case *chat.Object:
		b.WriteByte('{')
		for i, k := range t.Keys() {
			if i > 0 {
				b.WriteString(", ")
			}
			e, _ := t.Get(k)
			b.WriteString(jsonString(k))
			b.WriteString(": ")
			writePython(b, e)
		}
		b.WriteByte('}')
	default:
		fmt.Fprint(b, t)
	}
}

// jsonString quotes s as JSON without HTML escaping.
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// kwargs reads chat_template_kwargs: a JSON object whose values reach the
// template (e.g. preserve_thinking).
func kwargs(raw json.RawMessage) (map[string]any, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	v, err := chat.DecodeJSON(raw)
	obj, ok := v.(*chat.Object)
	if err != nil || !ok {
		return nil, badRequest("chat_template_kwargs", "chat_template_kwargs must be a JSON object")
	}
	out := make(map[string]any, obj.Len())
	for _, k := range obj.Keys() {
		out[k], _ = obj.Get(k)
	}
	return out, nil
}

package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lfmq/lfmq/internal/jsonkind"
)

// Request is everything a chat template is rendered from.
type Request struct {
	// Messages is the conversation, oldest first.
	Messages []Message
	// Tools holds the tool definitions as ordered JSON values (see
	// DecodeJSON), passed to the template as they are. Nil renders as
	// None: the template sees no tools.
	Tools []any
	// AddGenerationPrompt asks the template to open an assistant turn.
	AddGenerationPrompt bool
	// Kwargs are extra template variables (a request's
	// chat_template_kwargs such as preserve_thinking). They may override
	// bos_token and the other token variables but not messages, tools,
	// add_generation_prompt or the template functions. Values have the
	// types DecodeJSON returns; map[string]any, []string and Go integer
	// and float types are accepted too (map keys are then sorted).
	Kwargs map[string]any
	// Now is the time strftime_now formats; the zero value means
	// time.Now() in the server's local zone. Renderings whose ids must not
	// depend on the day they run set it, usually to FixedDate().
	Now time.Time
}

// FixedDate is the time strftime_now sees where the ids of a rendering are
// part of a result that must be the same on every day: scored corpora, and
// calibration and eval records unless the run names another day. It is
// midnight UTC, so a template that prints the time of day prints 00:00.
func FixedDate() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }

// Message is one chat turn in the shape Hugging Face templates expect.
type Message struct {
	Role    string
	Content string
	// Thinking is the assistant's reasoning for this turn (an OpenAI
	// request's reasoning_content or reasoning). The template sees it as
	// message.thinking, only when it is not empty.
	Thinking   string
	ToolCalls  []ToolCall
	ToolCallID string // tool results: the call they answer
	Name       string
}

// ToolCall is one call made by an assistant turn. The template sees
// {"id": …, "type": "function", "function": {"name": …, "arguments": {…}}},
// with id only when it is not empty and arguments as an ordered mapping.
type ToolCall struct {
	ID        string
	Type      string // "function" when empty
	Name      string
	Arguments *Object
}

// ParseMessages converts the "messages" array of an OpenAI-style chat
// request into template messages. Content may be a string, null, or an
// array of text parts, which are joined with "\n" as vLLM does for
// text-only models; an image part yields a *RequestError wrapping
// ErrImageContent, any other part type one wrapping ErrContentPart.
// Tool-call arguments, a JSON string in the OpenAI format (an object is
// accepted too), are parsed into an ordered *Object; reasoning_content (or
// reasoning) becomes Thinking.
func ParseMessages(data []byte) ([]Message, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, jsonFieldError("messages", "an array of messages", err)
	}
	msgs := make([]Message, 0, len(raws))
	for i, raw := range raws {
		m, err := parseMessage(raw, fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// ParseTools converts the "tools" array of a request into ordered JSON
// values. null yields nil. Each tool must be an object naming its function,
// in the OpenAI form {"type": "function", "function": {"name": …}} or bare
// {"name": …} as some templates' callers send it; anything else (a string,
// a wrapper without its function) would be rendered into the prompt as
// given, so it is refused naming the element.
func ParseTools(data []byte) ([]any, error) {
	v, err := DecodeJSON(data)
	if err != nil {
		return nil, &RequestError{Field: "tools", Err: notJSON(err)}
	}
	switch t := v.(type) {
	case nil:
		return nil, nil
	case []any:
		for i, tool := range t {
			if err := checkTool(tool); err != nil {
				return nil, &RequestError{Field: fmt.Sprintf("tools[%d]", i), Err: err}
			}
		}
		return t, nil
	}
	return nil, &RequestError{Field: "tools", Err: fmt.Errorf("tools is %s, not an array", jsonKind(v))}
}

// notJSON words a DecodeJSON error of a request's field for its sender,
// without the package's prefix.
func notJSON(err error) error {
	return fmt.Errorf("not valid JSON: %s", strings.TrimPrefix(err.Error(), decodePrefix))
}

// jsonFieldError turns a JSON type error at field (or inside it) into a
// RequestError in the request's own terms: the field's JSON path, what it
// should be and the JSON type it got, never the Go types it was decoded
// into. want says what field itself should be.
func jsonFieldError(field, want string, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return &RequestError{Field: field, Err: err}
	}
	if te.Field == "" {
		return &RequestError{Field: field, Err: fmt.Errorf("expected %s, got JSON %s", want, te.Value)}
	}
	return &RequestError{Field: field + "." + te.Field, Err: fmt.Errorf("expected %s, got JSON %s", jsonkind.OfGo(te.Type.Kind()), te.Value)}
}

// checkTool checks that one tool definition is an object that names its
// function.
func checkTool(tool any) error {
	obj, ok := tool.(*Object)
	if !ok {
		return fmt.Errorf("a tool is an object such as {\"type\": \"function\", \"function\": {\"name\": \"calculate\", \"parameters\": {…}}}, not %s", jsonKind(tool))
	}
	if fn, ok := obj.Get("function"); ok {
		f, ok := fn.(*Object)
		if !ok {
			return fmt.Errorf("function is %s, not an object", jsonKind(fn))
		}
		obj = f
	} else if ty, ok := obj.Get("type"); ok && ty == "function" {
		return errors.New(`a tool of type "function" needs a "function" object with its name`)
	}
	name, _ := obj.Get("name")
	if s, ok := name.(string); !ok || s == "" {
		return errors.New("the function has no name: give a non-empty \"name\" string")
	}
	// parameters is a JSON Schema, rendered into the prompt as the model's
	// description of the arguments: anything but an object is a mistake.
	if p, ok := obj.Get("parameters"); ok && p != nil {
		if _, ok := p.(*Object); !ok {
			return fmt.Errorf("parameters is %s; give a JSON Schema object such as {\"type\": \"object\", \"properties\": {…}}", jsonKind(p))
		}
	}
	return nil
}

type wireMessage struct {
	Role             *string         `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func parseMessage(raw json.RawMessage, field string) (Message, error) {
	var w wireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return Message{}, jsonFieldError(field, `an object such as {"role": "user", "content": "Hi"}`, err)
	}
	if w.Role == nil || *w.Role == "" {
		return Message{}, &RequestError{Field: field + ".role", Err: errors.New("role is required")}
	}
	content, err := parseContent(w.Content, field+".content")
	if err != nil {
		return Message{}, err
	}
	m := Message{
		Role:       *w.Role,
		Content:    content,
		Name:       w.Name,
		ToolCallID: w.ToolCallID,
	}
	switch {
	case w.ReasoningContent != nil:
		m.Thinking = *w.ReasoningContent
	case w.Reasoning != nil:
		m.Thinking = *w.Reasoning
	}
	for j, tc := range w.ToolCalls {
		f := fmt.Sprintf("%s.tool_calls[%d].function", field, j)
		if tc.Function.Name == "" {
			return Message{}, &RequestError{Field: f + ".name", Err: errors.New("function name is required")}
		}
		args, err := parseArguments(tc.Function.Arguments)
		if err != nil {
			return Message{}, &RequestError{Field: f + ".arguments", Err: err}
		}
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: args})
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

func parseContent(raw json.RawMessage, field string) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", &RequestError{Field: field, Err: errors.New("content must be a string, null or an array of parts")}
	}
	texts := make([]string, 0, len(parts))
	for i, p := range parts {
		pf := fmt.Sprintf("%s[%d]", field, i)
		var part struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(p, &part); err != nil {
			return "", jsonFieldError(pf, `a content part such as {"type": "text", "text": "…"}`, err)
		}
		switch part.Type {
		case "text":
			if part.Text == nil {
				return "", &RequestError{Field: pf + ".text", Err: errors.New("text part without text")}
			}
			texts = append(texts, *part.Text)
		case "image_url", "image", "input_image", "image_file", "image_pil", "image_embeds":
			return "", &RequestError{Field: pf, Err: ErrImageContent}
		default:
			return "", &RequestError{Field: pf, Err: fmt.Errorf("%w: type %q", ErrContentPart, part.Type)}
		}
	}
	return strings.Join(texts, "\n"), nil
}

// parseArguments reads function arguments given as a JSON string holding an
// object (the OpenAI wire format) or as an object. An absent, null or blank
// value is an empty object.
func parseArguments(raw json.RawMessage) (*Object, error) {
	if isNull(raw) {
		return NewObject(), nil
	}
	data := []byte(raw)
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			return NewObject(), nil
		}
		data = []byte(s)
	}
	v, err := DecodeJSON(data)
	if err != nil {
		return nil, notJSON(err)
	}
	obj, ok := v.(*Object)
	if !ok {
		return nil, fmt.Errorf("arguments are %s, not an object", jsonKind(v))
	}
	return obj, nil
}

// Roles are the message roles the LFM2 chat template renders.
var Roles = []string{"system", "user", "assistant", "tool"}

// CheckConversation is the check lfmq generate --chat and the server make
// of a conversation, where a mistake is likelier than intent: the list
// must not be empty, every role must be one of Roles, and every message
// must have content, except an assistant turn (which may only call tools,
// or be an empty answer sent back). Each finding is a *RequestError naming
// messages[i].
func CheckConversation(msgs []Message) error {
	if len(msgs) == 0 {
		return &RequestError{Field: "messages", Err: errors.New("the conversation is empty: give at least one message")}
	}
	for i, m := range msgs {
		field := fmt.Sprintf("messages[%d]", i)
		known := false
		for _, r := range Roles {
			known = known || m.Role == r
		}
		if !known {
			return &RequestError{Field: field + ".role", Err: fmt.Errorf("%q is not a role: use %s", m.Role, strings.Join(Roles, ", "))}
		}
		// An assistant turn may be empty (an answer that was empty, sent
		// back in an agent's history); every other turn says something.
		if m.Content == "" && len(m.ToolCalls) == 0 && m.Role != "assistant" {
			return &RequestError{Field: field + ".content", Err: errors.New("missing or empty")}
		}
	}
	return nil
}

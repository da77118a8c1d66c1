package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	name   string
	source string
	engine *jinja.Template
	tokens map[string]string
}

// Option configures Parse and Load.
type Option func(*Template)

// WithName names the template in error messages, e.g. by its file path.
func WithName(name string) Option {
	return func(t *Template) { t.name = name }
}

// WithToken sets a token variable such as bos_token or eos_token, which
// Hugging Face passes to every template from the tokenizer's special tokens.
func WithToken(variable, value string) Option {
	return func(t *Template) { t.tokens[variable] = value }
}

// Parse compiles Jinja2 chat-template source. Whitespace follows Hugging
// Face's environment (trim_blocks, lstrip_blocks, no trailing newline).
func Parse(src string, opts ...Option) (tmpl *Template, err error) {
	t := &Template{source: src, tokens: make(map[string]string)}
	for _, o := range opts {
		o(t)
	}
	translated, err := translate(src)
	if err != nil {
		var se *syntaxError
		if errors.As(err, &se) {
			return nil, &ParseError{Name: t.name, Line: se.line, Err: errors.New(se.msg)}
		}
		return nil, &ParseError{Name: t.name, Err: err}
	}
	defer func() {
		if r := recover(); r != nil {
			tmpl, err = nil, &ParseError{Name: t.name, Err: fmt.Errorf("template engine panicked: %v", r)}
		}
	}()
	eng, err := jinja.Compile(translated)
	if err != nil {
		return nil, &ParseError{Name: t.name, Err: err}
	}
	t.engine = eng
	return t, nil
}

// tokenVariables are the special tokens of tokenizer_config.json that
// Hugging Face hands to templates.
var tokenVariables = []string{"bos_token", "eos_token", "pad_token", "unk_token"}

// Load reads a checkpoint directory's chat template: chat_template.jinja
// when present, otherwise the chat_template of tokenizer_config.json (the
// "default" entry when it is a list of named templates). Token variables
// (bos_token, eos_token, pad_token, unk_token) come from
// tokenizer_config.json; opts are applied after them. A directory without
// a template yields an error wrapping ErrNoTemplate.
func Load(dir string, opts ...Option) (*Template, error) {
	var (
		tokens  = make(map[string]string)
		src     string
		srcName string
		found   bool
	)
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		var cfg map[string]json.RawMessage
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("chat: %s: %w", cfgPath, err)
		}
		for _, name := range tokenVariables {
			if tok, ok := tokenContent(cfg[name]); ok {
				tokens[name] = tok
			}
		}
		if raw, ok := cfg["chat_template"]; ok && !isNull(raw) {
			src, err = configTemplate(raw)
			if err != nil {
				return nil, fmt.Errorf("chat: %s: %w", cfgPath, err)
			}
			srcName, found = cfgPath, true
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("chat: %w", err)
	}
	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	data, err = os.ReadFile(jinjaPath)
	switch {
	case err == nil:
		src, srcName, found = string(data), jinjaPath, true
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("chat: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("chat: %s: %w", dir, ErrNoTemplate)
	}
	all := []Option{WithName(srcName)}
	for name, tok := range tokens {
		all = append(all, WithToken(name, tok))
	}
	return Parse(src, append(all, opts...)...)
}

// tokenContent reads a special token written as a string or as an added
// token object {"content": …}.
func tokenContent(raw json.RawMessage) (string, bool) {
	if isNull(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
		return *obj.Content, true
	}
	return "", false
}

func configTemplate(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template is neither a string nor a list of named templates: %w", err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("no \"default\" among the named chat templates: %w", ErrNoTemplate)
}

// Source returns the template source as given to Parse.
func (t *Template) Source() string { return t.source }

// Render renders the request to the prompt text.
func (t *Template) Render(req Request) (string, error) {
	return t.render(&req, nil)
}

// RenderSegments renders the request and splits the prompt for
// tokenization under the project's special-token policy
// (docs/model.md §5): every occurrence of a specials string inside
// request-supplied strings (contents, thinking, roles, names, tool calls,
// tool definitions, kwargs) is replaced by a placeholder before
// rendering, the output is cut at the special-token strings the template
// itself emitted, and the placeholders are turned back into the user's
// text inside ordinary-text segments. specials is typically the content
// of every tokenizer added token marked special.
//
// Joining the segments' Text gives what Render returns, except where the
// template inspects request strings for special-token strings (e.g. splits
// an assistant's content at "</think>"): the placeholders hide them from
// it. TrustAssistant exempts assistant turns for such templates.
func (t *Template) RenderSegments(req Request, specials []string, opts ...SegmentOption) ([]Segment, error) {
	p := newProtector(specials, t.source, &req)
	for _, o := range opts {
		o(p)
	}
	out, err := t.render(&req, p)
	if err != nil {
		return nil, err
	}
	return p.split(out), nil
}

// reservedVariables cannot be set through Kwargs.
var reservedVariables = map[string]bool{
	"messages": true, "tools": true, "add_generation_prompt": true,
	"raise_exception": true, "strftime_now": true, "namespace": true,
	"range": true, "dict": true, "joiner": true, "cycler": true, "loop": true,
	fnPrint: true, fnToJSON: true,
}

func (t *Template) render(req *Request, p *protector) (out string, err error) {
	var protect func(string) string
	if p != nil && len(p.specials) > 0 {
		protect = p.protect
	}
	vars := make(map[string]jinja.Value, len(t.tokens)+len(req.Kwargs)+8)
	for k, v := range t.tokens {
		vars[k] = jinja.NewString(v)
	}
	for k, v := range req.Kwargs {
		if reservedVariables[k] {
			return "", &RequestError{Field: "chat_template_kwargs." + k, Err: errors.New("reserved template variable")}
		}
		val, err := toValue(v, protect, 0)
		if err != nil {
			return "", &RequestError{Field: "chat_template_kwargs." + k, Err: err}
		}
		vars[k] = val
	}
	msgs := make([]jinja.Value, len(req.Messages))
	for i, m := range req.Messages {
		protectText := protect
		if p != nil && p.trustAssistant && m.Role == "assistant" {
			protectText = nil
		}
		v, err := m.value(protect, protectText)
		if err != nil {
			return "", &RequestError{Field: fmt.Sprintf("messages[%d]", i), Err: err}
		}
		msgs[i] = v
	}
	vars["messages"] = jinja.NewList(msgs)
	vars["tools"] = jinja.None()
	if req.Tools != nil {
		tools, err := toValue(req.Tools, protect, 0)
		if err != nil {
			return "", &RequestError{Field: "tools", Err: err}
		}
		vars["tools"] = tools
	}
	vars["add_generation_prompt"] = jinja.NewBool(req.AddGenerationPrompt)

	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	var raised *ExceptionError
	vars["raise_exception"] = jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		msg := ""
		if len(args) > 0 {
			msg = pyStr(args[0])
		}
		raised = &ExceptionError{Message: msg}
		return jinja.Undefined(), raised
	})
	vars["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now takes one format string")
		}
		return jinja.NewString(strftime(args[0].AsString(), now)), nil
	})
	vars[fnPrint] = jinja.NewCallable("string", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) == 0 {
			return jinja.NewString(""), nil
		}
		return jinja.NewString(pyStr(args[0])), nil
	})
	vars[fnToJSON] = jinja.NewCallable("tojson", toJSONFilter)

	defer func() {
		if r := recover(); r != nil {
			out, err = "", &RenderError{Name: t.name, Err: fmt.Errorf("template engine panicked: %v", r)}
		}
	}()
	out, err = t.engine.RenderValues(vars)
	if raised != nil {
		// Whatever the engine wrapped around it, the template's own
		// exception is the answer.
		return "", raised
	}
	if err != nil {
		return "", &RenderError{Name: t.name, Err: err}
	}
	return out, nil
}

// toJSONFilter is Hugging Face's tojson: json.dumps(value,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False), with
// those parameters also accepted positionally in that order.
func toJSONFilter(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: missing value")
	}
	params := map[string]jinja.Value{}
	for i, name := range []string{"ensure_ascii", "indent", "separators", "sort_keys"} {
		if i+1 < len(args) {
			params[name] = args[i+1]
		}
	}
	for k, v := range kwargs {
		params[k] = v
	}
	enc := jsonEncoder{itemSep: ", ", keySep: ": "}
	for name, v := range params {
		switch name {
		case "ensure_ascii":
			enc.ensureASCII = v.IsTruthy()
		case "sort_keys":
			enc.sortKeys = v.IsTruthy()
		case "indent":
			switch {
			case v.IsNone() || v.IsUndefined():
			case v.IsInt():
				s := strings.Repeat(" ", max(0, int(v.AsInt())))
				enc.indent = &s
			case v.IsString():
				s := v.AsString()
				enc.indent = &s
			default:
				return jinja.Undefined(), errors.New("tojson: indent must be an integer or a string")
			}
		case "separators":
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: unexpected argument %q", name)
		}
	}
	if enc.indent != nil {
		enc.itemSep = ","
	}
	if v, ok := params["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Items[0].IsString() || !v.AsList().Items[1].IsString() {
			return jinja.Undefined(), errors.New("tojson: separators must be two strings")
		}
		enc.itemSep, enc.keySep = v.AsList().Items[0].AsString(), v.AsList().Items[1].AsString()
	}
	var b strings.Builder
	if err := enc.encode(&b, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

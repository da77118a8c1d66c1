package chat

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/ardanlabs/jinja"
)

// toValue converts request data into a template value. protect, when not
// nil, is applied to every string, dictionary keys included (it hides
// special-token strings, see RenderSegments).
func toValue(v any, protect func(string) string, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), fmt.Errorf("value nested deeper than %d", maxJSONDepth)
	}
	str := func(s string) jinja.Value {
		if protect != nil {
			s = protect(s)
		}
		return jinja.NewString(s)
	}
	switch t := v.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(t), nil
	case string:
		return str(t), nil
	case int:
		return jinja.NewInt(int64(t)), nil
	case int8:
		return jinja.NewInt(int64(t)), nil
	case int16:
		return jinja.NewInt(int64(t)), nil
	case int32:
		return jinja.NewInt(int64(t)), nil
	case int64:
		return jinja.NewInt(t), nil
	case uint8:
		return jinja.NewInt(int64(t)), nil
	case uint16:
		return jinja.NewInt(int64(t)), nil
	case uint32:
		return jinja.NewInt(int64(t)), nil
	case float32:
		return jinja.NewFloat(float64(t)), nil
	case float64:
		return jinja.NewFloat(t), nil
	case json.Number:
		n, err := parseNumber(string(t))
		if err != nil {
			return jinja.Undefined(), err
		}
		return toValue(n, protect, depth)
	case []string:
		items := make([]jinja.Value, len(t))
		for i, s := range t {
			items[i] = str(s)
		}
		return jinja.NewList(items), nil
	case []any:
		items := make([]jinja.Value, len(t))
		for i, item := range t {
			iv, err := toValue(item, protect, depth+1)
			if err != nil {
				return jinja.Undefined(), err
			}
			items[i] = iv
		}
		return jinja.NewList(items), nil
	case *Object:
		if t == nil {
			return jinja.None(), nil
		}
		d := jinja.NewDict()
		for _, k := range t.keys {
			iv, err := toValue(t.vals[k], protect, depth+1)
			if err != nil {
				return jinja.Undefined(), err
			}
			if protect != nil {
				k = protect(k)
			}
			d.AsDict().Set(k, iv)
		}
		return d, nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		obj := NewObject()
		for _, k := range keys {
			obj.Set(k, t[k])
		}
		return toValue(obj, protect, depth)
	}
	return jinja.Undefined(), fmt.Errorf("unsupported value type %T", v)
}

// value converts the message into the dictionary the template sees:
// role, content, then thinking, tool_calls, tool_call_id and name when set.
// protect applies to every string; protectText, to content and thinking.
func (m Message) value(protect, protectText func(string) string) (jinja.Value, error) {
	str := func(s string, f func(string) string) jinja.Value {
		if f != nil {
			s = f(s)
		}
		return jinja.NewString(s)
	}
	d := jinja.NewDict()
	dict := d.AsDict()
	dict.Set("role", str(m.Role, protect))
	dict.Set("content", str(m.Content, protectText))
	if m.Thinking != "" {
		dict.Set("thinking", str(m.Thinking, protectText))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			call := jinja.NewDict()
			if tc.ID != "" {
				call.AsDict().Set("id", str(tc.ID, protect))
			}
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			call.AsDict().Set("type", str(typ, protect))
			fn := jinja.NewDict()
			fn.AsDict().Set("name", str(tc.Name, protect))
			args, err := toValue(tc.Arguments, protect, 1)
			if err != nil {
				return jinja.Undefined(), err
			}
			if args.IsNone() {
				args = jinja.NewDict()
			}
			fn.AsDict().Set("arguments", args)
			call.AsDict().Set("function", fn)
			calls[i] = call
		}
		dict.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		dict.Set("tool_call_id", str(m.ToolCallID, protect))
	}
	if m.Name != "" {
		dict.Set("name", str(m.Name, protect))
	}
	return d, nil
}

// visitStrings calls fn for every string in v, dictionary keys included.
func visitStrings(v any, fn func(string)) {
	switch t := v.(type) {
	case string:
		fn(t)
	case []string:
		for _, s := range t {
			fn(s)
		}
	case []any:
		for _, item := range t {
			visitStrings(item, fn)
		}
	case *Object:
		if t == nil {
			return
		}
		for _, k := range t.keys {
			fn(k)
			visitStrings(t.vals[k], fn)
		}
	case map[string]any:
		for k, item := range t {
			fn(k)
			visitStrings(item, fn)
		}
	}
}

// visitRequestStrings calls fn for every string a request supplies.
func visitRequestStrings(req *Request, fn func(string)) {
	for _, m := range req.Messages {
		fn(m.Role)
		fn(m.Content)
		fn(m.Thinking)
		fn(m.ToolCallID)
		fn(m.Name)
		for _, tc := range m.ToolCalls {
			fn(tc.ID)
			fn(tc.Type)
			fn(tc.Name)
			visitStrings(tc.Arguments, fn)
		}
	}
	visitStrings(req.Tools, fn)
	for k, v := range req.Kwargs {
		fn(k)
		visitStrings(v, fn)
	}
}

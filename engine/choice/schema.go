package choice

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lfmq/lfmq/engine/chat"
)

// Field is one property of a closed schema: its name and its candidate
// values as JSON literals, in the order the schema lists them ("true" and
// "false" for a boolean, quoted strings for an enum).
type Field struct {
	Name       string
	Candidates []string
	// Values are the candidates as Go values (bool or string).
	Values []any
}

// Schema is a flat closed object schema: every property required, no
// additional properties, each a boolean or a string enum.
type Schema struct {
	Fields []Field
}

// UnsupportedError names the part of a schema that makes it something
// other than a flat closed object of booleans and string enums.
type UnsupportedError struct {
	// Path is a JSON-pointer-like path into the schema, e.g.
	// "properties.priority.type".
	Path string
	Msg  string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("choice: schema %s: %s (only a flat object of required boolean and string-enum properties with additionalProperties false is answered)", e.Path, e.Msg)
}

// maxCandidates bounds the branches of one request: every candidate is a
// forked sequence in one batch.
const maxCandidates = 256

// Parse reads a JSON schema and accepts only a flat closed object: type
// "object", "properties" each {"type": "boolean"} or {"type": "string",
// "enum": [distinct strings]} (descriptions and titles allowed),
// "required" naming every property, and "additionalProperties": false.
// Anything else is an *UnsupportedError naming the construct.
func Parse(data []byte) (*Schema, error) {
	v, err := chat.DecodeJSON(data)
	if err != nil {
		return nil, &UnsupportedError{Path: "(root)", Msg: "not JSON: " + err.Error()}
	}
	root, ok := v.(*chat.Object)
	if !ok {
		return nil, &UnsupportedError{Path: "(root)", Msg: "not an object"}
	}
	for _, k := range root.Keys() {
		switch k {
		case "type", "properties", "required", "additionalProperties", "title", "description", "$schema":
		default:
			return nil, &UnsupportedError{Path: k, Msg: "keyword not supported"}
		}
	}
	if t, _ := root.Get("type"); t != "object" {
		return nil, &UnsupportedError{Path: "type", Msg: fmt.Sprintf("%s; want \"object\"", literal(t))}
	}
	if ap, ok := root.Get("additionalProperties"); !ok || ap != false {
		return nil, &UnsupportedError{Path: "additionalProperties", Msg: "must be false (a closed object)"}
	}
	pv, _ := root.Get("properties")
	props, ok := pv.(*chat.Object)
	if !ok || props.Len() == 0 {
		return nil, &UnsupportedError{Path: "properties", Msg: "must be a non-empty object"}
	}
	rv, _ := root.Get("required")
	req, _ := rv.([]any)
	required := map[string]bool{}
	for _, r := range req {
		if s, ok := r.(string); ok {
			required[s] = true
		}
	}
	s := &Schema{}
	total := 0
	for _, name := range props.Keys() {
		path := "properties." + name
		if !required[name] {
			return nil, &UnsupportedError{Path: path, Msg: "optional; every property must be in \"required\""}
		}
		pv, _ := props.Get(name)
		p, ok := pv.(*chat.Object)
		if !ok {
			return nil, &UnsupportedError{Path: path, Msg: "not an object"}
		}
		for _, k := range p.Keys() {
			switch k {
			case "type", "enum", "description", "title":
			default:
				return nil, &UnsupportedError{Path: path + "." + k, Msg: "keyword not supported"}
			}
		}
		t, _ := p.Get("type")
		f := Field{Name: name}
		switch t {
		case "boolean":
			if _, has := p.Get("enum"); has {
				return nil, &UnsupportedError{Path: path + ".enum", Msg: "not supported on a boolean"}
			}
			f.Candidates, f.Values = []string{"true", "false"}, []any{true, false}
		case "string":
			ev, has := p.Get("enum")
			list, ok := ev.([]any)
			if !has || !ok || len(list) == 0 {
				return nil, &UnsupportedError{Path: path, Msg: "a free string; only a string with a non-empty \"enum\" is supported"}
			}
			seen := map[string]bool{}
			for i, e := range list {
				str, ok := e.(string)
				if !ok {
					return nil, &UnsupportedError{Path: fmt.Sprintf("%s.enum[%d]", path, i), Msg: fmt.Sprintf("%s is not a string", literal(e))}
				}
				if seen[str] {
					return nil, &UnsupportedError{Path: fmt.Sprintf("%s.enum[%d]", path, i), Msg: fmt.Sprintf("%q is listed twice", str)}
				}
				seen[str] = true
				f.Candidates = append(f.Candidates, jsonString(str))
				f.Values = append(f.Values, str)
			}
		default:
			return nil, &UnsupportedError{Path: path + ".type", Msg: fmt.Sprintf("%s is not supported; only \"boolean\" and \"string\" with \"enum\"", literal(t))}
		}
		total += len(f.Candidates)
		s.Fields = append(s.Fields, f)
	}
	for name := range required {
		if _, ok := props.Get(name); !ok {
			return nil, &UnsupportedError{Path: "required", Msg: fmt.Sprintf("%q is not a property", name)}
		}
	}
	if total > maxCandidates {
		return nil, &UnsupportedError{Path: "properties", Msg: fmt.Sprintf("%d candidate values in all; at most %d", total, maxCandidates)}
	}
	return s, nil
}

func literal(v any) string {
	if v == nil {
		return "missing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// jsonString quotes s as JSON without HTML escaping.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// Instruction is the text added to the system prompt: the fields, their
// candidate values, and the form of the answer, so the model sees what it
// is being scored on.
func (s *Schema) Instruction() string {
	var b strings.Builder
	b.WriteString("Answer with only a JSON object with exactly these fields, in this order:\n")
	for _, f := range s.Fields {
		fmt.Fprintf(&b, "- %s: one of %s\n", jsonString(f.Name), strings.Join(f.Candidates, ", "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Open is the text that opens the assistant's answer, shared by every
// branch.
const Open = "{\n"

// Branch returns the text a candidate's branch appends after Open: the
// field's line with the complete value and the delimiter that ends it
// (",\n" before another field, "\n}" after the last), so that candidates
// sharing a prefix ("express" and "express plus") are different texts.
func (s *Schema) Branch(field, candidate int) string {
	f := s.Fields[field]
	end := ",\n"
	if field == len(s.Fields)-1 {
		end = "\n}"
	}
	return "  " + jsonString(f.Name) + ": " + f.Candidates[candidate] + end
}

// Render serializes an answer: chosen[i] is the index of field i's
// winning candidate. The text is what the branches spell, so the answer
// reads as the model would have written it.
func (s *Schema) Render(chosen []int) string {
	var b strings.Builder
	b.WriteString(Open)
	for i, f := range s.Fields {
		b.WriteString("  " + jsonString(f.Name) + ": " + f.Candidates[chosen[i]])
		if i < len(s.Fields)-1 {
			b.WriteString(",\n")
		}
	}
	b.WriteString("\n}")
	return b.String()
}

// WithInstruction returns the conversation with the schema's instruction
// added to its system message (a new first system message when there is
// none); msgs is not modified.
func (s *Schema) WithInstruction(msgs []chat.Message) []chat.Message {
	out := append([]chat.Message(nil), msgs...)
	if len(out) > 0 && out[0].Role == "system" {
		sep := "\n\n"
		if out[0].Content == "" {
			sep = ""
		}
		out[0].Content += sep + s.Instruction()
		return out
	}
	return append([]chat.Message{{Role: "system", Content: s.Instruction()}}, out...)
}

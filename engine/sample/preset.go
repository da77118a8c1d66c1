package sample

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Defaults are a server's sampling defaults (docs/serving.md §2): a
// request's own value wins, then the field set here, then the neutral
// default. A nil field is unset.
type Defaults struct {
	Temperature       *float64
	TopK              *int
	TopP              *float64
	MinP              *float64
	RepetitionPenalty *float64
	// MaxNewTokens bounds the tokens of a request that gives no max_tokens
	// (unset: the rest of the context).
	MaxNewTokens *int
}

// presets are docs/serving.md §2's table. liquid is Liquid AI's
// recommendation for LFM2.5 and LFM2-24B-A2B; agentic is the project's own.
var presets = map[string]Defaults{
	"liquid":    {Temperature: ptr(0.1), TopK: ptr(50), RepetitionPenalty: ptr(1.05)},
	"agentic":   {Temperature: ptr(0.6), TopP: ptr(0.95)},
	"reasoning": {Temperature: ptr(0.6)},
	"greedy":    {Temperature: ptr(0.0)},
	"none":      {},
}

// DefaultPreset is the preset a server uses when none is named.
const DefaultPreset = "liquid"

func ptr[T any](v T) *T { return &v }

// PresetNames returns the preset names in alphabetical order.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PresetError reports an unknown preset name or an unusable
// --default-sampling value; Key names the field at fault.
type PresetError struct {
	Key string
	Msg string
}

func (e *PresetError) Error() string {
	if e.Key == "" {
		return "sample: " + e.Msg
	}
	return fmt.Sprintf("sample: %s: %s", e.Key, e.Msg)
}

// Preset returns the defaults of the named preset.
func Preset(name string) (Defaults, error) {
	d, ok := presets[name]
	if !ok {
		return Defaults{}, &PresetError{Msg: fmt.Sprintf("unknown sampling preset %q; known: %s", name, strings.Join(PresetNames(), ", "))}
	}
	return d.clone(), nil
}

func (d Defaults) clone() Defaults {
	c := Defaults{}
	if d.Temperature != nil {
		c.Temperature = ptr(*d.Temperature)
	}
	if d.TopK != nil {
		c.TopK = ptr(*d.TopK)
	}
	if d.TopP != nil {
		c.TopP = ptr(*d.TopP)
	}
	if d.MinP != nil {
		c.MinP = ptr(*d.MinP)
	}
	if d.RepetitionPenalty != nil {
		c.RepetitionPenalty = ptr(*d.RepetitionPenalty)
	}
	if d.MaxNewTokens != nil {
		c.MaxNewTokens = ptr(*d.MaxNewTokens)
	}
	return c
}

// Override returns d with the fields of a --default-sampling JSON
// object set over it. The keys are temperature, top_k, top_p, min_p,
// repetition_penalty and max_new_tokens; an unknown or repeated key, a
// value of the wrong type or one outside its range (docs/serving.md §1)
// is a *PresetError naming the key, so that a server refuses to start
// rather than serve with a setting it did not understand. null leaves a
// field as the preset has it.
func (d Defaults) Override(data []byte) (Defaults, error) {
	out := d.clone()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return d, &PresetError{Msg: fmt.Sprintf("default sampling must be a JSON object, got %.60q", data)}
	}
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return d, &PresetError{Msg: "default sampling: " + err.Error()}
		}
		key := kt.(string)
		if seen[key] {
			return d, &PresetError{Key: key, Msg: "given twice"}
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return d, &PresetError{Key: key, Msg: err.Error()}
		}
		if err := out.set(key, raw); err != nil {
			return d, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return d, &PresetError{Msg: "default sampling: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return d, &PresetError{Msg: "default sampling: unexpected data after the object"}
	}
	return out, nil
}

// set parses one --default-sampling field and checks its range with the
// same rules as a request's (Params.Validate).
func (d *Defaults) set(key string, raw json.RawMessage) error {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	num := func() (float64, error) {
		var x float64
		if err := json.Unmarshal(raw, &x); err != nil {
			return 0, &PresetError{Key: key, Msg: fmt.Sprintf("expected a number, got %s", raw)}
		}
		return x, nil
	}
	integer := func() (int, error) {
		x, err := num()
		if err != nil {
			return 0, err
		}
		if x != math.Trunc(x) || math.Abs(x) > 1<<31 {
			return 0, &PresetError{Key: key, Msg: fmt.Sprintf("expected an integer, got %s", raw)}
		}
		return int(x), nil
	}
	p := Neutral()
	var err error
	switch key {
	case "temperature":
		if p.Temperature, err = num(); err == nil {
			d.Temperature = ptr(p.Temperature)
		}
	case "top_k":
		if p.TopK, err = integer(); err == nil {
			d.TopK = ptr(p.TopK)
		}
	case "top_p":
		if p.TopP, err = num(); err == nil {
			d.TopP = ptr(p.TopP)
		}
	case "min_p":
		if p.MinP, err = num(); err == nil {
			d.MinP = ptr(p.MinP)
		}
	case "repetition_penalty":
		if p.RepetitionPenalty, err = num(); err == nil {
			d.RepetitionPenalty = ptr(p.RepetitionPenalty)
		}
	case "max_new_tokens":
		var n int
		if n, err = integer(); err == nil {
			if n < 1 {
				return &PresetError{Key: key, Msg: fmt.Sprintf("%d; must be at least 1", n)}
			}
			d.MaxNewTokens = ptr(n)
		}
		return err
	default:
		return &PresetError{Key: key, Msg: "unknown key; known: temperature, top_k, top_p, min_p, repetition_penalty, max_new_tokens"}
	}
	if err != nil {
		return err
	}
	if verr := p.Validate(1); verr != nil {
		var pe *ParamError
		if errors.As(verr, &pe) {
			return &PresetError{Key: key, Msg: pe.Msg}
		}
		return &PresetError{Key: key, Msg: verr.Error()}
	}
	return nil
}

// Apply sets every field of p that d sets; a request's own values are
// applied after it.
func (d Defaults) Apply(p *Params) {
	if d.Temperature != nil {
		p.Temperature = *d.Temperature
	}
	if d.TopK != nil {
		p.TopK = *d.TopK
	}
	if d.TopP != nil {
		p.TopP = *d.TopP
	}
	if d.MinP != nil {
		p.MinP = *d.MinP
	}
	if d.RepetitionPenalty != nil {
		p.RepetitionPenalty = *d.RepetitionPenalty
	}
}

// MarshalJSON writes the fields that are set, in a fixed order, for logs
// and the server's /v1/models report.
func (d Defaults) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	add := func(k string, v any) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kj, _ := json.Marshal(k)
		vj, _ := json.Marshal(v)
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	if d.Temperature != nil {
		add("temperature", *d.Temperature)
	}
	if d.TopK != nil {
		add("top_k", *d.TopK)
	}
	if d.TopP != nil {
		add("top_p", *d.TopP)
	}
	if d.MinP != nil {
		add("min_p", *d.MinP)
	}
	if d.RepetitionPenalty != nil {
		add("repetition_penalty", *d.RepetitionPenalty)
	}
	if d.MaxNewTokens != nil {
		add("max_new_tokens", *d.MaxNewTokens)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

package api

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/internal/jsonkind"
)

// Request limits the server enforces before anything else.
const (
	// MaxBodyBytes bounds a request body (413 above it): 16 MiB holds a
	// full-context prompt as token ids or text many times over.
	MaxBodyBytes = 16 << 20
	// maxStops bounds the stop strings of one request.
	maxStops = 16
	// maxStopBytes bounds one stop string.
	maxStopBytes = 1024
	// maxTopLogprobs is docs/serving.md §1's bound on top_logprobs.
	maxTopLogprobs = 20
	// maxTools bounds a chat request's tools: OpenAI's documented limit,
	// which also bounds the cost of rendering them. LFM2's template appends
	// each tool's JSON to one growing string, quadratic in their number:
	// 100,000 small tools (13 MB) took 14 minutes of CPU, which a client
	// disconnect does not stop; 128 take milliseconds.
	maxTools = 128
)

// known request fields, for the debug log of ignored ones. The other
// route's prompt or messages is read only to point at that route, so it
// still counts as ignored.
var (
	chatFields       = without(fieldSet(wire.ChatRequest{}), "prompt")
	completionFields = without(fieldSet(wire.CompletionRequest{}), "messages")
)

// without returns set less name.
func without(set map[string]bool, name string) map[string]bool {
	delete(set, name)
	return set
}

// decodeBody reads a JSON request body into v. It answers 413 for a body
// over MaxBodyBytes, 400 for invalid JSON or a field of the wrong type
// (naming the field), and returns the names of fields it ignored.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, known map[string]bool) ([]string, *Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large",
			Message: fmt.Sprintf("the request body is over the limit of %d bytes", MaxBodyBytes)}
	}
	if err != nil {
		return nil, badRequest("", "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("", "the request body is empty; send a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, badRequest("", "invalid JSON at byte %d: %v", se.Offset, err)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, badRequest("", "the request body must be a JSON object, not a JSON %s", te.Value)
		}
		return nil, badRequest("", "the request body must be a JSON object: %v", err)
	}
	if fields == nil {
		// JSON null decodes into a nil map without an error; without this
		// it would read as an empty request and be answered by whatever
		// required field the route checks first.
		return nil, badRequest("", "the request body must be a JSON object, not JSON null")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := strings.TrimPrefix(te.Field, "Sampling.")
			if field == "" {
				field = "body"
			}
			return nil, badRequest(field, "%s: expected %s, got JSON %s", field, jsonkind.OfGo(te.Type.Kind()), te.Value)
		}
		return nil, badRequest("", "invalid request: %v", err)
	}
	var ignored []string
	for k := range fields {
		if !known[k] {
			ignored = append(ignored, k)
		}
	}
	sort.Strings(ignored)
	return ignored, nil
}

// fieldSet returns the JSON names of a struct's fields, embedded ones
// included: the names its zero value marshals (none has omitempty, and
// nil raw messages, slices and maps marshal as null, which still names
// them).
func fieldSet(v any) map[string]bool {
	data, _ := json.Marshal(v)
	var m map[string]json.RawMessage
	json.Unmarshal(data, &m)
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// stopStrings reads "stop": a string or an array of strings, each non-empty.
func stopStrings(raw json.RawMessage) ([]string, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, badRequest("stop", "stop strings must not be empty")
		}
		return []string{one}, nil
	}
	// Pointers, because encoding/json decodes a null element into a
	// string as "", which would be reported as an empty string.
	var list []*string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(list) > maxStops {
		return nil, badRequest("stop", "%d stop strings; at most %d", len(list), maxStops)
	}
	out := make([]string, len(list))
	for i, p := range list {
		if p == nil {
			return nil, badRequest("stop", "stop[%d] is null; give a string", i)
		}
		s := *p
		out[i] = s
		if s == "" {
			return nil, badRequest("stop", "stop[%d] is empty; stop strings must not be empty", i)
		}
		if len(s) > maxStopBytes {
			return nil, badRequest("stop", "stop[%d] is %d bytes; at most %d", i, len(s), maxStopBytes)
		}
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// params merges the sampling fields: the request's value, else the
// server default, else neutral (docs/serving.md §2); then validates them.
func samplingParams(f *wire.Sampling, defaults sample.Defaults, vocab int, stopIDs []int) (sample.Params, *Error) {
	p := sample.Neutral()
	defaults.Apply(&p)
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.Temperature, f.Temperature)
	set(&p.TopP, f.TopP)
	set(&p.MinP, f.MinP)
	set(&p.RepetitionPenalty, f.RepetitionPenalty)
	set(&p.PresencePenalty, f.PresencePenalty)
	set(&p.FrequencyPenalty, f.FrequencyPenalty)
	if f.TopK != nil {
		p.TopK = *f.TopK
	}
	if f.MinTokens != nil {
		p.MinTokens = *f.MinTokens
	}
	if len(f.LogitBias) > 0 {
		p.LogitBias = make(map[int]float64, len(f.LogitBias))
		for k, b := range f.LogitBias {
			id, err := strconv.Atoi(k)
			if err != nil {
				return p, badRequest("logit_bias", "key %q is not a token id", k)
			}
			p.LogitBias[id] = b
		}
	}
	p.StopIDs = append(append([]int(nil), stopIDs...), f.StopTokenIDs...)
	if err := p.Validate(vocab); err != nil {
		var pe *sample.ParamError
		if errors.As(err, &pe) {
			return p, badRequest(pe.Field, "%s: %s", pe.Field, pe.Msg)
		}
		return p, badRequest("", "%v", err)
	}
	switch {
	case f.Seed == nil || *f.Seed == -1:
		p.Seed = randomSeed()
	default:
		p.Seed = uint64(*f.Seed)
	}
	return p, nil
}

// randomSeed draws a seed for an unseeded request (docs/serving.md §4).
func randomSeed() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// maxNewTokens resolves the tokens a request may generate: the request's
// value (validated), else the server default capped by what the context
// leaves, else all the context leaves. prompt + max over maxLen is a 400
// with both counts; so is a prompt that leaves no room.
func maxNewTokens(field string, given *int, def *int, prompt, maxLen int, allowZero bool) (int, *Error) {
	if prompt >= maxLen && !(allowZero && given != nil && *given == 0) {
		return 0, contextExceeded("this model's maximum context length is %d tokens; the prompt has %d tokens, which leaves no room to generate", maxLen, prompt)
	}
	if given != nil {
		n := *given
		min := 1
		if allowZero {
			min = 0
		}
		if n < min {
			return 0, badRequest(field, "%s = %d; must be at least %d", field, n, min)
		}
		if prompt+n > maxLen {
			return 0, contextExceeded("this model's maximum context length is %d tokens; you requested %d tokens (%d in the prompt + %d for %s)", maxLen, prompt+n, prompt, n, field)
		}
		return n, nil
	}
	room := maxLen - prompt
	if def != nil && *def < room {
		return *def, nil
	}
	return room, nil
}

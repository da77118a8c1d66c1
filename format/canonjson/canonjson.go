// Package canonjson writes canonical JSON: object keys sorted by their bytes,
// two-space indentation, a trailing newline and no HTML escaping.
//
// Manifests, runtime-release.json and evidence files are hashed and compared
// byte for byte, so they must serialise one way only whatever the Go struct
// field order is. This package is that one way; it is not a general JSON
// library.
package canonjson

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Marshal returns the canonical JSON encoding of v.
//
// v is first encoded with encoding/json (so struct tags apply), then decoded
// into generic values with numbers kept as their original text, and encoded
// again: encoding/json sorts map keys, which puts every object's keys in
// byte order. Numbers therefore keep Go's shortest round-trip formatting.
func Marshal(v any) ([]byte, error) {
	first, err := marshalNoEscape(v)
	if err != nil {
		return nil, fmt.Errorf("canonjson: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("canonjson: re-decoding: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(generic); err != nil {
		return nil, fmt.Errorf("canonjson: %w", err)
	}
	// json.Encoder.Encode already ends the value with one newline.
	return buf.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// IsCanonical reports whether data is exactly the canonical encoding of the
// JSON value it holds.
func IsCanonical(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return false
	}
	again, err := Marshal(generic)
	return err == nil && bytes.Equal(again, data)
}

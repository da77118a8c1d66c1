// Package strictjson reads the JSON documents that lfmq trusts only after
// checking them (manifests, release lists, evidence and gate files, cache
// headers) in one strict way: a bounded size, exactly one value, and no
// object key that the Go type does not declare.
//
// encoding/json on its own accepts all three faults silently: a misspelt key
// is dropped, so a setting the writer meant is not the one read; a second
// value or stray bytes after the first are never looked at, so two files
// pasted together read as the first; and nothing bounds the bytes. Dec.More,
// the usual trailing-data check, misses a stray '}' or ']', which is why
// this package looks at the bytes after the value itself.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// SizeError reports a document larger than the limit its reader allows.
type SizeError struct {
	Size, Limit int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%d bytes, over the %d-byte limit", e.Size, e.Limit)
}

// ErrTrailingData is returned for bytes other than white space after the
// JSON value.
var ErrTrailingData = errors.New("data after the JSON value")

// Unmarshal decodes data into v. data must be at most limit bytes (a
// *SizeError otherwise) and hold exactly one JSON value with only JSON
// white space around it (ErrTrailingData otherwise); an object key with no
// matching field in v is an error, as are encoding/json's own (syntax,
// wrong types), which are returned as it gives them.
func Unmarshal(data []byte, limit int64, v any) error {
	if int64(len(data)) > limit {
		return &SizeError{Size: int64(len(data)), Limit: limit}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	for _, c := range data[dec.InputOffset():] {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return ErrTrailingData
		}
	}
	return nil
}

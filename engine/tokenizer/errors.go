package tokenizer

import (
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by a [*FormatError] whose file asks for a
// feature of the Hugging Face format that this package does not implement
// (a normalizer, byte fallback, an unknown token, another model type, ...).
var ErrUnsupported = errors.New("tokenizer: unsupported feature")

// FormatError reports a tokenizer file that cannot be used: malformed JSON,
// an invalid or inconsistent value, or an unsupported feature (then
// errors.Is(err, ErrUnsupported) holds).
type FormatError struct {
	// File is the file the problem is in: a path for Load, the base name
	// (tokenizer.json, tokenizer_config.json) for FromJSON.
	File string
	// Field is the JSON path of the offending value, such as
	// "model.byte_fallback" or "added_tokens[3].content"; empty when the
	// problem is the file as a whole.
	Field string
	// Reason says what is wrong, for humans.
	Reason string
	// Err is the underlying cause, if any: ErrUnsupported, a JSON syntax
	// error, a regular expression error or an I/O error.
	Err error
}

// Error returns "tokenizer: FILE: FIELD: REASON: CAUSE".
func (e *FormatError) Error() string {
	msg := "tokenizer: " + e.File
	if e.Field != "" {
		msg += ": " + e.Field
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Err != nil && e.Err != ErrUnsupported {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying cause.
func (e *FormatError) Unwrap() error { return e.Err }

// IDError reports a token id that the tokenizer does not know.
type IDError struct {
	// ID is the offending id.
	ID int
	// Index is its position in the ids passed to Decode (0 for
	// StreamDecoder.Add).
	Index int
	// VocabSize is the tokenizer's id range, [0, VocabSize).
	VocabSize int
}

// Error describes the unknown id.
func (e *IDError) Error() string {
	return fmt.Sprintf("tokenizer: unknown token id %d at index %d (id range [0, %d))", e.ID, e.Index, e.VocabSize)
}

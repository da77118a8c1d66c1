package model

import "fmt"

// ContextError reports a Forward call that would grow a sequence past its
// maximum context. Nothing is processed when it is returned.
type ContextError struct {
	Seq        int // index of the sequence in the Forward call
	Len        int // tokens the sequence already holds
	Add        int // tokens the call would append
	MaxContext int // the sequence's limit
}

// Error implements error.
func (e *ContextError) Error() string {
	return fmt.Sprintf("model: sequence %d: %d tokens + %d new = %d exceeds the maximum context of %d tokens",
		e.Seq, e.Len, e.Add, e.Len+e.Add, e.MaxContext)
}

// TokenError reports a token id outside the model's vocabulary. Nothing is
// processed when it is returned.
type TokenError struct {
	Seq, Index int // sequence in the Forward call and index in its tokens
	ID         int
	VocabSize  int
}

// Error implements error.
func (e *TokenError) Error() string {
	return fmt.Sprintf("model: sequence %d, token %d: id %d is outside the vocabulary [0, %d)", e.Seq, e.Index, e.ID, e.VocabSize)
}

// InputError reports a call that cannot be carried out as asked: bad
// options, mismatched arguments, a sequence made for another model shape,
// an unknown weight name.
type InputError struct {
	What string // the argument or option at fault
	Msg  string
}

// Error implements error.
func (e *InputError) Error() string { return fmt.Sprintf("model: %s: %s", e.What, e.Msg) }

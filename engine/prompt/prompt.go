// Package prompt turns a chat request into token ids by the special-token
// policy of docs/model.md §5: the checkpoint's template is rendered with
// every special-token string of the request protected, the special tokens
// the template itself emits become their ids, and all other text is
// encoded as ordinary text.
//
// Generation, calibration and scoring all encode chats this way; this is
// the one implementation. It does not parse requests (engine/chat does) or
// run the model.
package prompt

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

// Encoder encodes chat requests for one tokenizer and template.
type Encoder struct {
	tok      *tokenizer.Tokenizer
	tmpl     *chat.Template
	specials []string
}

// New returns an Encoder; the special-token strings to protect are the
// contents of tok's special tokens.
func New(tok *tokenizer.Tokenizer, tmpl *chat.Template) *Encoder {
	e := &Encoder{tok: tok, tmpl: tmpl}
	for _, t := range tok.SpecialTokens() {
		e.specials = append(e.specials, t.Content)
	}
	return e
}

// Chat renders req and returns its token ids. opts are passed to
// chat.Template.RenderSegments (e.g. chat.TrustAssistant).
func (e *Encoder) Chat(req chat.Request, opts ...chat.SegmentOption) ([]int, error) {
	segs, err := e.tmpl.RenderSegments(req, e.specials, opts...)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, seg := range segs {
		if !seg.Special {
			ids = append(ids, e.tok.EncodeOrdinary(seg.Text)...)
			continue
		}
		// Special segments are drawn from tok's own special tokens, so the
		// lookup only fails if the tokenizer contradicts itself.
		id, ok := e.tok.TokenID(seg.Text)
		if !ok {
			return nil, fmt.Errorf("prompt: special token %q has no id in the vocabulary", seg.Text)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

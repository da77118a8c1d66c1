package calib

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/prompt"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

// Encoder turns calibration and corpus records into token ids the way the
// model reads them: a text record is BOS + its ordinary encoding; a chat
// record is rendered with the checkpoint's chat template (no generation
// prompt) and tokenized so that only the special tokens the template emits
// (and those in assistant turns, the model's own output) become control
// ids (lfm2-moe.md §5).
type Encoder struct {
	tok     *tokenizer.Tokenizer
	tmpl    *chat.Template
	tmplErr error
	prompts *prompt.Encoder
	control map[int]bool
	vocab   int
}

// NewEncoder loads the tokenizer and, if the checkpoint has one, the chat
// template of the model in dir; vocabSize bounds the ids records may give.
func NewEncoder(dir string, vocabSize int) (*Encoder, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("calib: %w", err)
	}
	e := &Encoder{tok: tok, control: map[int]bool{}, vocab: vocabSize}
	for _, t := range tok.SpecialTokens() {
		e.control[t.ID] = true
	}
	// A checkpoint without a template can still be calibrated on texts and
	// ids; only a chat record needs it, and then gets this error.
	e.tmpl, e.tmplErr = chat.Load(dir)
	if e.tmplErr == nil {
		e.prompts = prompt.New(tok, e.tmpl)
	}
	return e, nil
}

// IsControl reports whether id is a special (control) token: BOS, EOS and
// the chat and tool markers.
func (e *Encoder) IsControl(id int) bool { return e.control[id] }

// BOS returns the beginning-of-sequence id.
func (e *Encoder) BOS() (int, bool) { return e.tok.BOS() }

// Text encodes a text record: BOS + ordinary encoding (special-token
// strings in the text stay text).
func (e *Encoder) Text(s string) ([]int, error) {
	bos, ok := e.tok.BOS()
	if !ok {
		return nil, fmt.Errorf("calib: the tokenizer has no BOS token to start a text record with")
	}
	return append([]int{bos}, e.tok.EncodeOrdinary(s)...), nil
}

// Chat renders and encodes a chat record; messages and tools are the
// record's JSON arrays (tools may be empty).
func (e *Encoder) Chat(messages, tools []byte) ([]int, error) {
	if e.tmpl == nil {
		return nil, e.tmplErr
	}
	msgs, err := chat.ParseMessages(messages)
	if err != nil {
		return nil, err
	}
	req := chat.Request{Messages: msgs}
	if len(tools) > 0 {
		if req.Tools, err = chat.ParseTools(tools); err != nil {
			return nil, err
		}
	}
	ids, err := e.prompts.Chat(req, chat.TrustAssistant())
	if err != nil {
		return nil, fmt.Errorf("calib: %w", err)
	}
	return ids, nil
}

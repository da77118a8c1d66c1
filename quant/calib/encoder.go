package calib

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/prompt"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

// Encoder turns calibration and corpus records into token ids the way
// the model reads them: a text record is BOS + its ordinary encoding; a
// chat record is rendered with the checkpoint's chat template (no
// generation prompt) and tokenized so that only the special tokens the
// template emits (and those in assistant turns, the model's own output)
// become control ids (docs/model.md §5).
type Encoder struct {
	tok     *tokenizer.Tokenizer
	tokErr  error // why tok is nil: records of token ids need no tokenizer
	tmpl    *chat.Template
	tmplErr error
	prompts *prompt.Encoder
	control map[int]bool
	bos     int // -1 when there is none
	vocab   int
	// date is the time strftime_now formats: a chat record's ids must be
	// the same on any day the run is made (or resumed).
	date time.Time
}

// NewEncoder loads the tokenizer and, if the checkpoint has one, the chat
// template of the model in dir; vocabSize bounds the ids records may give.
// chatDate is the time a template's strftime_now formats (the zero time
// means chat.FixedDate()); the clock is never read.
// A checkpoint without tokenizer.json can still be calibrated on records
// of input_ids: the control ids are then config.json's bos, eos and pad
// ids, and only a text or chat record fails, naming the missing file.
func NewEncoder(dir string, vocabSize int, chatDate time.Time) (*Encoder, error) {
	if chatDate.IsZero() {
		chatDate = chat.FixedDate()
	}
	e := &Encoder{control: map[int]bool{}, vocab: vocabSize, bos: -1, date: chatDate}
	tok, err := tokenizer.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		cfg, cerr := config.Load(dir)
		if cerr != nil {
			return nil, fmt.Errorf("calib: %w", cerr)
		}
		e.tokErr = fmt.Errorf("calib: %s has no %s, so text and chat records cannot be encoded; give input_ids records, or add the tokenizer", dir, tokenizer.TokenizerFile)
		e.tmplErr = e.tokErr
		e.bos = cfg.BOSTokenID
		for _, id := range append([]int{cfg.BOSTokenID, cfg.PadTokenID}, cfg.EOSTokenIDs...) {
			e.control[id] = true
		}
		return e, nil
	}
	if err != nil {
		return nil, fmt.Errorf("calib: %w", err)
	}
	e.tok = tok
	if bos, ok := tok.BOS(); ok {
		e.bos = bos
	}
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
func (e *Encoder) BOS() (int, bool) { return e.bos, e.bos >= 0 }

// Text encodes a text record: BOS + ordinary encoding (special-token
// strings in the text stay text).
func (e *Encoder) Text(s string) ([]int, error) {
	if e.tok == nil {
		return nil, e.tokErr
	}
	bos, ok := e.BOS()
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
	req := chat.Request{Messages: msgs, Now: e.date}
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

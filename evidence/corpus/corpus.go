package corpus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/prompt"
	"github.com/lfmq/lfmq/engine/tokenizer"
	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/internal/bom"
)

// MaxBytes bounds a corpus file (it is read whole: its sha256 is a receipt).
const MaxBytes int64 = 4 << 30

// Corpus is a loaded corpus.
type Corpus struct {
	Name string
	Path string
	// SHA256 and Bytes are those of the whole file, whatever MaxRecords
	// kept.
	SHA256  string
	Bytes   int64
	Records []Record
}

// Record is one record's token ids.
type Record struct {
	// ID is the record's "id" (a string or a number as written), or
	// "line N".
	ID string
	// Line is the 1-based line of the record in the file.
	Line int
	// Source is which field the ids come from: "input_ids", "messages" or
	// "text".
	Source string
	Tokens []int
}

// EmptyError reports a corpus with nothing to score: no records, or
// records too short to give a single scored token.
type EmptyError struct {
	Path    string
	Records int
}

func (e *EmptyError) Error() string {
	if e.Records == 0 {
		return fmt.Sprintf("corpus: %s has no records (an empty file, or only blank lines)", e.Path)
	}
	return fmt.Sprintf("corpus: %s has no token to score: its %d record(s) are all shorter than two tokens", e.Path, e.Records)
}

// RecordError reports a record that cannot be scored.
type RecordError struct {
	Path  string
	Line  int
	ID    string
	Field string
	Msg   string
	Err   error
}

func (e *RecordError) Error() string {
	s := fmt.Sprintf("corpus: %s:%d", e.Path, e.Line)
	if e.ID != "" {
		s += fmt.Sprintf(" (record %s)", e.ID)
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	s += ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *RecordError) Unwrap() error { return e.Err }

// Encoder turns records into token ids with a checkpoint's tokenizer and,
// for chat records, its chat template (loaded on first use).
type Encoder struct {
	tok         *tokenizer.Tokenizer
	vocab       int
	loadPrompts func() (*prompt.Encoder, error)
}

// NewEncoder returns an Encoder over tok whose ids must lie below
// vocabSize; loadTemplate is called at most once, for the first chat
// record.
func NewEncoder(tok *tokenizer.Tokenizer, vocabSize int, loadTemplate func() (*chat.Template, error)) *Encoder {
	load := func() (*prompt.Encoder, error) {
		tmpl, err := loadTemplate()
		if err != nil {
			return nil, err
		}
		return prompt.New(tok, tmpl), nil
	}
	return &Encoder{tok: tok, vocab: vocabSize, loadPrompts: sync.OnceValues(load)}
}

// wireRecord is a record's fields that matter here.
type wireRecord struct {
	ID       json.RawMessage `json:"id"`
	InputIDs json.RawMessage `json:"input_ids"`
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
	Text     *string         `json:"text"`
}

func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// Load reads the corpus file at path. maxRecords > 0 keeps only the first
// maxRecords records.
func Load(name, path string, enc *Encoder, maxRecords int) (*Corpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("corpus: reading %s: %w", path, err)
	}
	if int64(len(data)) > MaxBytes {
		return nil, fmt.Errorf("corpus: %s is over the %d-byte limit", path, MaxBytes)
	}
	recs, err := Parse(path, data, enc, maxRecords)
	if err != nil {
		return nil, err
	}
	return &Corpus{Name: name, Path: path, SHA256: evidence.HashBytes(data), Bytes: int64(len(data)), Records: recs}, nil
}

// Parse reads JSONL data (path names it in errors). Blank lines are
// skipped. maxRecords > 0 stops after that many records.
func Parse(path string, data []byte, enc *Encoder, maxRecords int) ([]Record, error) {
	var recs []Record
	if bom.Has(data) {
		return nil, &RecordError{Path: path, Line: 1, Msg: bom.Advice}
	}
	line := 0
	for len(data) > 0 {
		if maxRecords > 0 && len(recs) == maxRecords {
			break
		}
		var l []byte
		l, data, _ = bytes.Cut(data, []byte("\n"))
		line++
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		r, err := enc.record(path, line, l)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, nil
}

func (e *Encoder) record(path string, line int, l []byte) (Record, error) {
	r := Record{Line: line}
	fail := func(field, msg string, err error) (Record, error) {
		return Record{}, &RecordError{Path: path, Line: line, ID: r.ID, Field: field, Msg: msg, Err: err}
	}
	var w wireRecord
	if err := json.Unmarshal(l, &w); err != nil {
		return fail("", "not a JSON object", err)
	}
	if present(w.ID) {
		var s string
		var n json.Number
		switch {
		case json.Unmarshal(w.ID, &s) == nil:
			r.ID = s
		case json.Unmarshal(w.ID, &n) == nil:
			r.ID = n.String()
		}
	}
	switch {
	case present(w.InputIDs):
		var ids []int64
		if err := json.Unmarshal(w.InputIDs, &ids); err != nil {
			return fail("input_ids", "not an array of integers", err)
		}
		r.Source, r.Tokens = "input_ids", make([]int, len(ids))
		for i, id := range ids {
			if id < 0 || id >= int64(e.vocab) {
				return fail(fmt.Sprintf("input_ids[%d]", i), fmt.Sprintf("id %d outside the vocabulary [0, %d)", id, e.vocab), nil)
			}
			r.Tokens[i] = int(id)
		}
	case present(w.Messages):
		msgs, err := chat.ParseMessages(w.Messages)
		if err != nil {
			return fail("messages", "invalid", err)
		}
		var tools []any
		if present(w.Tools) {
			if tools, err = chat.ParseTools(w.Tools); err != nil {
				return fail("tools", "invalid", err)
			}
		}
		prompts, err := e.loadPrompts()
		if err != nil {
			return fail("messages", "no chat template to render them", err)
		}
		// Assistant turns are the text the model is scored on producing:
		// their tool-call and thinking markers are the control tokens it
		// emits, so they are trusted (chat.TrustAssistant); every other
		// request string is ordinary text.
		// The template's clock is pinned, so that a corpus always gives
		// the same ids.
		ids, err := prompts.Chat(chat.Request{Messages: msgs, Tools: tools, Now: chat.FixedDate()}, chat.TrustAssistant())
		if err != nil {
			return fail("messages", "rendering the chat template", err)
		}
		r.Source = "messages"
		r.Tokens = append(r.Tokens, ids...)
	case w.Text != nil:
		r.Source = "text"
		if bos, ok := e.tok.BOS(); ok {
			r.Tokens = append(r.Tokens, bos)
		}
		r.Tokens = append(r.Tokens, e.tok.EncodeOrdinary(*w.Text)...)
	default:
		return fail("", "has none of input_ids, messages or text", nil)
	}
	for i, id := range r.Tokens {
		if id >= e.vocab {
			return fail(r.Source, fmt.Sprintf("token %d is id %d, outside the model's vocabulary of %d", i, id, e.vocab), nil)
		}
	}
	if r.ID == "" {
		r.ID = fmt.Sprintf("line %d", line)
	}
	return r, nil
}

package calib

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/safetensors"
	"github.com/lfmq/lfmq/internal/bom"
)

// Record is one record of a calibration file or corpus as token ids.
type Record struct {
	// ID is the record's "id" field, or "#N" (its 1-based line) without one.
	ID string
	// IDs are the record's tokens.
	IDs []int
	// Given is true when the record carried input_ids, used exactly as
	// given; false when it was encoded from text or chat messages.
	Given bool
}

// RecordError reports a record that cannot be used, naming the file and
// line (or, for a token-id file, the row).
type RecordError struct {
	File string
	Line int
	Msg  string
	Err  error
}

func (e *RecordError) Error() string {
	s := fmt.Sprintf("calib: %s:%d: %s", e.File, e.Line, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *RecordError) Unwrap() error { return e.Err }

// maxLine bounds one JSONL record (a whole book in one record is ~10 MB).
const maxLine = 256 << 20

// readRecords reads a JSONL file of {"input_ids": […]}, {"messages": […],
// "tools": […]} or {"text": …} records (in that order of precedence) and
// returns them with the file's sha256. A file ending in .safetensors is a
// token-id file instead: its tensor "input_ids" (or its only tensor) is
// [N, L] (N records given as they are) or [T] (one record).
func readRecords(path string, enc *Encoder) ([]Record, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("calib: %w", err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	if strings.HasSuffix(path, ".safetensors") {
		recs, err := idRecords(path, enc.vocab)
		return recs, digest, err
	}
	if bom.Has(data) {
		return nil, "", &RecordError{File: path, Line: 1, Msg: bom.Advice}
	}
	var recs []Record
	r := bufio.NewReader(bytes.NewReader(data))
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) > maxLine {
			return nil, "", &RecordError{File: path, Line: line, Msg: fmt.Sprintf("record longer than %d bytes", maxLine)}
		}
		if len(bytes.TrimSpace(b)) > 0 {
			rec, rerr := parseRecord(b, enc, path, line)
			if rerr != nil {
				return nil, "", rerr
			}
			recs = append(recs, rec)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("calib: %s: %w", path, err)
		}
	}
	if len(recs) == 0 {
		return nil, "", &RecordError{File: path, Line: 0, Msg: "no records"}
	}
	return recs, digest, nil
}

func parseRecord(b []byte, enc *Encoder, path string, line int) (Record, error) {
	var raw struct {
		ID       any             `json:"id"`
		InputIDs json.RawMessage `json:"input_ids"`
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
		Text     *string         `json:"text"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Record{}, &RecordError{File: path, Line: line, Msg: jsonRecordMsg(err)}
	}
	rec := Record{ID: fmt.Sprintf("#%d", line)}
	switch v := raw.ID.(type) {
	case string:
		rec.ID = v
	case float64:
		rec.ID = fmt.Sprint(v)
	}
	present := func(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }
	var err error
	switch {
	case present(raw.InputIDs):
		if err := json.Unmarshal(raw.InputIDs, &rec.IDs); err != nil {
			return rec, &RecordError{File: path, Line: line, Msg: "input_ids is not an array of integers"}
		}
		rec.Given = true
	case present(raw.Messages):
		tools := raw.Tools
		if !present(tools) {
			tools = nil
		}
		rec.IDs, err = enc.Chat(raw.Messages, tools)
	case raw.Text != nil:
		rec.IDs, err = enc.Text(*raw.Text)
	default:
		return rec, &RecordError{File: path, Line: line, Msg: `the record has none of "input_ids", "messages", "text"`}
	}
	if err != nil {
		return rec, &RecordError{File: path, Line: line, Msg: "cannot encode record " + rec.ID, Err: err}
	}
	if len(rec.IDs) == 0 {
		return rec, &RecordError{File: path, Line: line, Msg: "record " + rec.ID + " has no tokens"}
	}
	for i, id := range rec.IDs {
		if id < 0 || id >= enc.vocab {
			return rec, &RecordError{File: path, Line: line, Msg: fmt.Sprintf("record %s: token %d is id %d, outside the vocabulary [0, %d)", rec.ID, i, id, enc.vocab)}
		}
	}
	return rec, nil
}

// jsonRecordMsg says what is wrong with a line that does not decode into
// a record, in JSON's terms rather than Go's: not JSON at all, a JSON
// value other than an object, or a field of the wrong kind.
func jsonRecordMsg(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Sprintf(`a JSON %s, not an object with "input_ids", "messages" or "text"`, te.Value)
		}
		want := "another type"
		if te.Field == "text" {
			want = "a string"
		}
		return fmt.Sprintf("%q is a JSON %s, expected %s", te.Field, te.Value, want)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("not a JSON object: %v (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	}
	return "not a JSON object: " + strings.TrimPrefix(err.Error(), "json: ")
}

// idRecords reads a safetensors token-id file.
func idRecords(path string, vocab int) ([]Record, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("calib: %w", err)
	}
	defer f.Close()
	name := "input_ids"
	if _, ok := f.Info(name); !ok {
		names := f.Names()
		if len(names) != 1 {
			return nil, &RecordError{File: path, Msg: fmt.Sprintf("no tensor %q and %d tensors to choose from", name, len(names))}
		}
		name = names[0]
	}
	info, _ := f.Info(name)
	raw, err := f.Bytes(name)
	if err != nil {
		return nil, fmt.Errorf("calib: %w", err)
	}
	var ids []int
	switch info.DType {
	case dtype.I32, dtype.U32:
		for i := 0; i+4 <= len(raw); i += 4 {
			v := uint32(raw[i]) | uint32(raw[i+1])<<8 | uint32(raw[i+2])<<16 | uint32(raw[i+3])<<24
			if info.DType == dtype.I32 {
				ids = append(ids, int(int32(v)))
			} else {
				ids = append(ids, int(v))
			}
		}
	case dtype.I64:
		for i := 0; i+8 <= len(raw); i += 8 {
			var v uint64
			for j := 7; j >= 0; j-- {
				v = v<<8 | uint64(raw[i+j])
			}
			ids = append(ids, int(int64(v)))
		}
	default:
		return nil, &RecordError{File: path, Msg: fmt.Sprintf("tensor %q has dtype %s; token ids must be I32, U32 or I64", name, info.DType)}
	}
	var rows, cols int
	switch len(info.Shape) {
	case 1:
		rows, cols = 1, int(info.Shape[0])
	case 2:
		rows, cols = int(info.Shape[0]), int(info.Shape[1])
	default:
		return nil, &RecordError{File: path, Msg: fmt.Sprintf("tensor %q has shape %v; want [N, L] or [T]", name, info.Shape)}
	}
	if rows == 0 || cols == 0 {
		return nil, &RecordError{File: path, Msg: "no tokens"}
	}
	recs := make([]Record, rows)
	for r := range rows {
		rec := Record{ID: fmt.Sprintf("row %d", r), IDs: ids[r*cols : (r+1)*cols], Given: len(info.Shape) == 2}
		for i, id := range rec.IDs {
			if id < 0 || id >= vocab {
				return nil, &RecordError{File: path, Line: r, Msg: fmt.Sprintf("token %d is id %d, outside the vocabulary [0, %d)", i, id, vocab)}
			}
		}
		recs[r] = rec
	}
	return recs, nil
}

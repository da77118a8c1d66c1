package task

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Kind is a task: how items are asked and scored.
type Kind string

// The tasks.
const (
	// GSM8K is a generation task: a chat-templated word problem, the answer
	// extracted from the model's final answer and compared with the gold
	// "#### N" line of the item's solution.
	GSM8K Kind = "gsm8k"
	// Choice is a multiple-choice task scored by likelihood: the choice
	// whose tokens are most likely after the context wins.
	Choice Kind = "choice"
)

// ParseKind reads a task name.
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case GSM8K, Choice:
		return Kind(s), nil
	}
	return "", fmt.Errorf("task: unknown task %q; known: gsm8k, choice", s)
}

// Item is one task item.
type Item struct {
	// ID is the item's "id" field, or its 1-based position in the file.
	ID string
	// Question and Solution are a GSM8K item's fields; Gold is the
	// normalized number of the solution's "#### N" line.
	Question string
	Solution string
	Gold     string
	// Context, Choices and Label are a choice item's: the text scored
	// choices follow, the choices, and the index of the right one.
	Context string
	Choices []string
	Label   int
}

// DatasetError is a dataset record that cannot be used: the file, the
// record's 1-based line (or row), the field and what was expected.
type DatasetError struct {
	Name  string
	Line  int
	Field string
	Msg   string
}

func (e *DatasetError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("task: %s: %s", e.Name, e.Msg)
	case e.Field == "":
		return fmt.Sprintf("task: %s:%d: %s", e.Name, e.Line, e.Msg)
	}
	return fmt.Sprintf("task: %s:%d: %s: %s", e.Name, e.Line, e.Field, e.Msg)
}

// Bounds on untrusted dataset bytes: a GSM8K test split is 0.7 MB.
const (
	// MaxDatasetBytes bounds a dataset file.
	MaxDatasetBytes = 256 << 20
	// maxRecordBytes bounds one JSONL line.
	maxRecordBytes = 1 << 20
	// maxChoices bounds a choice item's choices (each is scored).
	maxChoices = 64
)

// record is a JSONL line of either task.
type record struct {
	ID       json.RawMessage `json:"id"`
	Question *string         `json:"question"`
	Answer   json.RawMessage `json:"answer"`
	Context  *string         `json:"context"`
	Choices  []string        `json:"choices"`
}

// ReadJSONL reads the items of a JSONL dataset of kind from r; name is
// used in errors. A GSM8K record is {"question": text, "answer": solution
// ending in a "#### N" line}; a choice record is {"context": text,
// "choices": [text, …], "answer": index}. Both may carry "id" (a string
// or an integer); other fields are ignored, blank lines skipped.
func ReadJSONL(name string, r io.Reader, kind Kind) ([]Item, error) {
	sc := bufio.NewScanner(io.LimitReader(r, MaxDatasetBytes+1))
	sc.Buffer(make([]byte, 64<<10), maxRecordBytes)
	var items []Item
	ids := map[string]int{}
	line, total := 0, 0
	for sc.Scan() {
		line++
		total += len(sc.Bytes()) + 1
		if total > MaxDatasetBytes+1 {
			return nil, &DatasetError{Name: name, Msg: fmt.Sprintf("over the %d-byte limit", MaxDatasetBytes)}
		}
		data := bytes.TrimSpace(sc.Bytes())
		if len(data) == 0 {
			continue
		}
		var rec record
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, &DatasetError{Name: name, Line: line, Msg: "not a JSON object: " + err.Error()}
		}
		it, err := rec.item(kind, len(items)+1)
		if err != nil {
			err.Name, err.Line = name, line
			return nil, err
		}
		if prev, dup := ids[it.ID]; dup {
			return nil, &DatasetError{Name: name, Line: line, Field: "id", Msg: fmt.Sprintf("%q is also the id of line %d", it.ID, prev)}
		}
		ids[it.ID] = line
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &DatasetError{Name: name, Line: line + 1, Msg: fmt.Sprintf("a line over %d bytes", maxRecordBytes)}
		}
		return nil, &DatasetError{Name: name, Msg: err.Error()}
	}
	if len(items) == 0 {
		return nil, &DatasetError{Name: name, Msg: "no records"}
	}
	return items, nil
}

// item checks a record as an item of kind; pos is its 1-based position.
func (rec *record) item(kind Kind, pos int) (Item, *DatasetError) {
	it := Item{ID: strconv.Itoa(pos)}
	if len(rec.ID) > 0 && string(rec.ID) != "null" {
		var s string
		var n int64
		switch {
		case json.Unmarshal(rec.ID, &s) == nil && s != "":
			it.ID = s
		case json.Unmarshal(rec.ID, &n) == nil:
			it.ID = strconv.FormatInt(n, 10)
		default:
			return it, &DatasetError{Field: "id", Msg: fmt.Sprintf("expected a non-empty string or an integer, got %.40s", rec.ID)}
		}
	}
	switch kind {
	case GSM8K:
		if rec.Question == nil || strings.TrimSpace(*rec.Question) == "" {
			return it, &DatasetError{Field: "question", Msg: "missing or empty"}
		}
		var sol string
		if err := json.Unmarshal(rec.Answer, &sol); err != nil || len(rec.Answer) == 0 {
			return it, &DatasetError{Field: "answer", Msg: "expected the solution text ending in a \"#### N\" line"}
		}
		gold, err := GoldAnswer(sol)
		if err != nil {
			return it, &DatasetError{Field: "answer", Msg: err.Error()}
		}
		it.Question, it.Solution, it.Gold = *rec.Question, sol, gold
	case Choice:
		if rec.Context == nil {
			return it, &DatasetError{Field: "context", Msg: "missing"}
		}
		if len(rec.Choices) < 2 || len(rec.Choices) > maxChoices {
			return it, &DatasetError{Field: "choices", Msg: fmt.Sprintf("expected 2 to %d choices, got %d", maxChoices, len(rec.Choices))}
		}
		for j, c := range rec.Choices {
			if strings.TrimSpace(c) == "" {
				return it, &DatasetError{Field: fmt.Sprintf("choices[%d]", j), Msg: "empty"}
			}
		}
		var label int
		if err := json.Unmarshal(rec.Answer, &label); err != nil || len(rec.Answer) == 0 || label < 0 || label >= len(rec.Choices) {
			return it, &DatasetError{Field: "answer", Msg: fmt.Sprintf("expected the index of the right choice, 0 to %d, got %.40s", len(rec.Choices)-1, rec.Answer)}
		}
		it.Context, it.Choices, it.Label = *rec.Context, rec.Choices, label
	default:
		return it, &DatasetError{Msg: fmt.Sprintf("unknown task %q", kind)}
	}
	return it, nil
}

// GoldAnswer is the normalized number of a GSM8K solution's last
// "#### N" line; a solution without one is an error.
func GoldAnswer(solution string) (string, error) {
	lines := hashesLine.FindAllStringSubmatch(solution, -1)
	if len(lines) == 0 {
		return "", errors.New(`no "#### N" answer line`)
	}
	n := numberPattern.FindString(lines[len(lines)-1][1])
	if n == "" {
		return "", fmt.Errorf("the answer line %q holds no number", strings.TrimSpace(lines[len(lines)-1][0]))
	}
	return Normalize(n), nil
}

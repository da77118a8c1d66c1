package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// gsm8kRow and choiceRow are the parquet columns of the two tasks, the
// names of the JSONL records' fields (GSM8K's own parquet files have
// question and answer).
type gsm8kRow struct {
	Question string `parquet:"question"`
	Answer   string `parquet:"answer"`
}

type choiceRow struct {
	Context string   `parquet:"context"`
	Choices []string `parquet:"choices,list"`
	Answer  int64    `parquet:"answer"`
}

// maxParquetRows bounds the rows read from one file.
const maxParquetRows = 1 << 20

// ReadParquet reads the items of a parquet dataset of kind, as the hub
// stores datasets: a GSM8K file has string columns question and answer, a
// choice file context, choices (a list of strings) and answer (an
// integer). Items are checked as JSONL records are; their ids are their
// 1-based row numbers. name is used in errors.
func ReadParquet(name string, r io.ReaderAt, size int64, kind Kind) (items []Item, err error) {
	if size > MaxDatasetBytes {
		return nil, &DatasetError{Name: name, Msg: fmt.Sprintf("%d bytes, over the %d-byte limit", size, MaxDatasetBytes)}
	}
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, &DatasetError{Name: name, Msg: "not a parquet file: " + err.Error()}
	}
	if n := f.NumRows(); n > maxParquetRows {
		return nil, &DatasetError{Name: name, Msg: fmt.Sprintf("%d rows, over the %d-row limit", n, maxParquetRows)}
	}
	cols := []string{"question", "answer"}
	if kind == Choice {
		cols = []string{"context", "choices", "answer"}
	}
	for _, c := range cols {
		if _, ok := f.Schema().Lookup(c); !ok {
			if _, ok := f.Schema().Lookup(c, "list", "element"); !ok {
				return nil, &DatasetError{Name: name, Field: c, Msg: fmt.Sprintf("no such column; a %s file has columns %v", kind, cols)}
			}
		}
	}
	// The library panics where it meets a schema it cannot map onto the
	// row type; that is a bad file, not a crash.
	defer func() {
		if p := recover(); p != nil {
			items, err = nil, &DatasetError{Name: name, Msg: fmt.Sprintf("cannot read the %s columns: %v", kind, p)}
		}
	}()
	var recs []record
	switch kind {
	case GSM8K:
		rows, err := readRows[gsm8kRow](f)
		if err != nil {
			return nil, &DatasetError{Name: name, Msg: err.Error()}
		}
		for _, row := range rows {
			q := row.Question
			a, _ := json.Marshal(row.Answer)
			recs = append(recs, record{Question: &q, Answer: a})
		}
	case Choice:
		rows, err := readRows[choiceRow](f)
		if err != nil {
			return nil, &DatasetError{Name: name, Msg: err.Error()}
		}
		for _, row := range rows {
			c := row.Context
			recs = append(recs, record{Context: &c, Choices: row.Choices, Answer: json.RawMessage(strconv.FormatInt(row.Answer, 10))})
		}
	default:
		return nil, &DatasetError{Name: name, Msg: fmt.Sprintf("unknown task %q", kind)}
	}
	for i, rec := range recs {
		it, derr := rec.item(kind, i+1)
		if derr != nil {
			derr.Name, derr.Line = name, i+1
			return nil, derr
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil, &DatasetError{Name: name, Msg: "no rows"}
	}
	return items, nil
}

func readRows[T any](f *parquet.File) ([]T, error) {
	rd := parquet.NewGenericReader[T](f)
	defer rd.Close()
	out := make([]T, 0, f.NumRows())
	buf := make([]T, 256)
	for {
		n, err := rd.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

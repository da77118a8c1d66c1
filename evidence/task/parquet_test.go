package task

import (
	"bytes"
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestReadParquet: a GSM8K parquet file (written by the parquet library
// with GSM8K's two columns) reads as the same items as the JSONL file it
// was made from; a file without the columns, or not parquet, is refused
// naming what is wrong.
func TestReadParquet(t *testing.T) {
	want := readWordProblems(t)
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[gsm8kRow](&buf)
	for _, it := range want {
		if _, err := w.Write([]gsm8kRow{{Question: it.Question, Answer: it.Solution}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadParquet("test.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len()), GSM8K)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d items, want %d", len(got), len(want))
	}
	for i := range want {
		if g, w := got[i], want[i]; g.ID != w.ID || g.Question != w.Question || g.Solution != w.Solution || g.Gold != w.Gold {
			t.Errorf("item %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	buf.Reset()
	cw := parquet.NewGenericWriter[choiceRow](&buf)
	cw.Write([]choiceRow{{Context: "c ", Choices: []string{"a", "b"}, Answer: 1}})
	cw.Close()
	items, err := ReadParquet("choice.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len()), Choice)
	if err != nil || len(items) != 1 || items[0].Label != 1 || len(items[0].Choices) != 2 {
		t.Fatalf("choice parquet: %+v, %v", items, err)
	}
	_, err = ReadParquet("choice.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len()), GSM8K)
	var de *DatasetError
	if !errors.As(err, &de) || de.Field != "question" {
		t.Errorf("a choice file read as GSM8K: %v", err)
	}
	if _, err := ReadParquet("x.parquet", bytes.NewReader([]byte("PAR1 not really")), 15, GSM8K); !errors.As(err, &de) {
		t.Errorf("not parquet: %v", err)
	}
}

package calib

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzReadRecords feeds arbitrary bytes to the calibration file reader: it
// must return records or an error, never panic, and every id it returns
// must lie in the vocabulary.
func FuzzReadRecords(f *testing.F) {
	for _, s := range []string{
		`{"input_ids": [1, 2, 3]}`,
		`{"text": "hello"}` + "\n" + `{"messages": [{"role": "user", "content": "hi"}]}`,
		`{"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f"}]}`,
		`{"id": 7, "input_ids": null, "text": "x"}`,
		`{"input_ids": [-1]}`,
		"\n\n{}",
	} {
		f.Add([]byte(s))
	}
	enc, err := NewEncoder(tinyModel, vocab, time.Time{})
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "c.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		recs, _, err := readRecords(path, enc)
		if err != nil {
			return
		}
		for _, r := range recs {
			if len(r.IDs) == 0 {
				t.Fatalf("record %s without tokens", r.ID)
			}
			for _, id := range r.IDs {
				if id < 0 || id >= vocab {
					t.Fatalf("record %s: id %d outside the vocabulary", r.ID, id)
				}
			}
		}
	})
}

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the ticker's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStatusLinesEndWithTheWork runs quantize and score off a terminal
// with a status line every millisecond and stdout and stderr on one plain
// buffer, as in `lfmq ... 2>&1 | tee log`: the status lines stop when the
// work returns, before the command writes its summary. The buffer has no
// lock, so under -race (make test-race) a ticker that still writes while
// the command prints is reported as a data race; without -race a late line
// shows up after the summary.
func TestStatusLinesEndWithTheWork(t *testing.T) {
	prev := statusEvery
	statusEvery = time.Millisecond
	t.Cleanup(func() { statusEvery = prev })
	dir := t.TempDir()
	rtn := filepath.Join(dir, "rtn")
	// In order: score reads quantize's checkpoint.
	steps := []struct {
		name   string
		args   []string
		status string
	}{
		{"quantize", []string{"quantize", "--model", tinyModel, "--out", rtn, "--method", "rtn"}, "quantizing: "},
		{"score", []string{"score", "--reference", tinyModel, "--candidate", "rtn=" + rtn,
			"--corpus", "instruct=" + filepath.Join(tinyCorpora, "instruct.jsonl"), "--ctx", "128", "--max-records", "2",
			"--out", filepath.Join(dir, "ev.json")}, "scoring: "},
	}
	for _, st := range steps {
		var out bytes.Buffer
		ios := &IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out}
		if code := run(context.Background(), st.args, ios); code != 0 {
			t.Fatalf("%s: exit %d:\n%s", st.name, code, out.String())
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		status, summary, late := 0, -1, 0
		for i, l := range lines {
			if !strings.HasPrefix(l, st.status) {
				if summary < 0 {
					summary = i
				}
				continue
			}
			status++
			if summary >= 0 {
				if late == 0 {
					t.Errorf("%s: status line %d %q after the summary began at line %d %q", st.name, i+1, l, summary+1, lines[summary])
				}
				late++
			}
		}
		if late > 1 {
			t.Errorf("%s: %d status lines after the summary began", st.name, late)
		}
		if status == 0 || summary < 0 {
			t.Errorf("%s: want status lines, then the summary; got %d status lines:\n%s", st.name, status, out.String())
		}
	}
}

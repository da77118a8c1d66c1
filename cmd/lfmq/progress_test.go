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

// TestLineProgress: off a terminal, long work prints a status line every
// interval, with the count, the stage and the time, and nothing after it
// ends; work shorter than an interval prints nothing.
func TestLineProgress(t *testing.T) {
	var out syncBuffer
	const every = 40 * time.Millisecond
	start := time.Now()
	p := newLineProgress(&out, "quantizing", "tensors", every)
	p.Start(10)
	for range 3 {
		p.Done("x")
	}
	p.Stage(4, "solve w1/w3")
	// Wait for three lines however slow the machine is, then stop.
	for deadline := time.Now().Add(10 * time.Second); strings.Count(out.String(), "\n") < 3 && time.Now().Before(deadline); {
		time.Sleep(every / 4)
	}
	p.finish()
	elapsed := time.Since(start)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 || len(lines) > int(elapsed/every)+1 {
		t.Fatalf("%d lines in %s at one per %s:\n%s", len(lines), elapsed, every, out.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "quantizing: 3/10 tensors, 30% (layer 4: solve w1/w3), about ") || !strings.Contains(l, "elapsed)") {
			t.Errorf("line %q", l)
		}
	}
	n := len(out.String())
	time.Sleep(2 * every)
	if len(out.String()) != n {
		t.Error("a line was written after finish")
	}

	var quick syncBuffer
	q := newLineProgress(&quick, "scoring", "windows", time.Hour)
	q.Start(2)
	q.Set(2)
	q.finish()
	if quick.String() != "" {
		t.Errorf("short work printed %q", quick.String())
	}
}

// TestBarProgressEndsFull: the quantize bar is drawn complete before the
// summary, though its redraws are throttled (it once stopped at 311/358).
func TestBarProgressEndsFull(t *testing.T) {
	ios, _, stderr := testStreams()
	p := &barProgress{w: ios}
	p.Start(358)
	for range 358 {
		p.Done("t")
	}
	p.finish(true)
	if !strings.Contains(stderr.String(), "358/358") {
		t.Errorf("the bar never showed 358/358: %q", stderr.String())
	}
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

// TestCounterFollowsWork: once the work is known, the share done and the
// time left come from it, not from the count of tensors.
func TestCounterFollowsWork(t *testing.T) {
	tests := []struct {
		name            string
		done, total     int
		work, workTotal float64
		want            string
	}{
		{"count", 3, 10, 0, 0, "quantizing: 3/10 tensors, 30% (layer 1: solve w1/w3), about 1m10s left"},
		{"work", 3, 10, 50, 100, "quantizing: 3/10 tensors, 50% (layer 1: solve w1/w3), about 30s left"},
		{"little work", 9, 10, 5, 100, "quantizing: 9/10 tensors, 5% (layer 1: solve w1/w3)"},
	}
	for _, tt := range tests {
		c := counter{what: "quantizing", unit: "tensors", done: tt.done, total: tt.total, stage: "layer 1: solve w1/w3", work: tt.work, workTotal: tt.workTotal}
		if got := c.line(30 * time.Second); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestBarFollowsWork: a bar told the work moves with it, not with the
// tensors, and ends full.
func TestBarFollowsWork(t *testing.T) {
	ios, _, stderr := testStreams()
	p := &barProgress{w: ios}
	p.Start(4)
	p.StartWork(400)
	p.Done("t")
	p.Work(100)
	p.Stage(2, "solve w2")
	p.Work(300)
	p.finish(true)
	if !strings.Contains(stderr.String(), "100%") || !strings.Contains(stderr.String(), "1/4 tensors, layer 2: solve w2") {
		t.Errorf("bar: %q", stderr.String())
	}
}

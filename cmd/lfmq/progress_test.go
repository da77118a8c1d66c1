package main

import (
	"bytes"
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

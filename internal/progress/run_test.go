package progress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lfmq/lfmq/quant"
)

// TestQuantizeTrace: off a terminal a quantize run's progress is status
// lines; a completed run that followed its work writes the trace that
// TraceEnv names, a failed one does not.
func TestQuantizeTrace(t *testing.T) {
	for _, completed := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "run.trace")
		t.Setenv(TraceEnv, path)
		var out syncBuffer
		q := NewQuantize(&out, false, time.Hour)
		p := q.Progress()
		if _, ok := p.(*Lines); !ok {
			t.Fatalf("off a terminal: %T", p)
		}
		p.Start(1)
		var total quant.WorkTotals
		total[quant.WorkForward] = 1
		p.(quant.WorkProgress).StartWork(total)
		p.(quant.WorkProgress).Work(quant.WorkForward, 1)
		p.Done("t")
		if err := q.Finish(completed); err != nil {
			t.Fatal(err)
		}
		q.Stop()
		_, err := os.Stat(path)
		if completed != (err == nil) {
			t.Errorf("completed %v: trace %v", completed, err)
		}
	}
}

// TestQuantizeBar: on a terminal a quantize run's progress is the bar,
// drawn full when the run completes.
func TestQuantizeBar(t *testing.T) {
	var out bytes.Buffer
	q := NewQuantize(&out, true, time.Hour)
	p := q.Progress()
	p.Start(2)
	p.Done("a")
	p.Done("b")
	if err := q.Finish(true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2/2") {
		t.Errorf("bar: %q", out.String())
	}
}

// TestCount: counted progress is status lines off a terminal and a bar
// (cleared when done, so it may leave nothing) on one; a second Finish is
// a no-op.
func TestCount(t *testing.T) {
	var lines syncBuffer
	c := NewCount(&lines, false, "scoring", "tokens", 5*time.Millisecond)
	c.Report(3, 10)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(lines.String(), "\n") && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	c.Finish()
	c.Finish()
	if !strings.HasPrefix(lines.String(), "scoring: 3/10 tokens, 30%") {
		t.Errorf("lines: %q", lines.String())
	}

	var bar bytes.Buffer
	b := NewCount(&bar, true, "scoring", "tokens", time.Hour)
	b.Report(5, 10)
	if b.bar == nil || b.lines != nil {
		t.Fatal("on a terminal: no bar")
	}
	b.Finish()
	b.Finish()
	if b.bar != nil {
		t.Error("the bar outlives Finish")
	}
}

// TestStatus: the caller's line is written every interval off a terminal
// and beside a spinner on one.
func TestStatus(t *testing.T) {
	var lines syncBuffer
	s := NewStatus(&lines, false, 5*time.Millisecond, func() string { return "bench: 2 cells" })
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(lines.String(), "\n") && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	s.Update()
	s.Finish()
	if !strings.HasPrefix(lines.String(), "bench: 2 cells (") {
		t.Errorf("lines: %q", lines.String())
	}

	var spin bytes.Buffer
	sp := NewStatus(&spin, true, time.Hour, func() string { return "bench: 3 cells" })
	sp.Update()
	sp.Finish()
	if !strings.Contains(spin.String(), "bench: 3 cells") {
		t.Errorf("spinner: %q", spin.String())
	}
}

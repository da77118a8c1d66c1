package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/internal/eta"
	"github.com/lfmq/lfmq/quant"
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
	p := NewLines(&out, "quantizing", "tensors", every)
	p.Start(10)
	for range 3 {
		p.Done("x")
	}
	p.Stage(4, "solve w1/w3")
	// Wait for three lines however slow the machine is, then stop.
	for deadline := time.Now().Add(10 * time.Second); strings.Count(out.String(), "\n") < 3 && time.Now().Before(deadline); {
		time.Sleep(every / 4)
	}
	p.Finish()
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
	q := NewLines(&quick, "scoring", "windows", time.Hour)
	q.Start(2)
	q.Set(2)
	q.Finish()
	if quick.String() != "" {
		t.Errorf("short work printed %q", quick.String())
	}
}

// TestBarProgressEndsFull: the quantize bar is drawn complete before the
// summary, though its redraws are throttled (it once stopped at 311/358).
func TestBarProgressEndsFull(t *testing.T) {
	var stderr bytes.Buffer
	p := NewBar(&stderr)
	p.Start(358)
	for range 358 {
		p.Done("t")
	}
	p.Finish(true)
	if !strings.Contains(stderr.String(), "358/358") {
		t.Errorf("the bar never showed 358/358: %q", stderr.String())
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestCounterFollowsWork: once the work is followed, the share done and
// the time left come from each kind's timing, not from the count of
// tensors; no time left is shown before the estimate means something, and
// the percentage never goes back.
func TestCounterFollowsWork(t *testing.T) {
	count := counter{what: "quantizing", unit: "tensors", done: 3, total: 10, stage: "layer 1: solve w1/w3"}
	if got, want := count.line(30*time.Second), "quantizing: 3/10 tensors, 30% (layer 1: solve w1/w3), about 1m10s left"; got != want {
		t.Errorf("by count: %q, want %q", got, want)
	}

	clock := &fakeClock{t: time.Unix(0, 0)}
	// Priors of its own (not quant's, which are measured): the forward's
	// four times cheaper than the solves', each kind in its own family.
	priors, families := make([]float64, quant.NumWorkKinds), make([]int, quant.NumWorkKinds)
	for k := range priors {
		priors[k], families[k] = 1, k
	}
	priors[quant.WorkForward] = 0.25
	f := &Follower{now: clock.now, est: eta.New(priors, families)}
	var total quant.WorkTotals
	// Equal work of two kinds.
	total[quant.WorkForward], total[quant.WorkUpSolve] = 100, 100
	f.StartWork(total)
	c := counter{what: "quantizing", unit: "tensors", done: 0, total: 10, stage: "layer 1: forward", follow: f}
	step := func(d time.Duration, kind quant.WorkKind, work float64) {
		clock.t = clock.t.Add(d)
		f.Work(kind, work)
	}
	// 1 % of the forward in 1 s: the prior makes the run ~500 s, so
	// 1 s is under MinShare and no time is shown.
	step(time.Second, quant.WorkForward, 1)
	if got, want := c.line(time.Second), "quantizing: 0/10 tensors, 0% (layer 1: forward)"; got != want {
		t.Errorf("at 1 s: %q, want %q", got, want)
	}
	// The whole forward at 1 s per unit: 100 s. The solves are four times
	// the forward per unit (the prior): 400 s left.
	step(99*time.Second, quant.WorkForward, 99)
	if got, want := c.line(100*time.Second), "quantizing: 0/10 tensors, 20% (layer 1: forward), about 6m40s left"; got != want {
		t.Errorf("at 100 s: %q, want %q", got, want)
	}
	// Half the solves in one item, each unit at 2 s (half the prior's
	// 4 s): their own timing, with the prior counted as one more item at
	// the forward's 4 s per unit of prior, gives (100 + 50×4)/(50 + 50) =
	// 3 s per unit: 150 s, less the 10 s since.
	c.stage = "layer 1: solve w1/w3"
	step(100*time.Second, quant.WorkUpSolve, 50)
	clock.t = clock.t.Add(10 * time.Second)
	if got, want := c.line(210*time.Second), "quantizing: 0/10 tensors, 60% (layer 1: solve w1/w3), about 2m20s left"; got != want {
		t.Errorf("at 210 s: %q, want %q", got, want)
	}
	// A slow item makes the estimate grow; the percentage stays.
	step(200*time.Second, quant.WorkUpSolve, 1)
	if got := c.line(410 * time.Second); !strings.Contains(got, " 60% ") {
		t.Errorf("at 410 s the percentage went back: %q", got)
	}
	step(time.Second, quant.WorkUpSolve, 49)
	if got, want := c.line(411*time.Second), "quantizing: 0/10 tensors, 100% (layer 1: solve w1/w3)"; got != want {
		t.Errorf("done: %q, want %q", got, want)
	}
}

// TestBarFollowsWork: a bar told the work moves with it, not with the
// tensors, shows the stage and the tensors, and ends full.
func TestBarFollowsWork(t *testing.T) {
	var stderr bytes.Buffer
	p := NewBar(&stderr)
	p.Start(4)
	var total quant.WorkTotals
	total[quant.WorkForward], total[quant.WorkUpSolve] = 100, 300
	p.StartWork(total)
	p.Done("t")
	p.Work(quant.WorkForward, 100)
	p.Stage(2, "solve w2")
	p.Work(quant.WorkUpSolve, 300)
	p.Finish(true)
	if !strings.Contains(stderr.String(), "100%") || !strings.Contains(stderr.String(), "1/4 tensors, layer 2: solve w2") {
		t.Errorf("bar: %q", stderr.String())
	}
}

package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/lfmq/lfmq/internal/cputime"
	"github.com/lfmq/lfmq/quant"
)

// Every is how often long work reports itself off a terminal (in a log,
// in CI): often enough that it is never mistaken for a hang, rarely enough
// that a log stays readable.
const Every = 10 * time.Second

// Ticker writes a status line every interval while work runs, for
// output that is not a terminal and so gets no progress bar. The first
// line comes after one interval: short work prints nothing.
type Ticker struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// StartStatus calls status every interval and writes its line to w, with
// the time elapsed, until Stop. status must be safe to call from another
// goroutine; an empty line is skipped.
func StartStatus(w io.Writer, every time.Duration, status func() string) *Ticker {
	t := &Ticker{stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(t.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tick.C:
				if line := status(); line != "" {
					fmt.Fprintf(w, "%s (%s elapsed)\n", line, time.Since(start).Round(time.Second))
				}
			}
		}
	}()
	return t
}

// Stop ends the reports; nothing is written after it returns, so the
// caller may write to the same writer without a lock from then on. A nil
// ticker and a second Stop are no-ops.
func (t *Ticker) Stop() {
	if t == nil {
		return
	}
	t.once.Do(func() { close(t.stop) })
	<-t.done
}

// counter is done-of-total progress with an optional stage, read by a
// Ticker while the work updates it.
type counter struct {
	mu          sync.Mutex
	what, unit  string
	done, total int
	stage       string
	// follow, once set (a GPTQ run's work, quant.WorkProgress), gives the
	// share done and the time left instead of the count.
	follow *Follower
	// shown is the largest share shown, so that the percentage never
	// goes back when the estimate of the time left grows.
	shown float64
}

// line is the status line: "quantizing: 120/358 tensors, 34% (layer 4:
// solve w1/w3)", with an estimate of the time left once it means
// something. The share done is the count's, or, when the work is
// followed, the share of the run's estimated time that has passed: a GPTQ
// run's tensors differ in cost by orders of magnitude, the count stands
// still through a layer's forward and statistics, and each kind of work
// runs at its own speed (internal/eta).
func (c *counter) line(elapsed time.Duration) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total == 0 {
		if c.stage == "" {
			return c.what + ": starting"
		}
		return c.what + ": " + c.stage
	}
	share := float64(c.done) / float64(c.total)
	var left time.Duration
	known := false
	if c.follow != nil {
		now := c.follow.now()
		share = c.follow.est.Share(now)
		left, known = c.follow.est.Left(now)
	} else if share >= 0.1 && c.done < c.total {
		left, known = time.Duration(float64(elapsed)*(1-share)/share), true
	}
	share = max(share, c.shown)
	c.shown = share
	s := fmt.Sprintf("%s: %d/%d %s, %d%%", c.what, c.done, c.total, c.unit, int(100*share))
	if c.stage != "" {
		s += " (" + c.stage + ")"
	}
	if known {
		s += fmt.Sprintf(", about %s left", left.Round(time.Second))
	}
	return s
}

// Lines is quant.Progress (and its work and stage reports) off a
// terminal: one status line every interval, such as "quantizing: 120/358
// tensors, 34% (layer 4: solve w1/w3), about 2m10s left (1m0s elapsed)".
type Lines struct {
	c      counter
	w      io.Writer
	every  time.Duration
	start  time.Time
	ticker *Ticker
}

// NewLines starts the status lines of work that counts what it does in
// unit ("tensors"), named what ("quantizing"), on w every interval. The
// first line comes after one interval: short work prints nothing.
func NewLines(w io.Writer, what, unit string, every time.Duration) *Lines {
	p := &Lines{c: counter{what: what, unit: unit}, w: w, every: every, start: time.Now()}
	p.ticker = StartStatus(w, every, func() string { return p.c.line(time.Since(p.start)) })
	return p
}

// Start sets the total.
func (p *Lines) Start(total int) {
	p.c.mu.Lock()
	p.c.total = total
	p.c.mu.Unlock()
}

// Done counts one item.
func (p *Lines) Done(string) { p.Set(-1) }

// Set sets the count done (-1: one more).
func (p *Lines) Set(done int) {
	p.c.mu.Lock()
	if done < 0 {
		p.c.done++
	} else {
		p.c.done = done
	}
	p.c.mu.Unlock()
}

// StartWork starts following the run's work (quant.WorkProgress).
func (p *Lines) StartWork(total quant.WorkTotals) {
	f := NewFollower(time.Now, cputime.Process, os.Getenv(TraceEnv) != "")
	f.StartWork(total)
	p.c.mu.Lock()
	p.c.follow = f
	p.c.mu.Unlock()
}

// Work adds finished work of a kind.
func (p *Lines) Work(kind quant.WorkKind, done float64) {
	p.c.mu.Lock()
	f := p.c.follow
	p.c.mu.Unlock()
	if f != nil {
		f.Work(kind, done)
	}
}

// Follower is the run's Follower (nil before StartWork, or for work
// that is counted).
func (p *Lines) Follower() *Follower {
	if p == nil {
		return nil
	}
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.c.follow
}

// Warn writes a warning as a line of its own between the status lines.
func (p *Lines) Warn(msg string) { fmt.Fprintf(p.w, "warning: %s\n", msg) }

// Stage names what a GPTQ run does while no tensor completes.
func (p *Lines) Stage(layer int, stage string) {
	p.c.mu.Lock()
	p.c.stage = stageLine(layer, stage)
	p.c.mu.Unlock()
}

// Finish stops the reports. Call it as soon as the work returns, before
// the command writes its summary to the same stream: the ticker writes
// from its own goroutine. A nil Lines and a second Finish are no-ops.
func (p *Lines) Finish() {
	if p != nil {
		p.ticker.Stop()
	}
}

// stageLine is a GPTQ stage as the bar and the status lines show it:
// "layer 3: solve w2", or "head: …" for a negative layer (the LM head,
// which is no decoder layer).
func stageLine(layer int, stage string) string {
	if layer < 0 {
		return "head: " + stage
	}
	return fmt.Sprintf("layer %d: %s", layer, stage)
}

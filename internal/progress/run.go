package progress

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/lfmq/lfmq/quant"
)

// Quantize is the progress of a quantize run: a Bar where the stream is a
// terminal, else status Lines, and on success the work trace that
// TraceEnv asks for.
type Quantize struct {
	bar   *Bar
	lines *Lines
}

// NewQuantize starts the progress of a quantize run on w: a bar if tty
// (w is a terminal), else a status line every interval.
func NewQuantize(w io.Writer, tty bool, every time.Duration) *Quantize {
	if tty {
		return &Quantize{bar: NewBar(w)}
	}
	return &Quantize{lines: NewLines(w, "quantizing", "tensors", every)}
}

// Progress is what quant.Options.Progress takes.
func (q *Quantize) Progress() quant.Progress {
	if q.bar != nil {
		return q.bar
	}
	return q.lines
}

// Stop ends the reports without a word: nothing is written after it
// returns. For a deferred call on an early return; Finish says more.
func (q *Quantize) Stop() { q.lines.Finish() }

// Finish ends the reports as soon as the run returns, before the command
// writes its summary to the same stream: the status lines stop, and the
// bar is drawn full if the run completed, else left where it stopped.
// When the run completed and TraceEnv names a file, the work trace is
// written there; its error is the only one Finish returns.
func (q *Quantize) Finish(completed bool) error {
	q.lines.Finish()
	follow := q.lines.Follower()
	if q.bar != nil {
		q.bar.Finish(completed)
		follow = q.bar.Follower()
	}
	if path := os.Getenv(TraceEnv); path != "" && completed {
		return follow.WriteTrace(path)
	}
	return nil
}

// Count is done-of-total progress reported through a callback (such as
// score.Options.Progress): a bar that clears itself when done where the
// stream is a terminal, else a status line every interval.
type Count struct {
	w     io.Writer
	what  string
	bar   *progressbar.ProgressBar
	lines *Lines
}

// NewCount starts the progress of work named what ("scoring") that counts
// in unit ("tokens") on w: a bar if tty, else status lines every interval.
func NewCount(w io.Writer, tty bool, what, unit string, every time.Duration) *Count {
	c := &Count{w: w, what: what}
	if !tty {
		c.lines = NewLines(w, what, unit, every)
	}
	return c
}

// Report sets the count done of total. It is not safe for concurrent use.
func (c *Count) Report(done, total int) {
	if c.lines != nil {
		c.lines.Start(total)
		c.lines.Set(done)
		return
	}
	if c.bar == nil {
		c.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(c.w),
			progressbar.OptionSetDescription(c.what),
			progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
	}
	c.bar.Set(done)
}

// Finish ends the reports, before the command writes to the same stream.
// A second Finish is a no-op, so that a deferred one may follow.
func (c *Count) Finish() {
	c.lines.Finish()
	if c.bar != nil {
		c.bar.Finish()
		c.bar = nil
	}
}

// Status shows a status line whose text the caller keeps (line): beside
// a spinner that Update redraws where the stream is a terminal, else
// written every interval.
type Status struct {
	line   func() string
	bar    *progressbar.ProgressBar
	ticker *Ticker
}

// NewStatus starts showing line on w: a spinner if tty, else a status line
// every interval. line must be safe to call from another goroutine.
func NewStatus(w io.Writer, tty bool, every time.Duration, line func() string) *Status {
	s := &Status{line: line}
	if tty {
		s.bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSpinnerType(14),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(200*time.Millisecond))
	} else {
		s.ticker = StartStatus(w, every, line)
	}
	return s
}

// Update redraws the spinner's line after the text changed; off a terminal
// the next status line shows it.
func (s *Status) Update() {
	if s.bar != nil {
		s.bar.Describe(s.line())
	}
}

// Finish stops the reports (the spinner cleared), before the command
// writes to the same stream.
func (s *Status) Finish() {
	s.ticker.Stop()
	if s.bar != nil {
		s.bar.Finish()
	}
}

package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/lfmq/lfmq/internal/cputime"
	"github.com/lfmq/lfmq/quant"
)

// Bar is quant.Progress (and its work and stage reports) on a terminal:
// a progress bar of the tensors quantized, or, once the run tells its work
// (StartWork), of the share of its estimated time that has passed.
type Bar struct {
	w   io.Writer
	mu  sync.Mutex
	bar *progressbar.ProgressBar
	// follow, once set (StartWork), makes the bar a per-mille bar of the
	// run's estimated time (internal/eta) with the time left in its
	// description; steps is the position drawn.
	follow         *Follower
	steps          int
	stage          string
	tensors, total int
	// stop ends the goroutine that refreshes the time left while a long
	// item (the head's solve) reports nothing; it closes stopped.
	stop, stopped chan struct{}
}

// workSteps is the resolution of a bar that follows the work.
const workSteps = 1000

// barRefresh is how often a bar that follows the work redraws its time
// left between reports.
const barRefresh = time.Second

// NewBar returns a bar drawn on w, which should be a terminal: the bar
// redraws its line in place.
func NewBar(w io.Writer) *Bar { return &Bar{w: w} }

// Start draws the bar of total tensors.
func (p *Bar) Start(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription("quantizing"),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond),
		// The full bar stays, on its own line, above the summary.
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
	)
}

// Done counts one tensor.
func (p *Bar) Done(string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tensors++
	if p.bar != nil && p.follow == nil {
		p.bar.Add(1)
	}
}

// StartWork makes the bar follow the run's work (quant.WorkProgress): its
// position is the share of the run's estimated time that has passed, and
// its description gives the time left, estimated with each kind of work
// timed apart (the bar's own prediction, from its position's rate alone,
// is off).
func (p *Bar) StartWork(total quant.WorkTotals) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if total.Sum() <= 0 {
		return
	}
	p.follow = NewFollower(time.Now, cputime.Process, os.Getenv(TraceEnv) != "")
	p.follow.StartWork(total)
	p.bar = progressbar.NewOptions(workSteps,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription("quantizing"),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
	)
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	go func(stop, stopped chan struct{}) {
		defer close(stopped)
		tick := time.NewTicker(barRefresh)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				p.mu.Lock()
				p.redraw()
				p.mu.Unlock()
			}
		}
	}(p.stop, p.stopped)
}

// Work adds finished work and moves a bar that follows the work.
func (p *Bar) Work(kind quant.WorkKind, done float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.follow == nil {
		return
	}
	p.follow.Work(kind, done)
	p.redraw()
}

// Warn writes a warning on a line of its own above the bar, which is
// drawn again at its next update.
func (p *Bar) Warn(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Clear()
	}
	fmt.Fprintf(p.w, "warning: %s\n", msg)
}

// Stage shows what a GPTQ run is doing while no tensor completes.
func (p *Bar) Stage(layer int, stage string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stage = stageLine(layer, stage)
	p.redraw()
}

// redraw sets the bar's description and, when it follows the work, its
// position (never back). The caller holds p.mu.
func (p *Bar) redraw() {
	if p.bar == nil || p.stage == "" && p.follow == nil {
		return
	}
	if p.follow == nil {
		p.bar.Describe(p.stage)
		return
	}
	now := p.follow.now()
	desc := fmt.Sprintf("%d/%d tensors", p.tensors, p.total)
	if p.stage != "" {
		desc += ", " + p.stage
	}
	if left, ok := p.follow.est.Left(now); ok {
		desc += fmt.Sprintf(", about %s left", left.Round(time.Second))
	}
	p.bar.Describe(desc)
	if steps := int(workSteps * p.follow.est.Share(now)); steps > p.steps && steps < workSteps {
		p.bar.Add(steps - p.steps)
		p.steps = steps
	}
}

// Follower is the run's Follower (nil before StartWork).
func (p *Bar) Follower() *Follower {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.follow
}

// Finish ends the bar so that the summary starts on a clean line: a
// finished run's bar is drawn full first (the throttled bar may lag behind
// the last tensors), a failed one's is left where it stopped.
func (p *Bar) Finish(completed bool) {
	p.mu.Lock()
	stop, stopped := p.stop, p.stopped
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		<-stopped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.bar == nil:
	case completed:
		p.bar.Finish()
	default:
		p.bar.Exit()
	}
}

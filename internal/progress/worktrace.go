package progress

import (
	"bufio"
	"fmt"
	"sync"
	"time"

	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/internal/eta"
	"github.com/lfmq/lfmq/quant"
)

// TraceEnv names a file where quantize writes a trace of its GPTQ run's
// work reports with their times (see the format at workTrace), to time
// each kind of work and calibrate quant.WorkKind.Cost
// (scripts/bench-quantize.sh).
const TraceEnv = "LFMQ_WORK_TRACE"

// Follower is the part of quantize's progress that follows a GPTQ
// run's work (quant.WorkProgress): an estimate of the time left that times
// each kind of work apart, its prior for a kind not yet timed being the
// kind's quant.WorkKind.Cost and Family, and optionally a trace of the
// reports.
type Follower struct {
	now   func() time.Time
	est   *eta.Estimator
	trace *workTrace // nil unless the trace was asked for
}

// NewFollower returns a follower on the clock now and the process CPU
// clock cpu (nil, or one that reads 0, where the platform has none: the
// estimate then times the kinds on the wall clock), with a trace if trace
// is set.
func NewFollower(now func() time.Time, cpu func() time.Duration, trace bool) *Follower {
	priors, families := make([]float64, quant.NumWorkKinds), make([]int, quant.NumWorkKinds)
	for k := range quant.NumWorkKinds {
		priors[k], families[k] = k.Cost(), k.Family()
	}
	if cpu != nil && cpu() <= 0 {
		cpu = nil // a process that has run has used some CPU time
	}
	f := &Follower{now: now, est: eta.New(priors, families)}
	f.est.SetCPUClock(cpu)
	if trace {
		f.trace = &workTrace{cpu: cpu}
	}
	return f
}

// StartWork starts the estimate (and the trace) with the run's work of
// each kind.
func (f *Follower) StartWork(total quant.WorkTotals) {
	now := f.now()
	f.est.Start(now, total[:])
	if f.trace != nil {
		f.trace.start(now, total)
	}
}

// Work adds finished work of a kind.
func (f *Follower) Work(kind quant.WorkKind, done float64) {
	now := f.now()
	f.est.Add(now, int(kind), done)
	if f.trace != nil {
		f.trace.add(now, kind, done)
	}
}

// WriteTrace writes the trace, if there is one, to path, ending at the
// time of the call. A nil Follower writes nothing.
func (f *Follower) WriteTrace(path string) error {
	if f == nil || f.trace == nil {
		return nil
	}
	return f.trace.writeFile(path, f.now())
}

// workTrace records a run's announced work and each report's time, on the
// wall clock and in the process's CPU time (which other work on a shared
// machine disturbs much less, so that the kinds' costs can be compared
// across runs in it). Its file is text, one record a line, fields
// separated by tabs, times in seconds since StartWork:
//
//	lfmq-work-trace	VERSION
//	kind	INDEX	NAME	TOTAL             (one per kind)
//	work	SECONDS	INDEX	AMOUNT	CPU_SECONDS (one per report)
//	end	SECONDS	CPU_SECONDS
//
// CPU_SECONDS is absent where the platform has no CPU clock, and in some
// version 1 traces, written before it was added. VERSION is the counting
// of the work: 2 since the statistics forwards stop inside their last
// layer and the dense statistics weigh a forward operation by
// quant's denseForwardPerStat (0.6); 1 before, when the forwards counted
// their last layer whole and every forward operation 0.16 of an update.
// The record format is the same.
type workTrace struct {
	mu     sync.Mutex
	cpu    func() time.Duration // the process's CPU time; nil: none
	t0     time.Time
	cpu0   time.Duration
	totals quant.WorkTotals
	events []workEvent
}

// TraceVersion is the version of the traces written (see workTrace).
const TraceVersion = 2

type workEvent struct {
	at   time.Duration
	kind quant.WorkKind
	work float64
	cpu  time.Duration // -1: unknown
}

// cpuNow is the CPU time since the start, or -1 without a CPU clock.
func (t *workTrace) cpuNow() time.Duration {
	if t.cpu == nil {
		return -1
	}
	return t.cpu() - t.cpu0
}

func (t *workTrace) start(now time.Time, total quant.WorkTotals) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t0, t.totals, t.events = now, total, nil
	if t.cpu != nil {
		t.cpu0 = t.cpu()
	}
}

func (t *workTrace) add(now time.Time, kind quant.WorkKind, done float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, workEvent{now.Sub(t.t0), kind, done, t.cpuNow()})
}

// cpuField is a CPU time as a trace field (tab first), or nothing.
func cpuField(d time.Duration) string {
	if d < 0 {
		return ""
	}
	return fmt.Sprintf("\t%.3f", d.Seconds())
}

// writeFile writes the trace to path (a temporary name, synced, renamed).
func (t *workTrace) writeFile(path string, end time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := durable.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", TraceEnv, err)
	}
	defer f.Abort()
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "lfmq-work-trace\t%d\n", TraceVersion)
	for k := range quant.NumWorkKinds {
		fmt.Fprintf(w, "kind\t%d\t%s\t%.17g\n", int(k), k, t.totals[k])
	}
	for _, e := range t.events {
		fmt.Fprintf(w, "work\t%.3f\t%d\t%.17g%s\n", e.at.Seconds(), int(e.kind), e.work, cpuField(e.cpu))
	}
	fmt.Fprintf(w, "end\t%.3f%s\n", end.Sub(t.t0).Seconds(), cpuField(t.cpuNow()))
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%s: %w", TraceEnv, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("%s: %w", TraceEnv, err)
	}
	return nil
}

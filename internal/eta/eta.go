// Package eta estimates the time left of a long run whose work comes in
// kinds that run at different speeds (a quantization's forwards,
// statistics and solves), from the run's own timing of each kind.
//
// The run announces its work of each kind in the kind's own units (for
// example floating-point operations), reports work as it finishes, and
// asks for the time left. Each kind is timed on a work clock: the
// process's CPU time when the run gives the Estimator one (SetCPUClock),
// else the wall clock. On a shared machine the CPU time an item takes
// barely moves with the load, where its wall time moves with it by
// several times; the load is then one rate, the CPU time the run gets per
// second of wall time, measured over the last RateWindow. The estimate is
// the remaining work of each kind times the kind's time per unit, less
// the work-clock time since the last report, divided by that rate.
//
// A kind's time per unit is learned from the time the run spent on it: the
// time between one report and the previous one (of any kind) is the
// reported kind's, since a run does one kind at a time. Until a kind has
// been timed, its time per unit is its prior cost (relative to the other
// kinds', which a caller calibrates and documents) times the measured time
// per unit of prior cost of its family (kinds that share an
// implementation, so that a change in its speed moves them together) or,
// before any of the family has run, of the run so far. Once timed, a
// kind's time per unit is its mean over all its items, so that one slow
// item among many moves it by its share, with the prior weighing in as
// one more item until the kind's own timing takes over, so that a slow or
// fast first item does not swing it.
package eta

import (
	"math"
	"sort"
	"sync"
	"time"
)

// priorItems is how many items of a kind's mean size its prior counts as,
// done at the prior's time per unit: after a kind's first item its own
// timing and the prior weigh the same, after nine items the timing weighs
// nine times more.
const priorItems = 1

// ownFrom is the report from which a kind whose family has been timed is
// priced by its own timing (before it, by its family's): items of a kind
// run side by side on several workers end at nearly the same time, and
// the first to report carries the time they all shared, so that alone it
// can make the kind look twice as dear as it is.
const ownFrom = 2

// MinShare is the share of the run's estimated time that must have passed
// before Left gives an estimate: before it, the estimate rests on too
// little timing (often only the first kind's first items, and priors for
// the rest) to be shown. An early estimate that is too high keeps itself
// hidden longer, one too low shows sooner; on the recorded runs the
// estimates before a tenth of the run were off by up to 1.8×.
const MinShare = 0.1

// RateWindow is how far back the rate of CPU time per wall second is
// measured (the whole run while it is shorter): long enough that one
// item's pause for memory or a moment's burst of other work on the machine
// does not swing the estimate, short enough to follow a load that has
// changed for minutes.
const RateWindow = time.Minute

// Estimator estimates the time left. It is safe for concurrent use. The
// zero value is not usable; call New.
type Estimator struct {
	mu      sync.Mutex
	kinds   []kind
	cpu     func() time.Duration // the work clock; nil: the wall clock
	started bool
	start   time.Time
	last    sample   // the last report (or the start)
	history []sample // every report's, from the start, for the rate
}

// sample is a moment on both clocks: the wall time since the start and
// the work clock's reading.
type sample struct {
	wall, work time.Duration
}

// kind is one kind's work and timing.
type kind struct {
	prior       float64 // relative time per unit before any timing
	total, done float64
	items       int           // reports
	spent       time.Duration // on the work clock
	family      int
}

// New returns an Estimator for kinds with the given prior costs (time per
// unit of work, relative to each other; each positive) and families: the
// kinds of a family share an implementation (a solver, a forward), so that
// a change in its speed moves them together. A kind not yet timed takes its
// family's measured time per unit of prior cost, or, before any of its
// family has been timed, the whole run's. families may be nil (one family)
// or shorter than priors (the rest one family each).
func New(priors []float64, families []int) *Estimator {
	e := &Estimator{kinds: make([]kind, len(priors))}
	for i, p := range priors {
		if !(p > 0) || math.IsInf(p, 0) {
			p = 1 // a prior must be a positive cost
		}
		e.kinds[i].prior = p
		e.kinds[i].family = 0
		if families != nil {
			e.kinds[i].family = -1 - i
			if i < len(families) {
				e.kinds[i].family = families[i]
			}
		}
	}
	return e
}

// SetCPUClock makes the Estimator time the kinds in CPU time, read from
// cpu (the process's, since any fixed origin; it must not go back), and
// turn the CPU time left into wall time at the rate of the last
// RateWindow. Call it before Start; a nil cpu means the wall clock.
func (e *Estimator) SetCPUClock(cpu func() time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cpu = cpu
}

// at is now on both clocks.
func (e *Estimator) at(now time.Time) sample {
	wall := now.Sub(e.start)
	if e.cpu == nil {
		return sample{wall, wall}
	}
	return sample{wall, e.cpu()}
}

// Start begins the run at now with its total work of each kind (zero for a
// kind it does not do). Reports before Start are ignored.
func (e *Estimator) Start(now time.Time, totals []float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.kinds {
		e.kinds[i].total, e.kinds[i].done, e.kinds[i].items, e.kinds[i].spent = 0, 0, 0, 0
		if i < len(totals) && totals[i] > 0 {
			e.kinds[i].total = totals[i]
		}
	}
	e.started, e.start = true, now
	e.last = e.at(now)
	e.history = append(e.history[:0], e.last)
}

// Add reports work of kind k finished at now; the work-clock time since the
// previous report is k's. A report of an unknown kind, of no work, or from
// before the previous one adds no time.
func (e *Estimator) Add(now time.Time, k int, work float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started || k < 0 || k >= len(e.kinds) || !(work > 0) {
		return
	}
	if s := e.at(now); s.wall > e.last.wall {
		if d := s.work - e.last.work; d > 0 {
			e.kinds[k].spent += d
		}
		e.last = s
		e.history = append(e.history, s)
	}
	e.kinds[k].done += work
	e.kinds[k].items++
}

// rate is the work-clock time per wall second over the last RateWindow
// before s (1 on the wall clock), or false when it cannot be measured yet.
func (e *Estimator) rate(s sample) (float64, bool) {
	if e.cpu == nil {
		return 1, true
	}
	from := s.wall - RateWindow
	if from <= 0 {
		if s.wall <= 0 || s.work <= e.history[0].work {
			return 0, false
		}
		return float64(s.work-e.history[0].work) / float64(s.wall), true
	}
	// The work clock at from, between the reports around it (the
	// rate between two reports taken as even).
	i := sort.Search(len(e.history), func(i int) bool { return e.history[i].wall > from })
	var then float64
	switch {
	case i == len(e.history):
		a := e.history[i-1]
		then = float64(a.work) + float64(s.work-a.work)*float64(from-a.wall)/float64(s.wall-a.wall)
	default:
		a, b := e.history[i-1], e.history[i]
		then = float64(a.work) + float64(b.work-a.work)*float64(from-a.wall)/float64(b.wall-a.wall)
	}
	r := (float64(s.work) - then) / float64(RateWindow)
	return r, r > 0
}

// Left returns the estimated time left at now, and whether it is meaningful
// yet: false until MinShare of the estimated run has passed, and once all
// the work is done.
func (e *Estimator) Left(now time.Time) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	left, elapsed, ok := e.left(now)
	if !ok || elapsed+left <= 0 || float64(elapsed) < MinShare*float64(elapsed+left) {
		return 0, false
	}
	return left, true
}

// WorkLeft returns the estimated time the rest of the work takes on the
// work clock (the CPU time with SetCPUClock), without the MinShare rule:
// false before any timing and once all the work is done. Unlike Left it
// does not move with the machine's load.
func (e *Estimator) WorkLeft(now time.Time) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started || !e.remaining() {
		return 0, false
	}
	rest, ok := e.workLeft(e.at(now))
	return time.Duration(rest), ok
}

// Share returns the estimated share of the run's time that has passed at
// now (0 before Start or before any timing, 1 once the work is done).
func (e *Estimator) Share(now time.Time) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	left, elapsed, ok := e.left(now)
	switch {
	case !e.started:
		return 0
	case !ok && e.remaining():
		return 0
	case !ok || elapsed+left <= 0:
		return 1
	}
	return float64(elapsed) / float64(elapsed+left)
}

// remaining reports whether any work is left.
func (e *Estimator) remaining() bool {
	for _, k := range e.kinds {
		if k.done < k.total {
			return true
		}
	}
	return false
}

// left is Left without the MinShare rule: ok is false before any timing
// and once no work remains. The work-clock time since the last report is
// taken off, as the part of the next item already done (never below zero:
// an item that runs longer than estimated leaves the estimate at the
// rest), and the rest is turned into wall time at the recent rate.
func (e *Estimator) left(now time.Time) (left, elapsed time.Duration, ok bool) {
	if !e.started || !e.remaining() {
		return 0, 0, false
	}
	s := e.at(now)
	rest, ok := e.workLeft(s)
	if !ok {
		return 0, 0, false
	}
	rate, ok := e.rate(s)
	if !ok {
		return 0, 0, false
	}
	return time.Duration(rest / rate), s.wall, true
}

// workLeft is the work-clock time left at s, in nanoseconds: the remaining
// work of each kind at its time per unit, less the time since the last
// report (never below zero).
func (e *Estimator) workLeft(s sample) (float64, bool) {
	perUnit, ok := e.perUnit()
	if !ok {
		return 0, false
	}
	var rest float64
	for i, k := range e.kinds {
		if k.done < k.total {
			rest += (k.total - k.done) * perUnit[i]
		}
	}
	return max(rest-float64(s.work-e.last.work), 0), true
}

// perUnit returns each kind's estimated time per unit of work, in
// nanoseconds; ok is false before any kind has been timed.
//
// A kind not yet timed takes its prior scaled by its family's timing (time
// spent per unit of prior cost done), or the whole run's when none of its
// family has been timed. A timed kind's is its mean over its items, with
// its prior counted as priorItems more items of its mean size, scaled by
// the timing of the other kinds of its family or, when none has been
// timed, of every other kind: not by the kind's own, which would make the
// prior agree with whatever the first item did.
func (e *Estimator) perUnit() ([]float64, bool) {
	// raw is the timing of each family and of the whole run: time spent
	// against work done at the prior's cost.
	type timing struct{ spent, prior float64 }
	raw := map[int]timing{}
	var all timing
	for _, k := range e.kinds {
		if k.done > 0 {
			f := raw[k.family]
			f.spent += float64(k.spent)
			f.prior += k.done * k.prior
			raw[k.family] = f
			all.spent += float64(k.spent)
			all.prior += k.done * k.prior
		}
	}
	if all.spent <= 0 || all.prior <= 0 {
		return nil, false
	}
	perUnit := make([]float64, len(e.kinds))
	for i, k := range e.kinds {
		if k.done <= 0 {
			scale, ok := raw[k.family]
			if !ok {
				scale = all
			}
			perUnit[i] = k.prior * scale.spent / scale.prior
			continue
		}
		perUnit[i] = float64(k.spent) / k.done
		others := raw[k.family]
		others.spent -= float64(k.spent)
		others.prior -= k.done * k.prior
		if k.items < ownFrom && others.spent > 0 && others.prior > 0 {
			perUnit[i] = k.prior * others.spent / others.prior
			continue
		}
		if others.spent <= 0 || others.prior <= 0 {
			others = timing{all.spent - float64(k.spent), all.prior - k.done*k.prior}
		}
		if others.spent > 0 && others.prior > 0 && k.items > 0 {
			pseudo := priorItems * k.done / float64(k.items)
			perUnit[i] = (float64(k.spent) + pseudo*k.prior*others.spent/others.prior) / (k.done + pseudo)
		}
	}
	return perUnit, true
}

// Package eta estimates the time left of a long run whose work comes in
// kinds that run at different speeds (a quantization's forwards,
// statistics and solves), from the run's own timing of each kind.
//
// The run announces its work of each kind in the kind's own units (for
// example floating-point operations), reports work as it finishes, and
// asks for the time left. The estimate is the remaining work of each kind
// times the kind's time per unit, less the time since the last report. A
// kind's time per unit is learned from the time the run spent on it: the
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
	"sync"
	"time"
)

// priorItems is how many items of a kind's mean size its prior counts as,
// done at the prior's time per unit: after a kind's first item its own
// timing and the prior weigh the same, after nine items the timing weighs
// nine times more.
const priorItems = 1

// MinShare is the share of the run's estimated time that must have passed
// before Left gives an estimate: before it, the estimate rests on too
// little timing (often only the first kind's first items, and priors for
// the rest) to be shown. An early estimate that is too high keeps itself
// hidden longer, one too low shows sooner; on the recorded runs the
// estimates before a tenth of the run were off by up to 1.8×.
const MinShare = 0.1

// Estimator estimates the time left. It is safe for concurrent use. The
// zero value is not usable; call New.
type Estimator struct {
	mu      sync.Mutex
	kinds   []kind
	started bool
	start   time.Time
	last    time.Time // the last report (or the start)
}

// kind is one kind's work and timing.
type kind struct {
	prior       float64 // relative time per unit before any timing
	total, done float64
	items       int // reports
	spent       time.Duration
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
	e.started, e.start, e.last = true, now, now
}

// Add reports work of kind k finished at now; the time since the previous
// report is k's. A report of an unknown kind, of no work, or from before
// the previous one adds no time.
func (e *Estimator) Add(now time.Time, k int, work float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started || k < 0 || k >= len(e.kinds) || !(work > 0) {
		return
	}
	if d := now.Sub(e.last); d > 0 {
		e.kinds[k].spent += d
		e.last = now
	}
	e.kinds[k].done += work
	e.kinds[k].items++
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
// and once no work remains. The time since the last report is taken off,
// as the part of the next item already done (never below zero: an item
// that runs longer than estimated leaves the estimate at the rest).
func (e *Estimator) left(now time.Time) (left, elapsed time.Duration, ok bool) {
	if !e.started || !e.remaining() {
		return 0, 0, false
	}
	perUnit, ok := e.perUnit()
	if !ok {
		return 0, 0, false
	}
	var rest float64
	for i, k := range e.kinds {
		if k.done < k.total {
			rest += (k.total - k.done) * perUnit[i]
		}
	}
	rest -= float64(now.Sub(e.last))
	return time.Duration(max(rest, 0)), now.Sub(e.start), true
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

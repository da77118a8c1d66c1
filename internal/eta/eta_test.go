package eta

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// phase is one stretch of a synthetic run: items of one kind, each of
// work units that take perUnit each (times jitter, if any).
type phase struct {
	kind    int
	items   int
	work    float64       // per item
	perUnit time.Duration // the true time per unit of work
}

// schedule is a synthetic run: its phases in order, and how much each
// item's time varies (0: not at all; 0.5: ×[0.5, 1.5], drawn from a fixed
// seed).
type schedule struct {
	phases []phase
	jitter float64
}

// report is one item's end in a schedule.
type report struct {
	at   time.Duration
	kind int
	work float64
}

// run lays the schedule out in time, with the kinds' totals.
func (s schedule) run(kinds int) (reports []report, totals []float64, end time.Duration) {
	rng := rand.New(rand.NewPCG(1, 2))
	totals = make([]float64, kinds)
	for _, p := range s.phases {
		for range p.items {
			d := float64(p.perUnit) * p.work
			if s.jitter > 0 {
				d *= 1 + s.jitter*(2*rng.Float64()-1)
			}
			end += time.Duration(d)
			reports = append(reports, report{end, p.kind, p.work})
			totals[p.kind] += p.work
		}
	}
	return reports, totals, end
}

// ratios drives an Estimator through a schedule with a fake clock, asking
// for the time left every step, and returns the ratio of the estimate to
// the true time left at each time between from and to (shares of the run)
// where the estimate is shown, and the share of the run at which the
// first estimate was shown.
func ratios(t *testing.T, s schedule, priors []float64, families []int, from, to float64) (lo, hi, first float64) {
	t.Helper()
	reports, totals, end := s.run(len(priors))
	e := New(priors, families)
	t0 := time.Unix(1000, 0)
	e.Start(t0, totals)
	lo, hi, first = math.Inf(1), math.Inf(-1), -1
	step := end / 1000
	next := 0
	for at := step; at < end; at += step {
		for next < len(reports) && reports[next].at <= at {
			e.Add(t0.Add(reports[next].at), reports[next].kind, reports[next].work)
			next++
		}
		left, ok := e.Left(t0.Add(at))
		if !ok {
			continue
		}
		if first < 0 {
			first = float64(at) / float64(end)
		}
		if share := float64(at) / float64(end); share >= from && share <= to {
			r := float64(left) / float64(end-at)
			lo, hi = min(lo, r), max(hi, r)
			if testing.Verbose() && (r > 1.2 || r < 0.8) {
				t.Logf("at %.1f%%: %.3f", 100*share, r)
			}
		}
	}
	if first < 0 {
		t.Fatal("no estimate was ever shown")
	}
	return lo, hi, first
}

// layers repeats the phases of one layer n times, after a prologue.
func layers(n int, prologue []phase, layer []phase, epilogue []phase) []phase {
	out := append([]phase(nil), prologue...)
	for range n {
		out = append(out, layer...)
	}
	return append(out, epilogue...)
}

// A run shaped like a GPTQ quantization's: a dense pass whose statistics
// are cheap per unit and whose solves are dear, then layers of a forward,
// statistics and many solves, then a head solved as one long item. Kinds:
// 0 forward, 1 statistics, 2 solves, 3 the dense statistics, 4 the dense
// solves, 5 the head.
var (
	prologue = []phase{{3, 1, 100, 100 * time.Millisecond}, {4, 4, 10, time.Second}}
	layer    = []phase{{0, 8, 20, 50 * time.Millisecond}, {1, 32, 1, 300 * time.Millisecond}, {2, 32, 1, time.Second}}
	epilogue = []phase{{5, 1, 30, 800 * time.Millisecond}}
)

// truePriors are the schedule's own times per unit; families groups the
// forwards (0, 3), the statistics (1) and the solves (2, 4, 5).
var (
	truePriors = []float64{0.05, 0.3, 1, 0.1, 1, 0.8}
	families   = []int{0, 1, 2, 0, 2, 2}
)

// TestEstimateWithinBand: with priors that are right, the estimate is
// within ±25 % of the time left from the first one shown (10 % of the
// run and on, as scripts/bench-quantize.sh judges it) whatever the
// machine's speed, even with every item's time off by up to ±50 %; with
// the kinds' relative speeds changed (one kind twice as fast as its
// prior, another twice as slow, as when one part of the code is made
// faster), the band holds too; and with the priors right the estimate is
// first shown at MinShare of the run.
func TestEstimateWithinBand(t *testing.T) {
	scaled := func(f float64) []float64 {
		p := make([]float64, len(truePriors))
		for i, v := range truePriors {
			p[i] = v * f
		}
		return p
	}
	// The solver twice as fast as the priors say, the statistics twice
	// as slow.
	changed := append([]float64(nil), truePriors...)
	changed[1], changed[2], changed[4], changed[5] = changed[1]/2, changed[2]*2, changed[4]*2, changed[5]*2
	tests := []struct {
		name     string
		s        schedule
		priors   []float64
		from, to float64
		band     float64
	}{
		{"exact", schedule{phases: layers(4, prologue, layer, epilogue)}, truePriors, 0.1, 0.9, 0.01},
		{"machine 3× slower than the priors' units", schedule{phases: layers(4, prologue, layer, epilogue)}, scaled(1.0 / 3), 0.1, 0.9, 0.01},
		{"items ±30 %", schedule{phases: layers(4, prologue, layer, epilogue), jitter: 0.3}, truePriors, 0.1, 0.9, 0.25},
		{"the solver faster, the statistics slower", schedule{phases: layers(4, prologue, layer, epilogue)}, changed, 0.1, 0.9, 0.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi, first := ratios(t, tt.s, tt.priors, families, tt.from, tt.to)
			t.Logf("estimate/actual %.3f–%.3f over %.0f–%.0f %% of the run; first shown at %.1f %%", lo, hi, 100*tt.from, 100*tt.to, 100*first)
			if lo < 1-tt.band || hi > 1+tt.band {
				t.Errorf("estimate/actual %.3f–%.3f, want within %.2f–%.2f", lo, hi, 1-tt.band, 1+tt.band)
			}
			// With the priors right, the first estimate is shown at
			// MinShare of the run (an estimate that is off moves it).
			if tt.band < 0.05 && math.Abs(first-MinShare) > 0.002 {
				t.Errorf("the first estimate was shown at %.1f %% of the run, not at MinShare", 100*first)
			}
		})
	}
}

// TestOneSlowItem: an item three times slower than the twenty before it
// moves the estimate by its share of the kind's time (under 15 %), not by
// its own speed.
func TestOneSlowItem(t *testing.T) {
	e := New([]float64{1}, nil)
	t0 := time.Unix(0, 0)
	e.Start(t0, []float64{100})
	at := t0
	for range 20 {
		at = at.Add(time.Second)
		e.Add(at, 0, 1)
	}
	before, _ := e.Left(at)
	at = at.Add(3 * time.Second)
	e.Add(at, 0, 1)
	after, _ := e.Left(at)
	if d := after - before; d <= 0 || float64(d) > 0.15*float64(before) {
		t.Errorf("one slow item moved the estimate from %v to %v", before, after)
	}
}

// TestUnseenKindsCount: work of kinds not yet timed is in the estimate, at
// its prior cost times the run's measured speed; work done is not.
func TestUnseenKindsCount(t *testing.T) {
	e := New([]float64{1, 4, 0.5}, nil)
	t0 := time.Unix(0, 0)
	e.Start(t0, []float64{10, 10, 10})
	// Kind 0 fully done at 1 s per unit: 10 s. Kinds 1 and 2 unseen:
	// 10×4 s and 10×0.5 s.
	e.Add(t0.Add(10*time.Second), 0, 10)
	left, ok := e.Left(t0.Add(10 * time.Second))
	if want := 45 * time.Second; !ok || left != want {
		t.Errorf("left %v (shown %v), want %v", left, ok, want)
	}
	// The time since the last report is part of the next item.
	if left, _ := e.Left(t0.Add(15 * time.Second)); left != 40*time.Second {
		t.Errorf("5 s later: left %v, want 40s", left)
	}
	if s := e.Share(t0.Add(10 * time.Second)); math.Abs(s-10.0/55) > 1e-9 {
		t.Errorf("share %v, want %v", s, 10.0/55)
	}
	// A kind's first report carries the time since the last one.
	e.Add(t0.Add(30*time.Second), 2, 10)
	left, _ = e.Left(t0.Add(30 * time.Second))
	// Kind 2 took 20 s for 10 units (2 s per unit against its prior's
	// 0.5): the run's scale is now 30 s/(10×1 + 10×0.5) = 2 s per unit
	// of prior, so kind 1 is 10 × 4 × 2 = 80 s.
	if want := 80 * time.Second; left != want {
		t.Errorf("after kind 2: left %v, want %v", left, want)
	}
}

// TestNotStarted: before Start, with nothing timed, and once all is done,
// no estimate is given; reports of unknown kinds, of no work or before
// Start change nothing.
func TestNotStarted(t *testing.T) {
	e := New([]float64{1}, nil)
	t0 := time.Unix(0, 0)
	e.Add(t0, 0, 1)
	if _, ok := e.Left(t0); ok || e.Share(t0) != 0 {
		t.Error("an estimate before Start")
	}
	e.Start(t0, []float64{2})
	e.Add(t0.Add(time.Second), 5, 1)
	e.Add(t0.Add(time.Second), -1, 1)
	e.Add(t0.Add(time.Second), 0, 0)
	e.Add(t0.Add(time.Second), 0, math.NaN())
	if _, ok := e.Left(t0.Add(time.Second)); ok {
		t.Error("an estimate with nothing timed")
	}
	e.Add(t0.Add(time.Second), 0, 1)
	if left, ok := e.Left(t0.Add(time.Second)); !ok || left != time.Second {
		t.Errorf("half done at 1 s: left %v, %v", left, ok)
	}
	e.Add(t0.Add(2*time.Second), 0, 1)
	if _, ok := e.Left(t0.Add(2 * time.Second)); ok || e.Share(t0.Add(2*time.Second)) != 1 {
		t.Error("an estimate once all the work is done")
	}
}

// TestBadPriors: a prior that is not a positive cost counts as 1, so that
// no estimate is infinite or NaN.
func TestBadPriors(t *testing.T) {
	e := New([]float64{0, -1, math.NaN(), math.Inf(1)}, []int{0, 1, 2, 3})
	t0 := time.Unix(0, 0)
	e.Start(t0, []float64{1, 1, 1, 1})
	e.Add(t0.Add(time.Second), 0, 1)
	left, ok := e.Left(t0.Add(time.Second))
	if !ok || left != 3*time.Second {
		t.Errorf("left %v (%v), want 3s", left, ok)
	}
}

// TestCPUClockFollowsLoad: a run timed on a CPU clock whose kinds cost what
// their priors say in CPU time, on a machine that gives it 1.8 CPU seconds
// per second for 40 % of its work and then, loaded by other work, 0.6:
// the CPU time left is estimated within 1 % throughout, and the time left
// within ±25 % once RateWindow has passed since the load changed (before
// it, nothing in the run's past foretells the change), however far the
// wall time per unit has moved. On the wall clock alone the same run's
// estimate stays about half the time left after the change.
func TestCPUClockFollowsLoad(t *testing.T) {
	reports, totals, _ := schedule{phases: layers(8, prologue, layer, epilogue)}.run(len(truePriors))
	cpuEnd := reports[len(reports)-1].at
	change := time.Duration(0.4 * float64(cpuEnd)) // on the CPU clock
	wallOf := func(cpu time.Duration) time.Duration {
		if cpu <= change {
			return time.Duration(float64(cpu) / 1.8)
		}
		return time.Duration(float64(change)/1.8 + float64(cpu-change)/0.6)
	}
	end, changeWall := wallOf(cpuEnd), wallOf(change)
	for _, clock := range []string{"cpu", "wall"} {
		e := New(truePriors, families)
		var cpuNow time.Duration
		if clock == "cpu" {
			e.SetCPUClock(func() time.Duration { return 5*time.Second + cpuNow })
		}
		t0 := time.Unix(1000, 0)
		e.Start(t0, totals)
		next := 0
		var lo, hi, workLo, workHi float64 = math.Inf(1), 0, math.Inf(1), 0
		for at := end / 1000; at < end; at += end / 1000 {
			for next < len(reports) && wallOf(reports[next].at) <= at {
				cpuNow = reports[next].at
				e.Add(t0.Add(wallOf(cpuNow)), reports[next].kind, reports[next].work)
				next++
			}
			// The CPU clock between reports, where the rate is even.
			cpuNow = reports[max(next-1, 0)].at
			if next == 0 {
				cpuNow = 0
			}
			if next < len(reports) {
				prevWall := time.Duration(0)
				if next > 0 {
					prevWall = wallOf(reports[next-1].at)
				}
				nextWall := wallOf(reports[next].at)
				cpuNow += time.Duration(float64(reports[next].at-cpuNow) * float64(at-prevWall) / float64(nextWall-prevWall))
			}
			left, ok := e.Left(t0.Add(at))
			if !ok || float64(at) < 0.1*float64(end) || float64(at) > 0.9*float64(end) {
				continue
			}
			if clock == "cpu" {
				w, _ := e.WorkLeft(t0.Add(at))
				r := float64(w) / float64(cpuEnd-cpuNow)
				workLo, workHi = min(workLo, r), max(workHi, r)
			}
			if at >= changeWall+RateWindow {
				r := float64(left) / float64(end-at)
				lo, hi = min(lo, r), max(hi, r)
			}
		}
		t.Logf("%s clock: time left estimate/actual %.3f–%.3f (from %v after the change)", clock, lo, hi, RateWindow)
		if clock == "cpu" {
			t.Logf("CPU time left estimate/actual %.3f–%.3f", workLo, workHi)
		}
		switch {
		case clock == "cpu" && (workLo < 0.99 || workHi > 1.01):
			t.Errorf("CPU time left estimated at %.3f–%.3f of the actual", workLo, workHi)
		case clock == "cpu" && (lo < 0.75 || hi > 1.25):
			t.Errorf("time left estimated at %.3f–%.3f of the actual, want within ±25 %%", lo, hi)
		case clock == "wall" && lo > 0.75 && hi < 1.25:
			t.Errorf("on the wall clock the estimate stayed within %.3f–%.3f: the load change tests nothing", lo, hi)
		}
	}
}

package progress

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfmq/lfmq/internal/eta"
	"github.com/lfmq/lfmq/quant"
)

// recordedTrace is a work trace read back (the format of workTrace).
type recordedTrace struct {
	version     int
	totals      quant.WorkTotals
	events      []workEvent
	end, endCPU time.Duration // endCPU -1: unknown
}

// readTrace reads a work trace written by workTrace.writeFile.
func readTrace(path string) (*recordedTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := &recordedTrace{}
	sc := bufio.NewScanner(f)
	secs := func(s string) (time.Duration, error) {
		v, err := strconv.ParseFloat(s, 64)
		return time.Duration(v * float64(time.Second)), err
	}
	kind := func(s string) (quant.WorkKind, error) {
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 || k >= int(quant.NumWorkKinds) {
			return 0, fmt.Errorf("kind %q", s)
		}
		return quant.WorkKind(k), nil
	}
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(sc.Text(), "\t")
		var err error
		switch {
		case n == 1:
			if len(f) != 2 || f[0] != "lfmq-work-trace" {
				err = fmt.Errorf("not a work trace")
			} else if tr.version, err = strconv.Atoi(f[1]); err == nil && (tr.version < 1 || tr.version > TraceVersion) {
				err = fmt.Errorf("work trace version %d", tr.version)
			}
		case f[0] == "kind" && len(f) == 4:
			var k quant.WorkKind
			if k, err = kind(f[1]); err == nil && f[2] != k.String() {
				err = fmt.Errorf("kind %d is %q, want %q", k, f[2], k)
			}
			if err == nil {
				tr.totals[k], err = strconv.ParseFloat(f[3], 64)
			}
		case f[0] == "work" && (len(f) == 4 || len(f) == 5):
			e := workEvent{cpu: -1}
			if e.at, err = secs(f[1]); err == nil {
				if e.kind, err = kind(f[2]); err == nil {
					e.work, err = strconv.ParseFloat(f[3], 64)
				}
			}
			if err == nil && len(f) == 5 {
				e.cpu, err = secs(f[4])
			}
			tr.events = append(tr.events, e)
		case f[0] == "end" && (len(f) == 2 || len(f) == 3):
			tr.endCPU = -1
			if tr.end, err = secs(f[1]); err == nil && len(f) == 3 {
				tr.endCPU, err = secs(f[2])
			}
		default:
			err = fmt.Errorf("unexpected record")
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return tr, sc.Err()
}

// TestWorkTraceRoundTrip: a trace written by quantize reads back as it was
// recorded.
func TestWorkTraceRoundTrip(t *testing.T) {
	clock := &fakeClock{t: time.Unix(100, 0)}
	f := NewFollower(clock.now, nil, true)
	cpu := 7 * time.Second
	f.trace.cpu = func() time.Duration { cpu += 250 * time.Millisecond; return cpu }
	var total quant.WorkTotals
	total[quant.WorkForward], total[quant.WorkHeadSolve] = 10, 2.5e12
	f.StartWork(total)
	clock.t = clock.t.Add(1500 * time.Millisecond)
	f.Work(quant.WorkForward, 10)
	clock.t = clock.t.Add(time.Minute)
	f.Work(quant.WorkHeadSolve, 2.5e12)
	clock.t = clock.t.Add(time.Second)
	path := filepath.Join(t.TempDir(), "run.trace")
	if err := f.WriteTrace(path); err != nil {
		t.Fatal(err)
	}
	tr, err := readTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	// The CPU clock advances 0.25 s at each reading: at the start, at
	// each report and at the end.
	want := []workEvent{{1500 * time.Millisecond, quant.WorkForward, 10, 250 * time.Millisecond}, {61500 * time.Millisecond, quant.WorkHeadSolve, 2.5e12, 500 * time.Millisecond}}
	if tr.version != TraceVersion || tr.totals != total || len(tr.events) != 2 || tr.events[0] != want[0] || tr.events[1] != want[1] || tr.end != 62500*time.Millisecond || tr.endCPU != 750*time.Millisecond {
		t.Errorf("read back %+v, want totals %v, events %+v, end 62.5s, 0.75s of CPU", tr, total, want)
	}
	var none *Follower
	if err := none.WriteTrace(path); err != nil {
		t.Errorf("no follower: %v", err)
	}
}

// TestEstimateOnRecordedRuns replays the work traces of real quantize runs
// (testdata/worktrace, written with LFMQ_WORK_TRACE by
// scripts/bench-quantize.sh; docs/bench-quantize.md gives the commands and
// the machine's load) through the estimate with quant's priors, asking for
// the time left at every 1 % of each run as the status line would, and
// compares it with the time that actually remained from 10 % to 90 % of
// the run (but for the last 30 s, as the script judges it: a few seconds'
// rounding is a large share of them).
//
// A trace with the process's CPU time at each report is replayed as the
// run saw it (the CPU clock read between two reports taken as even), and
// its estimate of the CPU time left is held to a band around the CPU time
// that remained, at every point: that is the time left on a machine whose
// load holds still. The band is ±25 % for a trace that counts the work as
// quant does now (version 2); an older trace (version 1) counted the
// forwards' last layer whole and weighed the dense statistics' forward
// operations otherwise, so that the priors, measured in today's units,
// misprice its dense and head statistics, and is held to ±50 %. The runs
// were made on a shared machine whose load moved the CPU time the run got
// per second by up to 2.5× within a run, which no estimate from the run's
// past can foresee, so the time left on the wall clock is logged, not
// held to a band. A trace without CPU time is timed on the wall clock,
// and its estimate's worst and typical errors must be no more than a tenth
// above those of extrapolating the share of the work done, weighted by the
// same priors. A broken estimate fails each check.
func TestEstimateOnRecordedRuns(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "worktrace", "*.trace"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded traces: %v", err)
	}
	current := 0
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, err := readTrace(path)
			if err != nil {
				t.Fatal(err)
			}
			est, cpu, share := replayTrace(tr)
			t.Logf("%s (version %d, %v): time left estimate/actual %s; extrapolating the share of work done: %s", filepath.Base(path), tr.version, tr.end.Round(time.Second), est, share)
			if est.n < 10 {
				t.Fatalf("an estimate was shown at %d points", est.n)
			}
			if !tr.hasCPU() {
				if est.worst() > 1.1*share.worst() || est.typical() > 1.1*share.typical() {
					t.Errorf("the estimate is off by up to %.2f× (typically %.2f×), against %.2f× (%.2f×) from extrapolating the share of work", est.worst(), est.typical(), share.worst(), share.typical())
				}
				return
			}
			t.Logf("%s: CPU time left estimate/actual %s", filepath.Base(path), cpu)
			band := 0.5
			if tr.version >= 2 {
				band = 0.25
				current++
			}
			if cpu.n != est.n || cpu.lo < 1-band || cpu.hi > 1+band {
				t.Errorf("the estimate of the CPU time left is %.2f–%.2f× the actual at %d points, not within ±%.0f %% at %d", cpu.lo, cpu.hi, cpu.n, 100*band, est.n)
			}
		})
	}
	if current < 1 {
		t.Errorf("no recorded run of version %d with CPU time", TraceVersion)
	}
}

// hasCPU reports whether the trace has the CPU time of every report.
func (tr *recordedTrace) hasCPU() bool {
	if tr.endCPU < 0 {
		return false
	}
	for _, e := range tr.events {
		if e.cpu < 0 {
			return false
		}
	}
	return true
}

// cpuAt is the trace's CPU time at a time of the run, between the reports
// around it taken as even (the status line reads the live CPU clock).
func (tr *recordedTrace) cpuAt(at time.Duration) time.Duration {
	var a workEvent // the start
	for _, e := range tr.events {
		if e.at > at {
			if e.at == a.at {
				return e.cpu
			}
			return a.cpu + time.Duration(float64(e.cpu-a.cpu)*float64(at-a.at)/float64(e.at-a.at))
		}
		a = e
	}
	if tr.end <= a.at {
		return tr.endCPU
	}
	return a.cpu + time.Duration(float64(tr.endCPU-a.cpu)*float64(at-a.at)/float64(tr.end-a.at))
}

// replayTrace replays a trace through the progress's estimate (on its CPU
// clock where it has one) and returns, at every 1 % from 10 % to 90 % of
// the run where the estimate is shown, its ratio to the actual time left,
// that of its CPU time left to the actual (traces with CPU time), and
// that of extrapolating the share of the work done, weighted by the
// priors.
func replayTrace(tr *recordedTrace) (est, cpuEst, share ratioRange) {
	var weighted, weightedTotal float64
	for k := range quant.NumWorkKinds {
		weightedTotal += tr.totals[k] * k.Cost()
	}
	clock := &fakeClock{t: time.Unix(0, 0)}
	var cpuNow time.Duration
	var cpu func() time.Duration
	if tr.hasCPU() {
		// The process used some CPU time before the work began.
		cpu = func() time.Duration { return time.Second + cpuNow }
	}
	f := NewFollower(clock.now, cpu, false)
	t0 := clock.t
	f.StartWork(tr.totals)
	next := 0
	for pct := 1; pct < 100; pct++ {
		at := tr.end * time.Duration(pct) / 100
		for next < len(tr.events) && tr.events[next].at <= at {
			clock.t, cpuNow = t0.Add(tr.events[next].at), tr.events[next].cpu
			f.Work(tr.events[next].kind, tr.events[next].work)
			weighted += tr.events[next].work * tr.events[next].kind.Cost()
			next++
		}
		if pct < 10 || pct > 90 || tr.end-at < 30*time.Second {
			continue
		}
		actual := float64(tr.end - at)
		clock.t = t0.Add(at)
		if cpu != nil {
			cpuNow = tr.cpuAt(at)
		}
		if left, ok := f.est.Left(clock.t); ok {
			est.add(float64(left) / actual)
			if w, ok := f.est.WorkLeft(clock.t); ok && cpu != nil {
				cpuEst.add(float64(w) / float64(tr.endCPU-cpuNow))
			}
		}
		if s := weighted / weightedTotal; s >= eta.MinShare && s < 1 {
			share.add(float64(at) * (1 - s) / s / actual)
		}
	}
	return est, cpuEst, share
}

// ratioRange is the range of estimate/actual ratios, and the sum of their
// logarithms' magnitudes.
type ratioRange struct {
	lo, hi float64
	logs   float64
	n      int
}

func (r *ratioRange) add(v float64) {
	if r.n == 0 || v < r.lo {
		r.lo = v
	}
	if r.n == 0 || v > r.hi {
		r.hi = v
	}
	r.logs += math.Abs(math.Log(v))
	r.n++
}

// typical is the geometric mean of the factors by which the estimates
// were off, either way.
func (r ratioRange) typical() float64 {
	if r.n == 0 {
		return math.Inf(1)
	}
	return math.Exp(r.logs / float64(r.n))
}

// worst is the largest factor by which an estimate was off, either way.
func (r ratioRange) worst() float64 {
	if r.n == 0 {
		return math.Inf(1)
	}
	return max(r.hi, 1/r.lo)
}

func (r ratioRange) String() string {
	return fmt.Sprintf("%.2f–%.2f×, typically off %.2f× (%d points)", r.lo, r.hi, r.typical(), r.n)
}

package main

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

	"github.com/lfmq/lfmq/quant"
)

// recordedTrace is a work trace read back (the format of workTrace).
type recordedTrace struct {
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
			if sc.Text() != "lfmq-work-trace\t1" {
				err = fmt.Errorf("not a work trace")
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
	f := newWorkFollower(clock.now, true)
	cpu := 7 * time.Second
	f.trace.cpu = func() time.Duration { cpu += 250 * time.Millisecond; return cpu }
	var total quant.WorkTotals
	total[quant.WorkForward], total[quant.WorkHeadSolve] = 10, 2.5e12
	f.startWork(total)
	clock.t = clock.t.Add(1500 * time.Millisecond)
	f.work(quant.WorkForward, 10)
	clock.t = clock.t.Add(time.Minute)
	f.work(quant.WorkHeadSolve, 2.5e12)
	clock.t = clock.t.Add(time.Second)
	path := filepath.Join(t.TempDir(), "run.trace")
	if err := f.writeTrace(path); err != nil {
		t.Fatal(err)
	}
	tr, err := readTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	// The CPU clock advances 0.25 s at each reading: at the start, at
	// each report and at the end.
	want := []workEvent{{1500 * time.Millisecond, quant.WorkForward, 10, 250 * time.Millisecond}, {61500 * time.Millisecond, quant.WorkHeadSolve, 2.5e12, 500 * time.Millisecond}}
	if tr.totals != total || len(tr.events) != 2 || tr.events[0] != want[0] || tr.events[1] != want[1] || tr.end != 62500*time.Millisecond || tr.endCPU != 750*time.Millisecond {
		t.Errorf("read back %+v, want totals %v, events %+v, end 62.5s, 0.75s of CPU", tr, total, want)
	}
	var none *workFollower
	if err := none.writeTrace(path); err != nil {
		t.Errorf("no follower: %v", err)
	}
}

// TestEstimateOnRecordedRuns replays the work traces of real quantize runs
// (testdata/worktrace, written with LFMQ_WORK_TRACE by
// scripts/bench-quantize.sh; docs/bench-quantize.md gives the commands)
// through the estimate with quant's priors, asking for the time left at
// every 1 % of each run as the status line would, and checks it against
// the time that actually remained: within ±25 % from 10 % to 90 % of the
// run, wherever it is shown, but for the last 30 s (as the script judges
// it: a few seconds' rounding is a large share of them). The runs' timings are independent of the
// estimate; the priors were measured on one of them (the 8B-A1B shape),
// the others check that they hold beyond it.
func TestEstimateOnRecordedRuns(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "worktrace", "*.trace"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded traces: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, err := readTrace(path)
			if err != nil {
				t.Fatal(err)
			}
			clock := &fakeClock{t: time.Unix(0, 0)}
			f := newWorkFollower(clock.now, false)
			t0 := clock.t
			f.startWork(tr.totals)
			lo, hi, shown, next := math.Inf(1), math.Inf(-1), 0, 0
			for pct := 1; pct < 100; pct++ {
				at := tr.end * time.Duration(pct) / 100
				for next < len(tr.events) && tr.events[next].at <= at {
					clock.t = t0.Add(tr.events[next].at)
					f.work(tr.events[next].kind, tr.events[next].work)
					next++
				}
				left, ok := f.est.Left(t0.Add(at))
				if !ok || pct < 10 || pct > 90 || tr.end-at < 30*time.Second {
					continue
				}
				r := float64(left) / float64(tr.end-at)
				lo, hi, shown = min(lo, r), max(hi, r), shown+1
				if r < 0.75 || r > 1.25 {
					t.Errorf("at %d %% of the run (%v): about %v left, %v actually (%.2f×)", pct, at.Round(time.Second), left.Round(time.Second), (tr.end - at).Round(time.Second), r)
				}
			}
			if shown < 10 {
				t.Errorf("an estimate was shown at %d of the points from 10 %% to 90 %%", shown)
			}
			t.Logf("%s (%v): estimate/actual %.2f–%.2f over 10–90 %% of the run (%d points)", filepath.Base(path), tr.end.Round(time.Second), lo, hi, shown)
		})
	}
}

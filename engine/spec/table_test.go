package spec

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
)

// TestChoose: the depth rule against cases worked by hand. Costs are in
// units of a one-row step; a step of n sequences and r rows costs what
// cost says.
func TestChoose(t *testing.T) {
	linear := func(per float64) func(n, rows int) float64 {
		return func(n, rows int) float64 { return float64(n) + per*float64(rows-n) }
	}
	flat := func(n, rows int) float64 { return 1 } // bound by reading the weights: rows are free
	tests := []struct {
		name string
		p    [][]float64
		cost func(n, rows int) float64
		want []int
	}{
		// Free rows: every draft with a chance of surviving is verified.
		{"free rows", [][]float64{{0.9, 0.5, 0.1}}, flat, []int{3}},
		// A row costs 0.5 of a step: draft 1 (0.9 expected) pays, 1.9/1.5 =
		// 1.27 > 1; draft 2 adds 0.45 for 0.5: 2.35/2 = 1.175 < 1.27.
		{"costly rows", [][]float64{{0.9, 0.5, 0.1}}, linear(0.5), []int{1}},
		// Rows cost a full step: nothing beats plain decoding.
		{"rows as steps", [][]float64{{0.9, 0.9}}, linear(1), []int{0}},
		// Two sequences: the better sequence's drafts come first.
		{"two sequences", [][]float64{{0.2, 0.9}, {0.95, 0.9, 0.9}}, linear(0.3), []int{0, 3}},
		// No drafts at all.
		{"nothing drafted", [][]float64{{}, {}}, linear(0.1), []int{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Choose(tt.p, tt.cost); !slices.Equal(got, tt.want) {
				t.Errorf("Choose = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestChooseOptimal: on small random cases, Choose's depths give the best
// expected tokens per cost over every combination of depths (the
// identity it promises when the rows' cost only grows).
func TestChooseOptimal(t *testing.T) {
	seed := uint64(1)
	rnd := func() float64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return float64(seed>>11) / (1 << 53)
	}
	ratio := func(p [][]float64, k []int, cost func(n, rows int) float64) float64 {
		tok, rows := float64(len(p)), len(p)
		for s, d := range k {
			q := 1.0
			for _, x := range p[s][:d] {
				q *= x
				tok += q
			}
			rows += d
		}
		return tok / cost(len(p), rows)
	}
	for c := range 200 {
		n := 1 + c%3
		p := make([][]float64, n)
		for s := range p {
			p[s] = make([]float64, 3)
			for i := range p[s] {
				p[s][i] = rnd()
			}
		}
		per := 0.05 + rnd()
		cost := func(n, rows int) float64 { return float64(n) + per*float64(rows-n) }
		got := ratio(p, Choose(p, cost), cost)
		best := 0.0
		k := make([]int, n)
		var walk func(s int)
		walk = func(s int) {
			if s == n {
				best = max(best, ratio(p, k, cost))
				return
			}
			for d := 0; d <= 3; d++ {
				k[s] = d
				walk(s + 1)
			}
		}
		walk(0)
		if got < best*(1-1e-9) {
			t.Fatalf("case %d: p %v per-row cost %.3f: Choose reaches %.6f tokens per cost, the best depths %.6f", c, p, per, got, best)
		}
	}
}

// TestTableCost: a width's cells, each the median of its times, read as
// the least-squares line over rows per sequence, scaled to another width;
// a width with one rows count measured takes the slope per row of the
// nearest width whose cells make a line, through its own cell (the
// guess's shape, a tenth more per row, only where no width has a line);
// cells off
// their line (a shared machine's noise) do not move the answer alone.
func TestTableCost(t *testing.T) {
	tb := NewTable()
	if tb.Cost(1, 1) != 0 || tb.DraftCost(1) != 0 {
		t.Fatal("an empty table must answer 0")
	}
	for _, s := range []float64{3, 1, 2} {
		tb.Observe(1, 1, s) // median 2
	}
	tb.Observe(1, 5, 6)
	tb.Observe(4, 4, 4)
	tb.ObserveDraft(4, 0.8)
	for rows, sec := range map[int]float64{16: 1, 32: 3, 48: 2} {
		tb.Observe(16, rows, sec) // 1, 3, 2 s at 1, 2, 3 rows each: the line 1 + 0.5·k
	}
	for _, c := range []struct {
		n, rows int
		want    float64
	}{
		{1, 1, 2},            // the median, on the line through (1, 2) and (5, 6)
		{1, 3, 4},            // halfway between 1 row (2) and 5 rows (6)
		{1, 7, 8},            // the last segment extended
		{2, 2, 4 * 2.0 / 4},  // widths 1 and 4 are both 2× from 2: the wider's cell, scaled by 2/4
		{4, 8, 4 + 4*0.5/16}, // width 4 has one cell: through it, width 16's 0.5 s per row per sequence, 0.5/16 s a row, for 4 more rows (width 16 is nearer than 1 by ties to the wider)
		{16, 32, 2},          // the line, not the noisy cell's 3
		{16, 16, 1},          // the plain step: its own cell's median, not the line's 1.5
	} {
		if got := tb.Cost(c.n, c.rows); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Cost(%d, %d) = %v, want %v", c.n, c.rows, got, c.want)
		}
	}
	// A cell timed at a full window of steps (a server's plain steps) is
	// its median, whatever the line through the noisy cells says.
	full := NewTable()
	for range costWindow {
		full.Observe(1, 1, 1)
	}
	full.Observe(1, 2, 4)
	full.Observe(1, 3, 4.5)
	if got := full.Cost(1, 1); got != 1 {
		t.Errorf("Cost(1, 1) = %v over a full window of 1 s steps, want 1", got)
	}
	// With no width's cells making a line, a lone cell takes the
	// guess's shape.
	lone := NewTable()
	lone.Observe(4, 4, 4)
	if got, want := lone.Cost(4, 8), 4*(1+0.1); math.Abs(got-want) > 1e-12 {
		t.Errorf("Cost(4, 8) = %v with one cell and no line, want the guess's %v", got, want)
	}
	if got := tb.DraftCost(8); math.Abs(got-1.6) > 1e-12 {
		t.Errorf("DraftCost(8) = %v, want 1.6 (width 4's, scaled)", got)
	}
	// A file round trip keeps the cells; another header is refused.
	path := filepath.Join(t.TempDir(), "costs.json")
	h := CostHeader{Model: "m", Drafter: "d", KV: "bf16", Threads: 2, CPU: "x", Runtime: "v"}
	if err := SaveTable(path, h, tb); err != nil {
		t.Fatal(err)
	}
	back, err := LoadTable(path, h)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Cells(), tb.Cells()) {
		t.Errorf("read back %v, wrote %v", back.Cells(), tb.Cells())
	}
	h2 := h
	h2.Threads = 16
	if _, err := LoadTable(path, h2); err == nil {
		t.Error("a table measured on 2 threads was read for 16")
	} else if se, ok := err.(*StaleCostsError); !ok || se.Field != "threads" {
		t.Errorf("error %v: want a StaleCostsError naming threads", err)
	}
}

// TestGuard: a width where drafting does not pay is paused for
// GuardFirstPause plain steps, then for twice that after another failure;
// one where it pays stays on (apart from its plain probes).
func TestGuard(t *testing.T) {
	g := NewGuard()
	drafted := func(n int, tokensPerSec float64) {
		for range GuardEarlySamples { // clearly worse: decided early
			g.Allow(n)
			g.Drafted(n, n, float64(n)/tokensPerSec, 1) // plain: n tokens per second
		}
	}
	drafted(1, 0.5) // half the plain rate
	plainSteps := 0
	for !g.Allow(1) {
		g.Plain(1, 1, 1)
		plainSteps++
	}
	if plainSteps != GuardFirstPause {
		t.Errorf("paused %d steps, want %d", plainSteps, GuardFirstPause)
	}
	drafted(1, 0.5)
	plainSteps = 0
	for !g.Allow(1) {
		g.Plain(1, 1, 1)
		plainSteps++
	}
	if plainSteps != 2*GuardFirstPause {
		t.Errorf("second pause %d steps, want %d", plainSteps, 2*GuardFirstPause)
	}
	// A width where drafting pays: allowed but for one probe in GuardPlainEvery.
	allowed := 0
	for range 4 * GuardPlainEvery {
		if g.Allow(4) {
			allowed++
			g.Drafted(4, 8, 1, 1) // 8 tokens per second against 4
		} else {
			g.Plain(4, 4, 1)
		}
	}
	if allowed != 4*GuardPlainEvery-4 {
		t.Errorf("width 4 drafted %d of %d steps, want all but the %d probes", allowed, 4*GuardPlainEvery, 4)
	}
	st := g.States()
	if len(st) != 2 || st[0].Width != 1 || st[0].Offs != 2 || st[1].Width != 4 || !st[1].Drafting || st[1].Offs != 0 {
		t.Errorf("states %+v", st)
	}
	// Widths 4 to 7 are one class; a little worse than plain is decided
	// after GuardSamples, not earlier.
	g = NewGuard()
	g.Plain(4, 4, 1)
	for i := range GuardSamples {
		if !g.Allow(5 + i%3) {
			t.Fatalf("width class 4 paused after %d slightly worse steps", i)
		}
		g.Drafted(5+i%3, 36, 10, 1) // 3.6 tokens/s: 0.9 of its plain probes' 4
	}
	if g.Allow(6) {
		t.Error("width class 4 still drafts after GuardSamples steps at 0.9 of the plain rate")
	}
}

package spec

import (
	"iter"
	"maps"
	"math"
	"slices"
	"sync"
)

// Table is a drafter's verify cost table (docs/drafting.md §4): the time
// of a step of n sequences carrying rows token rows in all (n plain
// decodes are n rows; a verify of k drafts adds k), and of the drafter's
// pass over n sequences. Each cell keeps its last costWindow times, and
// their median stands for it; Cost reads a width's cells as a line over
// rows per sequence, and scales the nearest measured width's line to
// another. It is safe for concurrent use.
type Table struct {
	mu    sync.Mutex
	steps map[[2]int][]float64 // (n, rows) → recent seconds
	draft map[int][]float64    // n → recent seconds of the drafter's pass
}

// NewTable returns an empty table (the zero value is one too).
func NewTable() *Table {
	return &Table{steps: map[[2]int][]float64{}, draft: map[int][]float64{}}
}

func push(s []float64, sec float64) []float64 {
	s = append(s, sec)
	if len(s) > costWindow {
		s = s[len(s)-costWindow:]
	}
	return s
}

// Observe records a step of n sequences and rows rows that took sec.
func (t *Table) Observe(n, rows int, sec float64) {
	if n < 1 || rows < n || !(sec > 0) {
		return
	}
	t.mu.Lock()
	if t.steps == nil {
		t.steps = map[[2]int][]float64{}
	}
	t.steps[[2]int{n, rows}] = push(t.steps[[2]int{n, rows}], sec)
	t.mu.Unlock()
}

// cell is the median of the cell of n sequences and rows rows, and
// whether it was measured.
func (t *Table) cell(n, rows int) (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.steps[[2]int{n, rows}]
	if !ok {
		return 0, false
	}
	return median(s), true
}

// ObserveDraft records a drafter pass over n sequences that took sec.
func (t *Table) ObserveDraft(n int, sec float64) {
	if n < 1 || !(sec > 0) {
		return
	}
	t.mu.Lock()
	if t.draft == nil {
		t.draft = map[int][]float64{}
	}
	t.draft[n] = push(t.draft[n], sec)
	t.mu.Unlock()
}

// Cost returns the expected seconds of a step of n sequences and rows
// rows, or 0 when nothing of any width is measured. It reads the cells of
// the measured width nearest n as a line over rows per sequence (least
// squares, its slope no less than 0): a step's cost whatever its rows,
// chiefly reading the weights, and a row's arithmetic. On a shared
// machine one cell can be off by 2× and more, and a depth rule that
// followed single cells would follow the noise. The line's value at this
// step's rows per sequence is scaled by n over that width.
//
// A cell that holds a full window of timings (costWindow), which only the
// steps a server observes fill (the start-up measurement takes 3), is read
// as its median instead, and so is the plain step's (one row a sequence)
// once timed at all: the plain step is the cost every drafting decision
// is set against, and a line bent by a few noisy verify cells misses it
// (by 40 % on the dense shape on 2 threads, enough to make drafting look
// like it pays where it does not; by 40 % too on the 24B-A2B shapes at
// 16 sequences, where the cost of a row grows less from 4 rows a
// sequence on, which made drafts that all survive look paying there).
func (t *Table) Cost(n, rows int) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.steps[[2]int{n, rows}]; len(s) == costWindow || (rows == n && len(s) > 0) {
		return median(s)
	}
	w := t.nearestWidth(n)
	if w == 0 {
		return 0
	}
	xs, ys := t.points(w)
	x := float64(rows) / float64(n)
	if !slices.ContainsFunc(xs, func(v float64) bool { return v != xs[0] }) {
		// One rows count of this width is measured (a server's plain
		// steps at a width the start-up did not time): its level is
		// its own, and a row's cost the nearest line's, per row. The
		// guess's tenth a row would make verify rows look nearly free
		// at such a width, and drafting pay where it cannot.
		if lw := t.nearestLineWidth(n); lw != 0 {
			lx, ly := t.points(lw)
			_, b := fit(lx, ly)
			mx, my := mean(xs), mean(ys)
			return max(my+b*float64(w)/float64(lw)*(x-mx), 1e-9) * float64(n) / float64(w)
		}
	}
	return line(xs, ys, x) * float64(n) / float64(w)
}

// points are width w's cells as rows per sequence and median seconds.
// Called with t.mu held.
func (t *Table) points(w int) (xs, ys []float64) {
	for k, s := range t.steps {
		if k[0] == w {
			xs = append(xs, float64(k[1])/float64(w))
			ys = append(ys, median(s))
		}
	}
	return xs, ys
}

// nearestLineWidth is the width nearest n whose cells span two rows
// counts or more, so that they make a line; 0 when none does. Called
// with t.mu held.
func (t *Table) nearestLineWidth(n int) int {
	rows := map[int]int{} // width → a rows count, or -1 for several
	for k := range t.steps {
		if r, ok := rows[k[0]]; !ok {
			rows[k[0]] = k[1]
		} else if r != k[1] {
			rows[k[0]] = -1
		}
	}
	return nearest(func(yield func(int) bool) {
		for w, r := range rows {
			if r == -1 && !yield(w) {
				return
			}
		}
	}, n)
}

// DraftCost returns the expected seconds of the drafter's pass over n
// sequences, scaled from the nearest width measured; 0 when none is.
func (t *Table) DraftCost(n int) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.draft[n]; ok {
		return median(s)
	}
	bw := nearest(maps.Keys(t.draft), n)
	if bw == 0 {
		return 0
	}
	return median(t.draft[bw]) * float64(n) / float64(bw)
}

// nearestWidth is the width of a measured step nearest n; 0 when none is
// measured. Called with t.mu held.
func (t *Table) nearestWidth(n int) int {
	return nearest(func(yield func(int) bool) {
		for k := range t.steps {
			if !yield(k[0]) {
				return
			}
		}
	}, n)
}

// nearest is the width of widths nearest n in ratio, ties to the wider
// (so that the answer never depends on a map's order); 0 for none.
func nearest(widths iter.Seq[int], n int) int {
	bw := 0
	for w := range widths {
		if bw == 0 {
			bw = w
			continue
		}
		dw, db := math.Abs(math.Log(float64(w)/float64(n))), math.Abs(math.Log(float64(bw)/float64(n)))
		if dw < db || (dw == db && w > bw) {
			bw = w
		}
	}
	return bw
}

// line is the least-squares line through (xs, ys) at x, its slope no
// less than 0 (a step never gets cheaper with more rows); with one point
// (or all at one x), the unmeasured guess's shape (a tenth more per row
// per sequence) through their mean.
func line(xs, ys []float64, x float64) float64 {
	mx, my := mean(xs), mean(ys)
	sxx, b := fit(xs, ys)
	if sxx == 0 {
		return my * (1 + 0.1*(x-1)) / (1 + 0.1*(mx-1))
	}
	return max(my+b*(x-mx), 1e-9)
}

// fit returns the spread of xs about their mean (0: one x) and the
// least-squares slope of ys over xs, no less than 0.
func fit(xs, ys []float64) (sxx, b float64) {
	mx, my := mean(xs), mean(ys)
	var sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return 0, 0
	}
	return sxx, max(sxy/sxx, 0)
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// Cell is one measured cell of a Table, as a cost file keeps it.
type Cell struct {
	Seqs    int     `json:"seqs"`
	Rows    int     `json:"rows"`
	Seconds float64 `json:"seconds"`
}

// Cells returns the table's step cells (median seconds), sorted by width
// and rows, and its drafter cells (Rows 0).
func (t *Table) Cells() []Cell {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cs []Cell
	for k, s := range t.steps {
		cs = append(cs, Cell{Seqs: k[0], Rows: k[1], Seconds: median(s)})
	}
	for n, s := range t.draft {
		cs = append(cs, Cell{Seqs: n, Rows: 0, Seconds: median(s)})
	}
	slices.SortFunc(cs, func(a, b Cell) int {
		if a.Seqs != b.Seqs {
			return a.Seqs - b.Seqs
		}
		return a.Rows - b.Rows
	})
	return cs
}

// SetCells loads cells (Rows 0: a drafter pass) as measurements.
func (t *Table) SetCells(cs []Cell) {
	for _, c := range cs {
		if c.Rows == 0 {
			t.ObserveDraft(c.Seqs, c.Seconds)
		} else {
			t.Observe(c.Seqs, c.Rows, c.Seconds)
		}
	}
}

// Choose decides how many of each sequence's drafts a verify step
// carries (docs/drafting.md §4). p[s][i] is the probability that draft i
// of sequence s survives given that the drafts before it did (the
// confidence head's, calibrated); a draft's expected kept tokens are the
// product of its own and its predecessors'. The step's expected tokens
// (one per sequence plus the kept drafts) per expected second is
// maximised over adding drafts in decreasing order of expected kept
// tokens, the cost of n sequences and rows rows being cost(n, rows);
// depths of 0 everywhere mean that a plain step pays best.
func Choose(p [][]float64, cost func(n, rows int) float64) []int {
	n := len(p)
	type gain struct {
		s int
		g float64
	}
	var gs []gain
	for s, ps := range p {
		q := 1.0
		for _, x := range ps {
			q *= x
			gs = append(gs, gain{s, q})
		}
	}
	// Stable, so that a sequence's drafts (whose products never grow)
	// keep their order among equal products.
	slices.SortStableFunc(gs, func(a, b gain) int {
		switch {
		case a.g > b.g:
			return -1
		case a.g < b.g:
			return 1
		}
		return 0
	})
	best, bestM := float64(n)/cost(n, n), 0
	tokens := float64(n)
	for m, g := range gs {
		tokens += g.g
		if v := tokens / cost(n, n+m+1); v > best*(1+1e-9) {
			best, bestM = v, m+1
		}
	}
	k := make([]int, n)
	for _, g := range gs[:bestM] {
		k[g.s]++
	}
	return k
}

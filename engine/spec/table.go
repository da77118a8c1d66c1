package spec

import (
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
	steps map[[2]int]*cell // (n, rows) → recent seconds
	draft map[int]*cell    // n → recent seconds of the drafter's pass
	// rows is, per width, the one rows count measured, or -1 where
	// several are (a line); fits caches each width's line, dropped when
	// the width is observed. A scheduler reads the table dozens of times
	// a step: these keep a read from sorting every cell's times again.
	rows map[int]int
	fits map[int]*widthFit
}

// cell is a cell's recent times and their median.
type cell struct {
	times []float64
	med   float64
}

func (c *cell) push(sec float64) {
	c.times = push(c.times, sec)
	c.med = median(c.times)
}

// widthFit is a width's cells as a least-squares line over rows per
// sequence: their means, the spread of x (0: one rows count) and the
// slope, no less than 0.
type widthFit struct{ mx, my, sxx, b float64 }

// NewTable returns an empty table (the zero value is one too).
func NewTable() *Table { return &Table{} }

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
	defer t.mu.Unlock()
	if t.steps == nil {
		t.steps, t.rows, t.fits = map[[2]int]*cell{}, map[int]int{}, map[int]*widthFit{}
	}
	c := t.steps[[2]int{n, rows}]
	if c == nil {
		c = &cell{}
		t.steps[[2]int{n, rows}] = c
	}
	c.push(sec)
	if r, ok := t.rows[n]; !ok {
		t.rows[n] = rows
	} else if r != rows {
		t.rows[n] = -1
	}
	delete(t.fits, n)
}

// cell is the median of the cell of n sequences and rows rows, and
// whether it was measured.
func (t *Table) cell(n, rows int) (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.steps[[2]int{n, rows}]
	if !ok {
		return 0, false
	}
	return c.med, true
}

// ObserveDraft records a drafter pass over n sequences that took sec.
func (t *Table) ObserveDraft(n int, sec float64) {
	if n < 1 || !(sec > 0) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draft == nil {
		t.draft = map[int]*cell{}
	}
	c := t.draft[n]
	if c == nil {
		c = &cell{}
		t.draft[n] = c
	}
	c.push(sec)
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
// like it pays where it does not; by 11 to 31 % either way on the 24B-A2B
// shapes at 16 sequences, where the cost of a row grows less from 4 rows
// a sequence on, which flipped whether drafts that all survive look
// paying there).
func (t *Table) Cost(n, rows int) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.steps[[2]int{n, rows}]; c != nil && (len(c.times) == costWindow || rows == n) {
		return c.med
	}
	w := nearest(t.rows, n, nil)
	if w == 0 {
		return 0
	}
	f := t.fit(w)
	x := float64(rows) / float64(n)
	if f.sxx == 0 {
		// One rows count of this width is measured (a server's plain
		// steps at a width the start-up did not time): its level is
		// its own, and a row's cost the nearest line's, per row. The
		// guess's tenth a row would make verify rows look nearly free
		// at such a width, and drafting pay where it cannot.
		if lw := t.nearestLineWidth(n); lw != 0 {
			b := t.fit(lw).b * float64(w) / float64(lw)
			return max(f.my+b*(x-f.mx), 1e-9) * float64(n) / float64(w)
		}
		return f.my * (1 + 0.1*(x-1)) / (1 + 0.1*(f.mx-1)) * float64(n) / float64(w)
	}
	return max(f.my+f.b*(x-f.mx), 1e-9) * float64(n) / float64(w)
}

// fit returns width w's line (a measured width), computing it when the
// width was observed since. Called with t.mu held.
func (t *Table) fit(w int) *widthFit {
	if f := t.fits[w]; f != nil {
		return f
	}
	var xs, ys []float64
	for k, c := range t.steps {
		if k[0] == w {
			xs = append(xs, float64(k[1])/float64(w))
			ys = append(ys, c.med)
		}
	}
	f := &widthFit{mx: mean(xs), my: mean(ys)}
	var sxy float64
	for i := range xs {
		f.sxx += (xs[i] - f.mx) * (xs[i] - f.mx)
		sxy += (xs[i] - f.mx) * (ys[i] - f.my)
	}
	if f.sxx > 0 {
		f.b = max(sxy/f.sxx, 0)
	}
	t.fits[w] = f
	return f
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// nearestLineWidth is the width nearest n whose cells span two rows
// counts or more, so that they make a line; 0 when none does. Called
// with t.mu held.
func (t *Table) nearestLineWidth(n int) int {
	return nearest(t.rows, n, func(r int) bool { return r == -1 })
}

// DraftCost returns the expected seconds of the drafter's pass over n
// sequences, scaled from the nearest width measured; 0 when none is.
func (t *Table) DraftCost(n int) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.draft[n]; ok {
		return c.med
	}
	bw := nearest(t.draft, n, nil)
	if bw == 0 {
		return 0
	}
	return t.draft[bw].med * float64(n) / float64(bw)
}

// nearest is the width among m's keys (those whose value keep accepts;
// all with keep nil) nearest n in ratio, ties to the wider (so that the
// answer never depends on a map's order); 0 for none.
func nearest[V any](m map[int]V, n int, keep func(V) bool) int {
	if v, ok := m[n]; ok && (keep == nil || keep(v)) {
		return n // the nearest there is
	}
	// w is nearer n in ratio than bw when max(w, n)/min(w, n) is the
	// smaller ratio: compared as integer products, exactly and without
	// logarithms (a scheduler asks this dozens of times a step).
	bw := 0
	for w, v := range m {
		if keep != nil && !keep(v) {
			continue
		}
		if bw == 0 {
			bw = w
			continue
		}
		wh, wl := max(w, n), min(w, n)
		bh, bl := max(bw, n), min(bw, n)
		if c := wh * bl; c < bh*wl || (c == bh*wl && w > bw) {
			bw = w
		}
	}
	return bw
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
	for k, c := range t.steps {
		cs = append(cs, Cell{Seqs: k[0], Rows: k[1], Seconds: c.med})
	}
	for n, c := range t.draft {
		cs = append(cs, Cell{Seqs: n, Rows: 0, Seconds: c.med})
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

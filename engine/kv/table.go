package kv

import "fmt"

// Table is a sequence's page table on the CPU: full page i holds
// positions [64·i, 64·i+64) of every attention layer that does not slide
// (and a drafter's layer slots), window page i the same positions of
// every sliding layer. It holds the full pages of the positions its
// sequence has written (a forward takes those of its tokens before it
// runs), and the window pages of those a query it can still make may read
// (Grow gives back the others: nil in Window). Its zero value is unusable:
// NewTable gives it a pool.
type Table struct {
	pool  *Pool
	pages []*Page
	win   []*Page // as long as pages when a layer slides, else nil
}

// NewTable returns an empty page table whose pages come from p.
func NewTable(p *Pool) Table { return Table{pool: p} }

// Pages returns the table's full pages, position pos in
// Pages()[pos/PageTokens] at row pos%PageTokens.
func (t *Table) Pages() []*Page { return t.pages }

// Window returns the table's window pages, indexed as Pages; those wholly
// before the window of every query the sequence can still make are nil.
func (t *Table) Window() []*Page { return t.win }

// PagesOf returns the pages that hold layer slot l: Window for a sliding
// layer, Pages otherwise.
func (t *Table) PagesOf(l int) []*Page {
	if t.pool.shape.Sliding(l) {
		return t.win
	}
	return t.pages
}

// WindowError reports positions of a sliding layer that a sequence no
// longer holds: its window pages were given back as the window moved on
// (docs/kv-cache.md, "Sliding layers"). The sequence is unchanged.
type WindowError struct {
	What string // the operation: "Rewind" or "Span"
	Pos  int    // the first position wanted that is not held
	Held int    // the first position held
}

// Error implements error.
func (e *WindowError) Error() string {
	return fmt.Sprintf("kv: %s needs the sliding layers' keys and values from position %d, but the sequence keeps them from %d on only (its window moved on)", e.What, e.Pos, e.Held)
}

// held returns the first position whose window page the table holds
// (its length's page count times PageTokens when it holds none).
func (t *Table) held() int {
	for i, pg := range t.win {
		if pg != nil {
			return i * PageTokens
		}
	}
	return len(t.win) * PageTokens
}

// need reports a *WindowError unless the table holds the window pages of
// positions [from, to).
func (t *Table) need(what string, from, to int) error {
	if t.win == nil || from >= to {
		return nil
	}
	for i := from / PageTokens; i < pagesFor(to); i++ {
		if t.win[i] == nil {
			return &WindowError{What: what, Pos: max(from, i*PageTokens), Held: t.held()}
		}
	}
	return nil
}

// Clone returns a table sharing every page of t by reference.
func (t *Table) Clone() Table {
	c := Table{pool: t.pool, pages: append(make([]*Page, 0, len(t.pages)), t.pages...)}
	for _, pg := range c.pages {
		t.pool.ref(pg)
	}
	if t.win != nil {
		c.win = append(make([]*Page, 0, len(t.win)), t.win...)
		for _, pg := range c.win {
			if pg != nil {
				t.pool.ref(pg)
			}
		}
	}
	return c
}

// Grow makes the table of a sequence of n positions ready for positions up
// to end: the pages that position n falls in are copied first if they are
// shared (copy on write), and new pages are taken for the rest. On an
// error the pages taken are given back and the table is unchanged.
//
// Then, the table gives back the window pages wholly before the window of
// a query at n−WindowSlack: no query the sequence can make from n on reads
// them, nor one after a Rewind of up to WindowSlack positions before n.
// Giving them back here, as a forward starts, rather than after it, keeps
// the window pages of every block the last forward completed until the
// next one: a prefix cache takes its spans in between (docs/kv-cache.md).
func (t *Table) Grow(n, end int) error {
	p := t.pool
	hasWin := p.shape.HasWindow()
	if at := n % PageTokens; at != 0 && end > n {
		i := n / PageTokens
		if err := t.unshare(&t.pages[i], at); err != nil {
			return err
		}
		if hasWin && t.win[i] != nil {
			if err := t.unshare(&t.win[i], at); err != nil {
				return err
			}
		}
	}
	for len(t.pages) < pagesFor(end) {
		pg, err := p.take(false)
		if err != nil {
			t.Trim(n)
			return err
		}
		t.pages = append(t.pages, pg)
		if hasWin {
			w, err := p.take(true)
			if err != nil {
				t.win = append(t.win, nil)
				t.Trim(n)
				return err
			}
			t.win = append(t.win, w)
		}
	}
	t.slide(n)
	return nil
}

// unshare replaces *slot, a page whose first at rows are written, by a
// copy of them if it has another holder (copy on write).
func (t *Table) unshare(slot **Page, at int) error {
	p, old := t.pool, *slot
	if !p.isShared(old) {
		return nil
	}
	cp, err := p.take(old.win)
	if err != nil {
		return err
	}
	for l := range old.k {
		if !old.k[l].Empty() {
			kvd := p.shape.Dim(l)
			cp.k[l].Copy(p.shape.DType, kvd, 0, &old.k[l], 0, at)
			cp.v[l].Copy(p.shape.DType, kvd, 0, &old.v[l], 0, at)
		}
	}
	*slot = cp
	p.release(old)
	return nil
}

// slide gives back the window pages wholly before winStart(n−WindowSlack)
// (see Grow).
func (t *Table) slide(n int) {
	if t.win == nil {
		return
	}
	first := max(0, n-WindowSlack-t.pool.shape.Window+1) // the first position kept
	for i := range min(first/PageTokens, len(t.win)) {
		if pg := t.win[i]; pg != nil {
			t.pool.release(pg)
			t.win[i] = nil
		}
	}
}

// Trim gives back the pages past those that hold positions [0, n).
func (t *Table) Trim(n int) {
	keep := pagesFor(n)
	for i := keep; i < len(t.pages); i++ {
		t.pool.release(t.pages[i])
		t.pages[i] = nil
	}
	if keep < len(t.pages) {
		t.pages = t.pages[:keep]
	}
	for i := keep; i < len(t.win); i++ {
		if t.win[i] != nil {
			t.pool.release(t.win[i])
			t.win[i] = nil
		}
	}
	if keep < len(t.win) {
		t.win = t.win[:keep]
	}
}

// Rewind shortens the table of a sequence to its first n positions, as
// Trim, once it has checked that it still holds every position a query at
// n reads (from the window start of n on); if not, it returns a
// *WindowError and the table is unchanged.
func (t *Table) Rewind(n int) error {
	if err := t.need("Rewind", max(0, n-t.pool.shape.Window+1), n); err != nil {
		return err
	}
	t.Trim(n)
	return nil
}

// Write writes layer slot l's keys k and values v (rows of the slot's
// width, Shape.Dim) of positions from start on into the table's pages,
// which Grow made ready.
func (t *Table) Write(l, start int, k, v []float32) {
	kvd, dt := t.pool.shape.Dim(l), t.pool.shape.DType
	pages := t.PagesOf(l)
	for r := 0; r < len(k)/kvd; {
		pos := start + r
		pg, at := pages[pos/PageTokens], pos%PageTokens
		cnt := min(PageTokens-at, len(k)/kvd-r)
		pg.k[l].Set(dt, kvd, at, k[r*kvd:(r+cnt)*kvd])
		pg.v[l].Set(dt, kvd, at, v[r*kvd:(r+cnt)*kvd])
		r += cnt
	}
}

// Span returns positions [start, end) of the table with conv, the conv
// state after end tokens: the span shares the table's pages. A span holds
// every layer's rows of its positions, so positions whose window pages
// the table gave back are refused (*WindowError).
func (t *Table) Span(start, end int, conv *ConvState) (*Span, error) {
	if err := t.need("Span", start, end); err != nil {
		return nil, err
	}
	sp := &Span{shape: t.pool.shape, start: start, end: end, conv: conv, pool: t.pool}
	sp.pages = append([]*Page(nil), t.pages[start/PageTokens:pagesFor(end)]...)
	for _, pg := range sp.pages {
		t.pool.ref(pg)
	}
	if t.win != nil {
		sp.win = append([]*Page(nil), t.win[start/PageTokens:pagesFor(end)]...)
		for _, pg := range sp.win {
			t.pool.ref(pg)
		}
	}
	return sp, nil
}

// Extend appends a span's keys and values to the table of a sequence of n
// positions, the span's start. A span of the same pool starting at a
// multiple of PageTokens is shared by reference; otherwise its rows are
// copied into the table's own pages. The table then gives back the window
// pages before the window of its new length as Grow does: what a prefix
// cache's spans hold stays theirs, not the sequence's.
func (t *Table) Extend(n int, sp *Span) error {
	if sp.pool == t.pool && sp.pages != nil && n%PageTokens == 0 {
		for _, pg := range sp.pages {
			t.pool.ref(pg)
			t.pages = append(t.pages, pg)
		}
		for _, pg := range sp.win {
			t.pool.ref(pg)
			t.win = append(t.win, pg)
		}
		t.slide(sp.end)
		return nil
	}
	if err := t.Grow(n, sp.end); err != nil {
		return err
	}
	dt := sp.shape.DType
	for l := range sp.shape.KVLayers() {
		if !sp.shape.HasKV(l) {
			continue
		}
		kvd := sp.shape.Dim(l)
		pages := t.PagesOf(l)
		for pos := sp.start; pos < sp.end; pos++ {
			sk, sv, from := sp.rows(l, pos)
			pg, at := pages[pos/PageTokens], pos%PageTokens
			pg.k[l].Copy(dt, kvd, at, sk, from, 1)
			pg.v[l].Copy(dt, kvd, at, sv, from, 1)
		}
	}
	t.slide(sp.end)
	return nil
}

// Pool returns the pool the table's pages come from.
func (t *Table) Pool() *Pool { return t.pool }

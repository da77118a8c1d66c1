package kv

// Table is a sequence's page table on the CPU: page i holds positions
// [64·i, 64·i+64) of every attention layer. It holds the pages of the
// positions its sequence has written (a forward takes those of its tokens
// before it runs). Its zero value is unusable: NewTable gives it a pool.
type Table struct {
	pool  *Pool
	pages []*Page
}

// NewTable returns an empty page table whose pages come from p.
func NewTable(p *Pool) Table { return Table{pool: p} }

// Pages returns the table's pages, position pos in Pages()[pos/PageTokens]
// at row pos%PageTokens.
func (t *Table) Pages() []*Page { return t.pages }

// Clone returns a table sharing every page of t by reference.
func (t *Table) Clone() Table {
	c := Table{pool: t.pool, pages: append(make([]*Page, 0, len(t.pages)), t.pages...)}
	for _, pg := range c.pages {
		t.pool.ref(pg)
	}
	return c
}

// Grow makes the table of a sequence of n positions ready for positions up
// to end: the page that position n falls in is copied first if it is
// shared (copy on write), and new pages are taken for the rest. On an
// error the pages taken are given back and the table is unchanged.
func (t *Table) Grow(n, end int) error {
	p := t.pool
	if at := n % PageTokens; at != 0 && end > n {
		i := n / PageTokens
		if old := t.pages[i]; p.isShared(old) {
			cp, err := p.take()
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
			t.pages[i] = cp
			p.release(old)
		}
	}
	for len(t.pages) < pagesFor(end) {
		pg, err := p.take()
		if err != nil {
			t.Trim(n)
			return err
		}
		t.pages = append(t.pages, pg)
	}
	return nil
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
}

// Write writes layer slot l's keys k and values v (rows of the slot's
// width, Shape.Dim) of positions from start on into the table's pages,
// which Grow made ready.
func (t *Table) Write(l, start int, k, v []float32) {
	kvd, dt := t.pool.shape.Dim(l), t.pool.shape.DType
	for r := 0; r < len(k)/kvd; {
		pos := start + r
		pg, at := t.pages[pos/PageTokens], pos%PageTokens
		cnt := min(PageTokens-at, len(k)/kvd-r)
		pg.k[l].Set(dt, kvd, at, k[r*kvd:(r+cnt)*kvd])
		pg.v[l].Set(dt, kvd, at, v[r*kvd:(r+cnt)*kvd])
		r += cnt
	}
}

// Span returns positions [start, end) of the table with conv, the conv
// state after end tokens: the span shares the table's pages.
func (t *Table) Span(start, end int, conv *ConvState) *Span {
	sp := &Span{shape: t.pool.shape, start: start, end: end, conv: conv, pool: t.pool}
	sp.pages = append([]*Page(nil), t.pages[start/PageTokens:pagesFor(end)]...)
	for _, pg := range sp.pages {
		t.pool.ref(pg)
	}
	return sp
}

// Extend appends a span's keys and values to the table of a sequence of n
// positions, the span's start. A span of the same pool starting at a
// multiple of PageTokens is shared by reference; otherwise its rows are
// copied into the table's own pages.
func (t *Table) Extend(n int, sp *Span) error {
	if sp.pool == t.pool && sp.pages != nil && n%PageTokens == 0 {
		for _, pg := range sp.pages {
			t.pool.ref(pg)
			t.pages = append(t.pages, pg)
		}
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
		for pos := sp.start; pos < sp.end; pos++ {
			sk, sv, from := sp.rows(l, pos)
			pg, at := t.pages[pos/PageTokens], pos%PageTokens
			pg.k[l].Copy(dt, kvd, at, sk, from, 1)
			pg.v[l].Copy(dt, kvd, at, sv, from, 1)
		}
	}
	return nil
}

// Pool returns the pool the table's pages come from.
func (t *Table) Pool() *Pool { return t.pool }

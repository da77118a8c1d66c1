package model

import (
	"fmt"
	"sync"

	"github.com/lfmq/lfmq/engine/config"
)

// KVPageTokens is the positions one KV page holds. It is attention's key
// block (attnBlock), so that no block attention reads crosses a page, and
// the prefix cache's block, so that a cached block is exactly one page.
const KVPageTokens = attnBlock

// kvPage holds KVPageTokens positions of every attention layer's keys and
// values. One page for all layers (rather than one per layer) keeps one
// page table per sequence and makes the pool's pages count tokens: a page
// is 64 tokens of KV state whatever the model's depth.
type kvPage struct {
	refs int32    // holders: page tables and spans; guarded by the pool's mu
	k, v []kvRows // per layer of the model; empty for conv layers
}

// KVPool is a pool of KV pages shared by the sequences and spans made
// from it. A sequence holds a page table; pages are taken from the pool as
// the sequence grows, never reallocated or grown, and given back to the
// pool's free list when the last holder lets go of them (Sequence.Free,
// Span.Free, Rewind). Clone, CopySpan and Extend share pages by reference
// count; a sequence about to write into a shared page copies it first
// (copy on write), so a page held by more than one holder is never
// written and every holder reads the values it wrote.
//
// A pool made with a bound refuses pages past it (*KVPoolError), after
// asking its reclaim function (SetReclaim) to free some: the server's pool
// is sized by --kv-pool-tokens and reclaims from the prefix cache. The
// model's own pool (the one NewSequence uses) has no bound and grows on
// demand, so that generate, score and tests need no sizing; a sequence
// dropped without Free there simply goes to the garbage collector with its
// pages (the pool keeps no reference to a page in use, so its Used count
// then stays high, which nothing relies on). Memory is allocated when a
// page is first taken, so a large bound costs nothing until used.
//
// A KVPool is safe for concurrent use.
type KVPool struct {
	m     *Model
	limit int // the most pages; 0: no bound

	mu      sync.Mutex
	free    []*kvPage
	used    int // pages with at least one holder
	shared  int // pages with more than one holder
	reclaim func() bool
}

// KVPoolError reports a bounded pool with no page left to take.
type KVPoolError struct {
	Pages int // the pool's bound
}

// Error implements error.
func (e *KVPoolError) Error() string {
	return fmt.Sprintf("model: the KV pool's %d pages (%d tokens) are all in use", e.Pages, e.Pages*KVPageTokens)
}

// NewKVPool returns an empty pool of the model's KV format that holds at
// most tokens positions, rounded up to whole pages; tokens 0 means no
// bound.
func (m *Model) NewKVPool(tokens int) *KVPool {
	return &KVPool{m: m, limit: (max(tokens, 0) + KVPageTokens - 1) / KVPageTokens}
}

// KVPool returns the model's own pool, which NewSequence and UnmarshalSpan
// use: unbounded, growing on demand.
func (m *Model) KVPool() *KVPool { return m.kvPool }

// SetReclaim sets the function the pool calls when a page is wanted and
// none is free below its bound: it frees what it can (such as a prefix
// cache's least recently used pages) and reports whether it freed
// anything; the pool asks again until a page is free or it reports false.
// It is called without the pool's lock held, from the goroutine taking the
// page.
func (p *KVPool) SetReclaim(f func() bool) {
	p.mu.Lock()
	p.reclaim = f
	p.mu.Unlock()
}

// KVPoolStats is a snapshot of a pool's pages.
type KVPoolStats struct {
	// Pages is the bound (0: none); Used the pages with a holder; Free
	// the pages that can be taken without passing the bound (for an
	// unbounded pool, the pages on its free list); Shared the pages with
	// more than one holder (held once, used by several).
	Pages, Used, Free, Shared int
	// PageBytes is one page's memory: KVPageTokens positions of every
	// attention layer's keys and values in the pool's format.
	PageBytes int
}

// Stats returns a snapshot of the pool's pages.
func (p *KVPool) Stats() KVPoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := KVPoolStats{Pages: p.limit, Used: p.used, Shared: p.shared, Free: len(p.free), PageBytes: p.PageBytes()}
	if p.limit > 0 {
		st.Free = p.limit - p.used
	}
	return st
}

// PageBytes returns one page's memory in the pool's KV format.
func (p *KVPool) PageBytes() int { return KVPageTokens * p.m.KVBytesPerToken() }

// take returns a page with one holder, from the free list or newly made,
// reclaiming when the bound is reached.
func (p *KVPool) take() (*kvPage, error) {
	for {
		p.mu.Lock()
		if n := len(p.free); n > 0 && (p.limit == 0 || p.used < p.limit) {
			pg := p.free[n-1]
			p.free = p.free[:n-1]
			pg.refs = 1
			p.used++
			p.mu.Unlock()
			return pg, nil
		}
		if p.limit == 0 || p.used < p.limit {
			p.used++
			p.mu.Unlock()
			return p.makePage(), nil
		}
		reclaim := p.reclaim
		p.mu.Unlock()
		if reclaim == nil || !reclaim() {
			return nil, &KVPoolError{Pages: p.limit}
		}
	}
}

// makePage allocates a page's rows for every attention layer.
func (p *KVPool) makePage() *kvPage {
	m := p.m
	kvd := m.Config.NumKVHeads * m.Config.HeadDim
	pg := &kvPage{refs: 1, k: make([]kvRows, m.Config.NumLayers), v: make([]kvRows, m.Config.NumLayers)}
	for l, k := range m.Config.LayerKinds {
		if k == config.Attention {
			pg.k[l] = makeKVRows(m.kvDType, kvd, KVPageTokens)
			pg.v[l] = makeKVRows(m.kvDType, kvd, KVPageTokens)
		}
	}
	return pg
}

// ref adds a holder to pg.
func (p *KVPool) ref(pg *kvPage) {
	p.mu.Lock()
	pg.refs++
	if pg.refs == 2 {
		p.shared++
	}
	p.mu.Unlock()
}

// release drops a holder of pg; the last one puts it on the free list.
func (p *KVPool) release(pg *kvPage) {
	p.mu.Lock()
	pg.refs--
	switch pg.refs {
	case 1:
		p.shared--
	case 0:
		p.used--
		p.free = append(p.free, pg)
	}
	p.mu.Unlock()
}

// isShared reports whether pg has more than one holder.
func (p *KVPool) isShared(pg *kvPage) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pg.refs > 1
}

// pagesFor returns the number of pages that hold positions [0, n).
func pagesFor(n int) int { return (n + KVPageTokens - 1) / KVPageTokens }

// growPages makes the sequence's page table ready for positions up to end:
// the page that position Len falls in is copied first if it is shared
// (copy on write), and new pages are taken for the rest. On an error the
// pages taken are given back and the sequence is unchanged.
func (s *Sequence) growPages(end int) error {
	p := s.pool
	if at := s.n % KVPageTokens; at != 0 && end > s.n {
		i := s.n / KVPageTokens
		if old := s.pages[i]; p.isShared(old) {
			cp, err := p.take()
			if err != nil {
				return err
			}
			kvd := s.shape.kvDim
			for l := range old.k {
				if !old.k[l].empty() {
					cp.k[l].copyRows(s.shape.kvDType, kvd, 0, &old.k[l], 0, at)
					cp.v[l].copyRows(s.shape.kvDType, kvd, 0, &old.v[l], 0, at)
				}
			}
			s.pages[i] = cp
			p.release(old)
		}
	}
	for len(s.pages) < pagesFor(end) {
		pg, err := p.take()
		if err != nil {
			s.trimPages(s.n)
			return err
		}
		s.pages = append(s.pages, pg)
	}
	return nil
}

// trimPages gives back the pages past those that hold positions [0, n).
func (s *Sequence) trimPages(n int) {
	keep := pagesFor(n)
	for i := keep; i < len(s.pages); i++ {
		s.pool.release(s.pages[i])
		s.pages[i] = nil
	}
	if keep < len(s.pages) {
		s.pages = s.pages[:keep]
	}
}

// writeKV writes layer l's keys k and values v (rows of the model's KV
// width) of positions from start on into the sequence's pages, which
// growPages made ready.
func (s *Sequence) writeKV(l, start int, k, v []float32) {
	kvd, t := s.shape.kvDim, s.shape.kvDType
	for r := 0; r < len(k)/kvd; {
		pos := start + r
		pg, at := s.pages[pos/KVPageTokens], pos%KVPageTokens
		cnt := min(KVPageTokens-at, len(k)/kvd-r)
		pg.k[l].setRows(t, kvd, at, k[r*kvd:(r+cnt)*kvd])
		pg.v[l].setRows(t, kvd, at, v[r*kvd:(r+cnt)*kvd])
		r += cnt
	}
}

// Free gives the sequence's pages back to its pool (those it alone held
// go to the free list) and leaves it empty: length 0, zero conv state. A
// server frees every sequence it ends so that its bounded pool does not
// run dry; elsewhere dropping a sequence is enough (see KVPool). A
// sequence on a device keeps its own storage there: Free does nothing.
func (s *Sequence) Free() {
	if s.dev != nil {
		return
	}
	s.trimPages(0)
	for _, l := range s.layers {
		clear(l.conv)
	}
	s.n = 0
	s.snaps = s.snaps[:0]
}

package kv

import (
	"fmt"
	"sync"

	"github.com/lfmq/lfmq/engine/config"
)

// PageTokens is the positions one KV page holds. It is the CPU attention's
// key block, so that no block attention reads crosses a page, and the
// prefix cache's block, so that a cached block is exactly one page.
const PageTokens = 64

// Shape is what a sequence's state depends on: a sequence, a span or a
// pool may be used with any model of the same shape. It is comparable.
type Shape struct {
	Layers, Hidden, ConvK, KVDim int
	// Kinds holds one byte per layer, '0'+its config.LayerKind.
	Kinds string
	DType DType
	// DraftLayers and DraftKVDim are an attached drafter's context keys
	// and values (docs/drafting.md §3): DraftLayers more KV layers of
	// DraftKVDim values per position, numbered Layers, Layers+1, … after
	// the model's own, kept in the same pages so that Clone, spans, the
	// prefix cache and Rewind carry them with the model's.
	DraftLayers, DraftKVDim int
}

// Attention reports whether layer l is one of the model's attention
// layers (false for a drafter's layer).
func (sh Shape) Attention(l int) bool {
	return l < sh.Layers && sh.Kinds[l] == byte('0'+config.Attention)
}

// KVLayers is the number of layer slots a page holds: the model's layers,
// then the drafter's.
func (sh Shape) KVLayers() int { return sh.Layers + sh.DraftLayers }

// HasKV reports whether layer slot l keeps keys and values: a model's
// attention layer or a drafter's layer.
func (sh Shape) HasKV(l int) bool { return l >= sh.Layers || sh.Attention(l) }

// Dim returns the values per position of layer slot l's keys (or values).
func (sh Shape) Dim(l int) int {
	if l >= sh.Layers {
		return sh.DraftKVDim
	}
	return sh.KVDim
}

// BytesPerToken is the KV state one position takes over all attention
// layers (a drafter's included).
func (sh Shape) BytesPerToken() int {
	n := 0
	for l := range sh.KVLayers() {
		if sh.HasKV(l) {
			n += 2 * sh.DType.RowBytes(sh.Dim(l))
		}
	}
	return n
}

// Page holds PageTokens positions of every attention layer's keys and
// values. One page for all layers (rather than one per layer) keeps one
// page table per sequence and makes the pool's pages count tokens: a page
// is 64 tokens of KV state whatever the model's depth.
type Page struct {
	refs int32  // holders: page tables and spans; guarded by the pool's mu
	k, v []Rows // per layer of the model; empty for conv layers
}

// K returns layer l's keys; V its values.
func (pg *Page) K(l int) *Rows { return &pg.k[l] }

// V returns layer l's values.
func (pg *Page) V(l int) *Rows { return &pg.v[l] }

// Pool is a pool of KV pages shared by the sequences and spans made
// from it. A sequence holds a page table; pages are taken from the pool as
// the sequence grows, never reallocated or grown, and given back to the
// pool's free list when the last holder lets go of them (Sequence.Free,
// Span.Free, Rewind). Clone, CopySpan and Extend share pages by reference
// count; a sequence about to write into a shared page copies it first
// (copy on write), so a page held by more than one holder is never
// written and every holder reads the values it wrote.
//
// A pool made with a bound refuses pages past it (*PoolError), after
// asking its reclaim function (SetReclaim) to free some: the server's pool
// is sized by --kv-pool-tokens and reclaims from the prefix cache. A
// model's own pool (the one its NewSequence uses) has no bound and grows
// on demand, so that generate, score and tests need no sizing; a sequence
// dropped without Free there simply goes to the garbage collector with its
// pages (the pool keeps no reference to a page in use, so its Used count
// then stays high, which nothing relies on). Memory is allocated when a
// page is first taken, so a large bound costs nothing until used.
//
// A Pool is safe for concurrent use.
type Pool struct {
	shape Shape
	limit int // the most pages; 0: no bound

	mu      sync.Mutex
	free    []*Page
	used    int // pages with at least one holder
	shared  int // pages with more than one holder
	reclaim func() bool
}

// PoolError reports a bounded pool with no page left to take.
type PoolError struct {
	Pages int // the pool's bound
}

// Error implements error.
func (e *PoolError) Error() string {
	return fmt.Sprintf("model: the KV pool's %d pages (%d tokens) are all in use", e.Pages, e.Pages*PageTokens)
}

// NewPool returns an empty pool of pages for sequences of shape sh that
// holds at most tokens positions, rounded up to whole pages; tokens 0
// means no bound.
func NewPool(sh Shape, tokens int) *Pool {
	return &Pool{shape: sh, limit: (max(tokens, 0) + PageTokens - 1) / PageTokens}
}

// Shape returns the shape of the pool's pages.
func (p *Pool) Shape() Shape { return p.shape }

// SetReclaim sets the function the pool calls when a page is wanted and
// none is free below its bound: it frees what it can (such as a prefix
// cache's least recently used pages) and reports whether it freed
// anything; the pool asks again until a page is free or it reports false.
// It is called without the pool's lock held, from the goroutine taking the
// page.
func (p *Pool) SetReclaim(f func() bool) {
	p.mu.Lock()
	p.reclaim = f
	p.mu.Unlock()
}

// PoolStats is a snapshot of a pool's pages.
type PoolStats struct {
	// Pages is the bound (0: none); Used the pages with a holder; Free
	// the pages that can be taken without passing the bound (for an
	// unbounded pool, the pages on its free list); Shared the pages with
	// more than one holder (held once, used by several).
	Pages, Used, Free, Shared int
	// PageBytes is one page's memory: PageTokens positions of every
	// attention layer's keys and values in the pool's format.
	PageBytes int
}

// Stats returns a snapshot of the pool's pages.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PoolStats{Pages: p.limit, Used: p.used, Shared: p.shared, Free: len(p.free), PageBytes: p.PageBytes()}
	if p.limit > 0 {
		st.Free = p.limit - p.used
	}
	return st
}

// PageBytes returns one page's memory in the pool's KV format.
func (p *Pool) PageBytes() int { return PageTokens * p.shape.BytesPerToken() }

// take returns a page with one holder, from the free list or newly made,
// reclaiming when the bound is reached.
func (p *Pool) take() (*Page, error) {
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
			return nil, &PoolError{Pages: p.limit}
		}
	}
}

// makePage allocates a page's rows for every attention layer, a
// drafter's included.
func (p *Pool) makePage() *Page {
	sh := p.shape
	pg := &Page{refs: 1, k: make([]Rows, sh.KVLayers()), v: make([]Rows, sh.KVLayers())}
	for l := range sh.KVLayers() {
		if sh.HasKV(l) {
			pg.k[l] = MakeRows(sh.DType, sh.Dim(l), PageTokens)
			pg.v[l] = MakeRows(sh.DType, sh.Dim(l), PageTokens)
		}
	}
	return pg
}

// ref adds a holder to pg.
func (p *Pool) ref(pg *Page) {
	p.mu.Lock()
	pg.refs++
	if pg.refs == 2 {
		p.shared++
	}
	p.mu.Unlock()
}

// release drops a holder of pg; the last one puts it on the free list.
func (p *Pool) release(pg *Page) {
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
func (p *Pool) isShared(pg *Page) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pg.refs > 1
}

// pagesFor returns the number of pages that hold positions [0, n).
func pagesFor(n int) int { return (n + PageTokens - 1) / PageTokens }

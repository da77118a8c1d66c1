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
	// Kinds holds one byte per layer, '0'+its config.LayerKind, or
	// SlidingKind for an attention layer of window Window.
	Kinds string
	// Window is the sliding layers' window (config.SlidingWindow): a
	// query at p reads their positions from max(0, p−Window+1) on. 0 when
	// no layer slides.
	Window int
	DType  DType
	// DraftLayers and DraftKVDim are an attached drafter's context keys
	// and values (docs/drafting.md §3): DraftLayers more KV layers of
	// DraftKVDim values per position, numbered Layers, Layers+1, … after
	// the model's own, kept in the same pages so that Clone, spans, the
	// prefix cache and Rewind carry them with the model's.
	DraftLayers, DraftKVDim int
}

// SlidingKind marks a sliding-window attention layer in Shape.Kinds.
const SlidingKind = 's'

// WindowSlack is the positions before the window of a sequence's length
// whose sliding-layer keys and values it keeps (Table.Grow): a Rewind of
// up to WindowSlack positions before the length a forward started from
// stays exact. The engine's rewinds go back to that length or later
// (speculation's verification, the drafter's cost measurement), so one
// page is margin, not need. See docs/kv-cache.md, "Sliding layers".
const WindowSlack = PageTokens

// Attention reports whether layer l is one of the model's attention
// layers, sliding or not (false for a drafter's layer).
func (sh Shape) Attention(l int) bool {
	return l < sh.Layers && (sh.Kinds[l] == byte('0'+config.Attention) || sh.Kinds[l] == SlidingKind)
}

// Sliding reports whether layer slot l is a sliding-window attention
// layer, whose keys and values live in window pages.
func (sh Shape) Sliding(l int) bool { return l < sh.Layers && sh.Kinds[l] == SlidingKind }

// HasWindow reports whether some layer slides: the shape's sequences then
// hold window pages beside their full pages.
func (sh Shape) HasWindow() bool {
	for l := range sh.Layers {
		if sh.Sliding(l) {
			return true
		}
	}
	return false
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
// layers (a drafter's included): what a span stores of each position.
func (sh Shape) BytesPerToken() int { return sh.FullBytesPerToken() + sh.WindowBytesPerToken() }

// FullBytesPerToken is the KV state one position takes in full pages:
// the attention layers that do not slide and a drafter's.
func (sh Shape) FullBytesPerToken() int { return sh.kindBytes(false) }

// WindowBytesPerToken is the KV state one position takes in window pages:
// the sliding layers' (0 when none slides).
func (sh Shape) WindowBytesPerToken() int { return sh.kindBytes(true) }

func (sh Shape) kindBytes(window bool) int {
	n := 0
	for l := range sh.KVLayers() {
		if sh.HasKV(l) && sh.Sliding(l) == window {
			n += 2 * sh.DType.RowBytes(sh.Dim(l))
		}
	}
	return n
}

// WindowPages is the most window pages a sequence of the shape holds
// while a forward adds up to step tokens to it, whatever its length: the
// pages of the positions from the window start of its length less
// WindowSlack to its new end (Table.Grow), (Window−1+WindowSlack+step)
// positions, on at most one more page than they fill. 0 when no layer
// slides.
func (sh Shape) WindowPages(step int) int {
	if !sh.HasWindow() {
		return 0
	}
	return pagesFor(sh.Window-1+WindowSlack+max(step, 1)) + 1
}

// Page holds PageTokens positions of keys and values of one of the two
// kinds of page: a full page holds every attention layer that does not
// slide and a drafter's layer slots, a window page every sliding layer
// (Shape.Sliding). One page for all the layers of a kind (rather than one
// per layer) keeps one page table per sequence and makes the pool's full
// pages count tokens: a full page is 64 tokens of KV state whatever the
// model's depth. Window pages are kept apart so that a sequence can give
// back those wholly before its window while it keeps its full pages
// (Table.Grow); a model with no sliding layer has none.
type Page struct {
	refs int32  // holders: page tables and spans; guarded by the pool's mu
	win  bool   // a window page
	k, v []Rows // per layer slot; empty for conv layers and the other kind's
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
	kinds   [2]pageCount // full pages, window pages
	reclaim func() bool
}

// pageCount is one kind of page's free list and counts.
type pageCount struct {
	list   []*Page
	used   int // pages with at least one holder
	shared int // pages with more than one holder
}

// PoolError reports a bounded pool with no page left to take.
type PoolError struct {
	Pages  int  // the pool's bound
	Window bool // the page wanted was a window page
}

// Error implements error.
func (e *PoolError) Error() string {
	if e.Window {
		return fmt.Sprintf("model: the KV pool's %d window pages are all in use", e.Pages)
	}
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
	// Pages is the bound (0: none) in full pages; Used the full pages
	// with a holder; Free the full pages that can be taken without
	// passing the bound (for an unbounded pool, the full pages on its
	// free list); Shared the full pages with more than one holder (held
	// once, used by several).
	Pages, Used, Free, Shared int
	// PageBytes is one full page's memory: PageTokens positions of the
	// keys and values of every attention layer that does not slide (and
	// a drafter's) in the pool's format.
	PageBytes int
	// WindowUsed and WindowShared count the window pages (the sliding
	// layers') as Used and Shared count full pages; WindowPageBytes is
	// one window page's memory, 0 when no layer slides. A pool holds no
	// more window pages than full pages (each window page of a holder
	// sits beside a full page of the same positions that it alone among
	// window pages is paired with), so its bound in full pages bounds
	// its memory at Pages·(PageBytes+WindowPageBytes).
	WindowUsed, WindowShared, WindowPageBytes int
}

// Stats returns a snapshot of the pool's pages.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, w := &p.kinds[0], &p.kinds[1]
	st := PoolStats{Pages: p.limit, Used: f.used, Shared: f.shared, Free: len(f.list), PageBytes: p.PageBytes(),
		WindowUsed: w.used, WindowShared: w.shared, WindowPageBytes: p.WindowPageBytes()}
	if p.limit > 0 {
		st.Free = p.limit - f.used
	}
	return st
}

// PageBytes returns one full page's memory in the pool's KV format.
func (p *Pool) PageBytes() int { return PageTokens * p.shape.FullBytesPerToken() }

// WindowPageBytes returns one window page's memory in the pool's KV
// format (0 when no layer slides).
func (p *Pool) WindowPageBytes() int { return PageTokens * p.shape.WindowBytesPerToken() }

// take returns a page of the kind asked for (a window page when win) with
// one holder, from the free list or newly made, reclaiming when the bound
// is reached. The bound counts full and window pages apart: a holder
// takes a window page only beside a full page of the same positions, so
// the window pages within it never refuse where the full pages did not.
func (p *Pool) take(win bool) (*Page, error) {
	c := &p.kinds[0]
	if win {
		c = &p.kinds[1]
	}
	for {
		p.mu.Lock()
		if n := len(c.list); n > 0 && (p.limit == 0 || c.used < p.limit) {
			pg := c.list[n-1]
			c.list = c.list[:n-1]
			pg.refs = 1
			c.used++
			p.mu.Unlock()
			return pg, nil
		}
		if p.limit == 0 || c.used < p.limit {
			c.used++
			p.mu.Unlock()
			return p.makePage(win), nil
		}
		reclaim := p.reclaim
		p.mu.Unlock()
		if reclaim == nil || !reclaim() {
			return nil, &PoolError{Pages: p.limit, Window: win}
		}
	}
}

// makePage allocates a page's rows for every layer slot of its kind: the
// sliding layers for a window page, the other attention layers and a
// drafter's for a full page.
func (p *Pool) makePage(win bool) *Page {
	sh := p.shape
	pg := &Page{refs: 1, win: win, k: make([]Rows, sh.KVLayers()), v: make([]Rows, sh.KVLayers())}
	for l := range sh.KVLayers() {
		if sh.HasKV(l) && sh.Sliding(l) == win {
			pg.k[l] = MakeRows(sh.DType, sh.Dim(l), PageTokens)
			pg.v[l] = MakeRows(sh.DType, sh.Dim(l), PageTokens)
		}
	}
	return pg
}

// count returns the counts of pg's kind; called with p.mu held.
func (p *Pool) count(pg *Page) *pageCount {
	if pg.win {
		return &p.kinds[1]
	}
	return &p.kinds[0]
}

// ref adds a holder to pg.
func (p *Pool) ref(pg *Page) {
	p.mu.Lock()
	pg.refs++
	if pg.refs == 2 {
		p.count(pg).shared++
	}
	p.mu.Unlock()
}

// release drops a holder of pg; the last one puts it on its kind's free
// list.
func (p *Pool) release(pg *Page) {
	p.mu.Lock()
	c := p.count(pg)
	pg.refs--
	switch pg.refs {
	case 1:
		c.shared--
	case 0:
		c.used--
		c.list = append(c.list, pg)
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

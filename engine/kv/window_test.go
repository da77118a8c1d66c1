package kv

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// slide is the byte of a sliding layer in Shape.Kinds.
const slide = string(rune(SlidingKind))

// windowShape is a model of a conv layer, a sliding layer, a full
// attention layer and another sliding layer (KV rows of 16 values), window
// w, with a drafter of one layer of 32 values when draft: the drafter's
// slot sits in the full pages.
func windowShape(dt DType, w int, draft bool) Shape {
	sh := Shape{Layers: 4, Hidden: 4, ConvK: 3, KVDim: 16, Kinds: conv + slide + attn + slide, Window: w, DType: dt}
	if draft {
		sh.DraftLayers, sh.DraftKVDim = 1, 32
	}
	return sh
}

// heldWindow returns the window pages t holds and the first position they
// hold.
func heldWindow(t *Table) (pages, first int) {
	first = -1
	for i, pg := range t.Window() {
		if pg != nil {
			if first < 0 {
				first = i * PageTokens
			}
			pages++
		}
	}
	return pages, first
}

// checkTable reports the first position whose stored keys or values are
// not seed's: every full-page slot over [from, to), every sliding layer
// over [max(from, winFrom), to).
func checkTable(t *testing.T, what string, tb *Table, sh Shape, seed, from, to, winFrom int) {
	t.Helper()
	for l := range sh.KVLayers() {
		if !sh.HasKV(l) {
			continue
		}
		lo := from
		if sh.Sliding(l) {
			lo = max(from, winFrom)
		}
		pages := tb.PagesOf(l)
		for pos := lo; pos < to; pos++ {
			checkRow(t, what, pages[pos/PageTokens], sh, seed, l, pos)
		}
	}
}

// TestWindowPagesConstant: a sequence's window pages are the same number
// at 1,000 and at 100,000 positions, grown by the same steps, and within
// Shape.WindowPages; its full pages are one per 64 positions; the pool's
// counts agree with the table. A model with no sliding layer has no window
// page at all and the pages it had before window pages existed.
func TestWindowPagesConstant(t *testing.T) {
	cases := []struct {
		name   string
		sh     Shape
		window int
		step   int
	}{
		{"decode W32", windowShape(F32, 32, false), 32, 1},
		{"chunk7 W32", windowShape(BF16, 32, true), 32, 7},
		{"decode W256", windowShape(BFP8, 256, false), 256, 1},
		{"chunk512 W256", windowShape(F32, 256, true), 256, 512},
		{"no sliding layer", Shape{Layers: 3, Hidden: 4, ConvK: 3, KVDim: 16, Kinds: conv + attn + attn}, 0, 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewPool(c.sh, 0)
			tb := NewTable(p)
			n := 0
			grow := func(to int) (winPages int) {
				for n < to {
					end := min(n+c.step, to)
					if err := tb.Grow(n, end); err != nil {
						t.Fatal(err)
					}
					n = end
				}
				winPages, first := heldWindow(&tb)
				if got, want := len(tb.Pages()), pagesFor(n); got != want {
					t.Fatalf("%d positions: %d full pages, want %d", n, got, want)
				}
				st := p.Stats()
				if st.Used != len(tb.Pages()) || st.WindowUsed != winPages {
					t.Fatalf("%d positions: the pool counts %d full and %d window pages in use; the table holds %d and %d", n, st.Used, st.WindowUsed, len(tb.Pages()), winPages)
				}
				if c.window == 0 {
					if tb.Window() != nil || st.WindowPageBytes != 0 || st.PageBytes != PageTokens*c.sh.BytesPerToken() {
						t.Fatalf("no sliding layer: window pages %v, window page bytes %d, page bytes %d (want %d)", tb.Window(), st.WindowPageBytes, st.PageBytes, PageTokens*c.sh.BytesPerToken())
					}
					return 0
				}
				// Every position a query at the last Grow's start, less
				// WindowSlack, reads is held, and no page before them.
				if want := max(0, n-c.step-WindowSlack-c.window+1) / PageTokens * PageTokens; first != want {
					t.Fatalf("%d positions: window pages held from %d, want %d", n, first, want)
				}
				if winPages > c.sh.WindowPages(c.step) {
					t.Fatalf("%d positions: %d window pages, more than WindowPages(%d) = %d", n, winPages, c.step, c.sh.WindowPages(c.step))
				}
				return winPages
			}
			// Both lengths are multiples of the step and of a page, so
			// that the same steps end at the same place in a page.
			L := PageTokens * c.step
			for L%c.step == 0 && (L/2)%PageTokens == 0 && (L/2)%c.step == 0 {
				L /= 2
			}
			at1k, at100k := (1000+L-1)/L*L, (100000+L-1)/L*L
			w1 := grow(at1k)
			w2 := grow(at100k)
			if w1 != w2 {
				t.Fatalf("window pages: %d at %d positions, %d at %d", w1, at1k, w2, at100k)
			}
			t.Logf("%d window pages at %d and %d positions; %d full pages at %d", w1, at1k, at100k, len(tb.Pages()), n)
			tb.Trim(0)
			if st := p.Stats(); st.Used != 0 || st.WindowUsed != 0 || st.Shared != 0 || st.WindowShared != 0 {
				t.Fatalf("after Trim(0): %+v", st)
			}
		})
	}
}

// TestWindowRewindAndSpan: what a sequence still holds of its sliding
// layers is exact (read back as written, after copy on write by a clone
// that grows past a window); Rewind and Span that need positions whose
// window pages were given back fail with a *WindowError and change
// nothing, while those the slack covers succeed; Extend from spans shares
// their window pages and then gives back its own early ones while the
// spans keep theirs.
func TestWindowRewindAndSpan(t *testing.T) {
	for _, dt := range DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			const W = 32
			sh := windowShape(dt, W, true)
			p := NewPool(sh, 0)
			a := NewTable(p)
			n := 0
			for n < 300 { // decode-sized and chunk-sized forwards
				end := n + 1 + n%37
				if err := a.Grow(n, end); err != nil {
					t.Fatal(err)
				}
				writeAll(&a, sh, 1, n, end)
				n = end
			}
			_, first := heldWindow(&a)
			checkTable(t, "grown", &a, sh, 1, 0, n, first)
			if first == 0 {
				t.Fatalf("%d positions, window %d: no window page given back", n, W)
			}

			// Spans of whole pages the table holds, and a sequence
			// extended with them.
			from, upTo := first, n/PageTokens*PageTokens
			if upTo-from < 2*PageTokens {
				t.Fatalf("window pages held from %d at %d positions: fewer than two whole pages to span", from, n)
			}
			var spans []*Span
			for s := from; s < upTo; s += PageTokens {
				sp, err := a.Span(s, s+PageTokens, nil)
				if err != nil {
					t.Fatalf("Span [%d, %d): %v", s, s+PageTokens, err)
				}
				spans = append(spans, sp)
			}
			// A clone shares; growing both copies the shared last page
			// (full and window) and each keeps what it wrote.
			b := a.Clone()
			if err := b.Grow(n, n+100); err != nil {
				t.Fatal(err)
			}
			writeAll(&b, sh, 2, n, n+100)
			if err := a.Grow(n, n+5); err != nil {
				t.Fatal(err)
			}
			writeAll(&a, sh, 3, n, n+5)
			_, first = heldWindow(&a)
			_, fb := heldWindow(&b)
			checkTable(t, "clone, old positions", &b, sh, 1, 0, n, fb)
			checkTable(t, "clone, its own", &b, sh, 2, n, n+100, fb)
			checkTable(t, "original after the clone grew", &a, sh, 1, 0, n, first)
			checkTable(t, "original, its own", &a, sh, 3, n, n+5, first)

			// Rewinds: within the slack of the last Grow's start, exact;
			// further, refused with the table unchanged.
			before := len(a.Pages())
			var we *WindowError
			if err := a.Rewind(first + W - 2); !errors.As(err, &we) || we.What != "Rewind" || we.Held != first {
				t.Fatalf("Rewind to %d (window pages from %d): %v, want a *WindowError", first+W-2, first, err)
			}
			if len(a.Pages()) != before {
				t.Fatalf("a refused Rewind changed the table")
			}
			if _, err := a.Span(first-PageTokens, first+1, nil); !errors.As(err, &we) || we.What != "Span" {
				t.Fatalf("Span before the window pages held: %v, want a *WindowError", err)
			}
			back := n - WindowSlack
			if err := a.Rewind(back); err != nil {
				t.Fatalf("Rewind to %d, WindowSlack before the last Grow's start %d: %v", back, n, err)
			}
			checkTable(t, "rewound", &a, sh, 1, 0, back, first)

			c := NewTable(p)
			if err := c.Grow(0, from); err != nil {
				t.Fatal(err)
			}
			writeAll(&c, sh, 1, 0, from)
			for _, sp := range spans {
				if err := c.Extend(sp.Start(), sp); err != nil {
					t.Fatal(err)
				}
			}
			_, fc := heldWindow(&c)
			if want := max(0, upTo-WindowSlack-W+1) / PageTokens * PageTokens; fc != want {
				t.Fatalf("extended to %d: window pages from %d, want %d", upTo, fc, want)
			}
			checkTable(t, "extended", &c, sh, 1, 0, upTo, fc)
			for _, sp := range spans {
				for l := range sh.Layers {
					if sh.Sliding(l) {
						k, _, at := sp.rows(l, sp.Start())
						if got, want := k.AppendRaw(nil, dt, sh.Dim(l), at, 1), encoded(dt, rowOf(sh, 1, l, sp.Start(), false)); !bytes.Equal(got, want) {
							t.Fatalf("span [%d, %d) lost its window rows", sp.Start(), sp.End())
						}
					}
				}
				sp.Free()
			}
			for _, tb := range []*Table{&a, &b, &c} {
				tb.Trim(0)
			}
			if st := p.Stats(); st.Used != 0 || st.WindowUsed != 0 || st.Shared != 0 || st.WindowShared != 0 {
				t.Fatalf("after every holder let go: %+v", st)
			}
		})
	}
}

// TestWindowPoolBound: whatever tables and spans do (grow, clone, span,
// extend, rewind, trim), a pool never holds more window pages than full
// pages, so that a bound in full pages bounds both (PoolStats) and a
// window page is never refused where its full page was not.
func TestWindowPoolBound(t *testing.T) {
	for seed := range uint64(8) {
		sh := windowShape(F32, 40, false)
		const limit = 40
		p := NewPool(sh, limit*PageTokens)
		type seq struct {
			tb Table
			n  int
		}
		var seqs []*seq
		var spans []*Span
		r := rand.New(rand.NewPCG(seed, 1))
		for step := range 3000 {
			switch op := r.IntN(10); {
			case op < 1 || len(seqs) == 0:
				seqs = append(seqs, &seq{tb: NewTable(p)})
			case op < 5:
				s := seqs[r.IntN(len(seqs))]
				end := s.n + 1 + r.IntN(100)
				err := s.tb.Grow(s.n, end)
				var pe *PoolError
				switch {
				case errors.As(err, &pe) && pe.Window:
					t.Fatalf("seed %d step %d: a window page refused where the full pages were not: %v (%+v)", seed, step, err, p.Stats())
				case err == nil:
					s.n = end
				}
			case op < 6:
				s := seqs[r.IntN(len(seqs))]
				seqs = append(seqs, &seq{tb: s.tb.Clone(), n: s.n})
			case op < 7 && len(seqs) > 0:
				s := seqs[r.IntN(len(seqs))]
				if s.n >= PageTokens {
					b := r.IntN(s.n / PageTokens)
					if sp, err := s.tb.Span(b*PageTokens, (b+1)*PageTokens, nil); err == nil {
						spans = append(spans, sp)
					}
				}
			case op < 8 && len(spans) > 0:
				sp := spans[r.IntN(len(spans))]
				c := &seq{tb: NewTable(p)}
				if err := c.tb.Grow(0, sp.Start()); err == nil {
					c.n = sp.Start()
					if err := c.tb.Extend(sp.Start(), sp); err == nil {
						c.n = sp.End()
					}
				}
				seqs = append(seqs, c)
			case op < 9:
				s := seqs[r.IntN(len(seqs))]
				back := max(0, s.n-r.IntN(2*WindowSlack))
				if s.tb.Rewind(back) == nil {
					s.n = back
				}
			default:
				i := r.IntN(len(seqs))
				seqs[i].tb.Trim(0)
				seqs = append(seqs[:i], seqs[i+1:]...)
				if len(spans) > 0 && r.IntN(2) == 0 {
					j := r.IntN(len(spans))
					spans[j].Free()
					spans = append(spans[:j], spans[j+1:]...)
				}
			}
			if st := p.Stats(); st.WindowUsed > st.Used || st.Used > limit {
				t.Fatalf("seed %d step %d: %d window pages, %d full pages (bound %d)", seed, step, st.WindowUsed, st.Used, limit)
			}
		}
	}
}

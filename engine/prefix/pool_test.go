package prefix

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// TestSharedPrefixHeldOnce counts a bounded pool's pages while a 3-block
// prefix is cached and used by several sequences (prefix cache hits and
// Clone): the prefix is held once, each sequence adds only its own pages,
// copy on write gives every sequence the logits of one that was fed its
// whole text from scratch, and the pages go back to the free list as the
// sequences end and the cache evicts. It runs for every KV format.
func TestSharedPrefixHeldOnce(t *testing.T) {
	for _, dt := range kv.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			m, err := load.Load("../../testdata/tiny-lfm2-moe/model", load.Options{KVCacheDType: dt})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			testSharedPrefix(t, m)
		})
	}
}

func testSharedPrefix(t *testing.T, m *model.Model) {
	const limit = 12 // pages
	ctx := context.Background()
	pool := m.NewKVPool(limit * BlockSize)
	text := make([]int, 8*BlockSize)
	for i := range text {
		text[i] = 40 + (i*37)%3000
	}
	pages := func(what string, used, shared int) {
		t.Helper()
		st := pool.Stats()
		if st.Used != used || st.Shared != shared || st.Free != limit-used {
			t.Fatalf("%s: pages used %d, shared %d, free %d; want %d, %d, %d", what, st.Used, st.Shared, st.Free, used, shared, limit-used)
		}
	}
	feed := func(s *model.Sequence, ids []int) []float32 {
		t.Helper()
		out, err := m.Forward(ctx, []*model.Sequence{s}, [][]int{ids}, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	// fresh is the logits after ids fed to a sequence of its own pool,
	// in one call: what a shared sequence must reproduce bit for bit.
	fresh := func(ids []int) []float32 {
		s := m.NewSequence()
		out, err := m.Forward(ctx, []*model.Sequence{s}, [][]int{ids}, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	same := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: logit %d is %g, a sequence fed from scratch gives %g", what, i, got[i], want[i])
			}
		}
	}

	// A: the prefix and 10 more tokens (4 pages); its 3 blocks go to the
	// cache by reference.
	a := pool.NewSequence()
	if _, err := m.Forward(ctx, []*model.Sequence{a}, [][]int{text[:3*BlockSize+10]}, model.ForwardOptions{ConvSnapshots: [][]int{{BlockSize, 2 * BlockSize, 3 * BlockSize}}}); err != nil {
		t.Fatal(err)
	}
	pages("A fed", 4, 0)
	keys := Keys("m", "", text, 3)
	c := New()
	pool.SetReclaim(c.Reclaim)
	for b := range 3 {
		conv, _ := a.ConvAt((b + 1) * BlockSize)
		sp, err := a.CopySpan(b*BlockSize, (b+1)*BlockSize, conv)
		if err != nil {
			t.Fatal(err)
		}
		c.Insert(keys[b], sp)
	}
	pages("A's prefix cached", 4, 3)
	a.Free()
	pages("A ended", 3, 0)

	// B resumes the prefix from the cache, then diverges from A.
	b := pool.NewSequence()
	for _, sp := range c.Lookup(keys) {
		if err := b.Extend(sp); err != nil {
			t.Fatal(err)
		}
	}
	pages("B resumed", 3, 3)
	bText := append(append([]int(nil), text[:3*BlockSize]...), 900, 901, 902, 903, 904)
	feed(b, bText[3*BlockSize:])
	pages("B fed", 4, 3)

	// C clones B (its partial page too), then both continue differently:
	// the first write into the shared partial page copies it.
	cs := b.Clone()
	pages("C cloned", 4, 4)
	cText := append(append([]int(nil), bText...), 1500, 1501)
	same("C after copy on write", feed(cs, cText[len(bText):]), fresh(cText))
	pages("C fed", 5, 3)
	bText = append(bText, 700)
	same("B after C wrote", feed(b, bText[len(bText)-1:]), fresh(bText))
	pages("B fed again", 5, 3)

	// D clones C and grows past two more pages: 3 shared + B's 1 + C's 1
	// + D's 3.
	d := cs.Clone()
	dText := append(append([]int(nil), cText...), text[4*BlockSize:6*BlockSize]...)
	same("D", feed(d, dText[len(cText):]), fresh(dText))
	pages("D fed", 8, 3)

	// The pool's bound: 4 more pages fit; a fifth reclaims nothing (every
	// cached block is in use) and the Forward fails, leaving E unchanged.
	e := pool.NewSequence()
	var pe *kv.PoolError
	if _, err := m.Forward(ctx, []*model.Sequence{e}, [][]int{text[:5*BlockSize]}, model.ForwardOptions{}); !errors.As(err, &pe) || e.Len() != 0 {
		t.Fatalf("5 pages from a pool with 4 free: %v, E holds %d tokens", err, e.Len())
	}
	pages("E refused", 8, 3)

	// Sequences end: their own pages return; the cache keeps the prefix.
	for _, s := range []*model.Sequence{b, cs, d} {
		s.Free()
	}
	pages("B, C, D ended", 3, 0)
	// Now E's 5 pages fit beside the cache's 3 without evicting...
	feed(e, text[:5*BlockSize])
	pages("E fed", 8, 0)
	// ...but 5 more need the least recently used block's page back.
	f := pool.NewSequence()
	feed(f, text[:4*BlockSize+1])
	pages("F fed", 12, 0)
	if c.Blocks() != 2 || c.Has(keys[0]) {
		t.Fatalf("after reclaiming one page: %d blocks cached, block 0 cached %v", c.Blocks(), c.Has(keys[0]))
	}
	e.Free()
	f.Free()
	c.Clear()
	pages("all ended and evicted", 0, 0)
	if st := pool.Stats(); st.PageBytes != BlockSize*m.KVBytesPerToken() {
		t.Fatalf("page bytes %d, want %d", st.PageBytes, BlockSize*m.KVBytesPerToken())
	}
}

// TestBlockIsPage: a cached block is exactly one KV page.
func TestBlockIsPage(t *testing.T) {
	if BlockSize != kv.PageTokens {
		t.Fatal(fmt.Sprintf("BlockSize %d, KV page %d tokens", BlockSize, kv.PageTokens))
	}
}

package prefix

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

func TestKeys(t *testing.T) {
	ids := make([]int, 3*BlockSize)
	for i := range ids {
		ids[i] = i
	}
	a := Keys("m", "", ids, 3)
	b := Keys("m", "", ids[:2*BlockSize], 2)
	if a[0] != b[0] || a[1] != b[1] {
		t.Error("a prefix's keys differ")
	}
	if Keys("other", "", ids, 1)[0] == a[0] || Keys("m", "salt", ids, 1)[0] == a[0] {
		t.Error("identity and salt must change the first key")
	}
	ids2 := append([]int(nil), ids...)
	ids2[5] = 99999
	c := Keys("m", "", ids2, 3)
	if c[0] == a[0] || c[1] == a[1] || c[2] == a[2] {
		t.Error("a changed token in block 0 must change every later key")
	}
	// The salt enters the first block only, through the chain.
	if Next(&a[0], "m", "salt", ids[BlockSize:2*BlockSize]) != a[1] {
		t.Error("the salt entered a later block")
	}
}

// TestCacheLRU: lookup returns the longest cached run from the start and
// refreshes it; shrinking evicts the least recently used.
func TestCacheLRU(t *testing.T) {
	m, err := load.Load("../../testdata/tiny-lfm2-moe/model", load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := make([]int, 4*BlockSize)
	for i := range ids {
		ids[i] = 300 + i
	}
	s := m.NewSequence()
	if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{ids}, model.ForwardOptions{Logits: model.NoLogits, ConvSnapshots: [][]int{{64, 128, 192, 256}}}); err != nil {
		t.Fatal(err)
	}
	keys := Keys("m", "", ids, 4)
	c := New()
	for b := range 4 {
		conv, _ := s.ConvAt((b + 1) * BlockSize)
		sp, err := s.CopySpan(b*BlockSize, (b+1)*BlockSize, conv)
		if err != nil {
			t.Fatal(err)
		}
		c.Insert(keys[b], sp)
		dup, _ := s.CopySpan(b*BlockSize, (b+1)*BlockSize, conv)
		c.Insert(keys[b], dup) // twice: counted once, the second span freed
	}
	if c.Tokens() != 4*BlockSize || c.Blocks() != 4 {
		t.Fatalf("%d tokens in %d blocks", c.Tokens(), c.Blocks())
	}
	if got := c.Lookup([]Key{keys[0], keys[1], {}, keys[3]}); len(got) != 2 {
		t.Errorf("lookup stopped after %d blocks, want 2 (the third key is absent)", len(got))
	}
	// Blocks 0 and 1 were used last: shrinking to two blocks keeps them.
	c.Shrink(2 * BlockSize)
	if !c.Has(keys[0]) || !c.Has(keys[1]) || c.Has(keys[2]) || c.Has(keys[3]) {
		t.Error("LRU eviction removed the wrong blocks")
	}
	if !c.Shrink(0) || c.Tokens() != 0 || c.Blocks() != 0 {
		t.Error("Shrink(0) left blocks")
	}
}

// threeBlocks loads the tiny model (closed when t ends) and runs a
// sequence over three blocks of ids from first on, with conv snapshots at
// the block ends; it returns the model, the sequence and the blocks' keys
// under identity "m".
func threeBlocks(t *testing.T, first int) (*model.Model, *model.Sequence, []Key) {
	t.Helper()
	m, err := load.Load("../../testdata/tiny-lfm2-moe/model", load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ids := make([]int, 3*BlockSize)
	for i := range ids {
		ids[i] = first + i
	}
	s := m.NewSequence()
	if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{ids}, model.ForwardOptions{Logits: model.NoLogits, ConvSnapshots: [][]int{{64, 128, 192}}}); err != nil {
		t.Fatal(err)
	}
	return m, s, Keys("m", "", ids, 3)
}

// TestSaveLoad: a saved cache loads back with the same blocks and recency
// under the same header, loads nothing under another identity or runtime,
// and a corrupt file is an error.
func TestSaveLoad(t *testing.T) {
	m, s, keys := threeBlocks(t, 500)
	c := New()
	for b := range 3 {
		conv, _ := s.ConvAt((b + 1) * BlockSize)
		sp, _ := s.CopySpan(b*BlockSize, (b+1)*BlockSize, conv)
		c.Insert(keys[b], sp)
	}
	c.Lookup(keys[:1]) // block 0 becomes the most recent
	path := filepath.Join(t.TempDir(), FileName)
	h := Header{Identity: "m", Runtime: "r1"}
	if err := c.Save(path, h); err != nil {
		t.Fatal(err)
	}
	d := New()
	if n, err := d.Load(path, h, m, 1<<20); err != nil || n != 3 {
		t.Fatalf("load: %d blocks, %v", n, err)
	}
	// Limit two blocks: the least recent (block 1) goes.
	e := New()
	if n, err := e.Load(path, h, m, 2*BlockSize); err != nil || n != 2 || !e.Has(keys[0]) || e.Has(keys[1]) {
		t.Errorf("limited load: %d blocks, %v, has 0 %v has 1 %v", n, err, e.Has(keys[0]), e.Has(keys[1]))
	}
	var se *StaleError
	for _, other := range []Header{{Identity: "other", Runtime: "r1"}, {Identity: "m", Runtime: "r2"}} {
		f := New()
		if n, err := f.Load(path, other, m, 1<<20); !errors.As(err, &se) || n != 0 || f.Blocks() != 0 {
			t.Errorf("%+v: %d blocks, %v", other, n, err)
		}
	}
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-7], 0o644)
	if n, err := New().Load(path, h, m, 1<<20); err == nil || n != 0 {
		t.Errorf("truncated file: %d, %v", n, err)
	}
	if n, err := New().Load(filepath.Join(t.TempDir(), "none"), h, m, 1<<20); err != nil || n != 0 {
		t.Errorf("missing file: %d, %v", n, err)
	}
}

// TestDraftGoneBlocks: a block whose drafter context was given up
// (kv.Span.DraftGone) is cached, so that a sequence resumes it without
// computing it again, but still wanted whole (Wants); a whole span of the
// same block replaces it, while a given-up span never replaces a whole
// one. Save leaves given-up blocks out, and the file loads back with the
// others.
func TestDraftGoneBlocks(t *testing.T) {
	m, s, keys := threeBlocks(t, 700)
	span := func(b int, gone bool) *kv.Span {
		conv, _ := s.ConvAt((b + 1) * BlockSize)
		sp, err := s.CopySpan(b*BlockSize, (b+1)*BlockSize, conv)
		if err != nil {
			t.Fatal(err)
		}
		if gone {
			sp.MarkDraftGone()
		}
		return sp
	}
	c := New()
	c.Insert(keys[0], span(0, false))
	c.Insert(keys[1], span(1, true))
	c.Insert(keys[2], span(2, true))
	switch {
	case !c.Has(keys[1]) || !c.Wants(keys[1], true) || c.Wants(keys[1], false):
		t.Fatalf("a given-up block: Has %v, wants a whole span %v, a given-up one %v; want true, true, false",
			c.Has(keys[1]), c.Wants(keys[1], true), c.Wants(keys[1], false))
	case c.Wants(keys[0], true) || c.Wants(keys[0], false):
		t.Fatal("a whole block is wanted again")
	}
	whole := func(c *Cache, k Key) bool { return c.Has(k) && !c.Wants(k, true) }
	c.Insert(keys[1], span(1, false))
	c.Insert(keys[0], span(0, true))
	if !whole(c, keys[1]) || !whole(c, keys[0]) || c.Blocks() != 3 || c.Tokens() != 3*BlockSize {
		t.Fatalf("after replacing: whole %v %v, %d blocks of %d tokens", whole(c, keys[0]), whole(c, keys[1]), c.Blocks(), c.Tokens())
	}
	path := filepath.Join(t.TempDir(), FileName)
	h := Header{Identity: "m", Runtime: "r1"}
	if err := c.Save(path, h); err != nil {
		t.Fatal(err)
	}
	d := New()
	if n, err := d.Load(path, h, m, 1<<20); err != nil || n != 2 || !whole(d, keys[0]) || !whole(d, keys[1]) || d.Has(keys[2]) {
		t.Fatalf("loaded %d blocks, %v; want the two whole ones", n, err)
	}
}

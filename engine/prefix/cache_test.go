package prefix

import (
	"context"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
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
	m, err := model.Load("../../testdata/tiny-lfm2-moe/model", model.LoadOptions{})
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
		c.Insert(keys[b], sp) // twice: counted once
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

package drafttest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/draft/drafttest"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/model/synth"
)

// TestReleasedSize: the released shape for LFM2-1.2B (16 layers, hidden
// 2048, vocabulary 65,536) has the published LFM2.5-1.2B-Instruct-DSpark
// checkpoint's parameter count (its safetensors manifest: 295,725,953,
// "295.73 M") and tap list.
func TestReleasedSize(t *testing.T) {
	s := drafttest.Released(&config.Config{NumLayers: 16, HiddenSize: 2048, VocabSize: 65536})
	if got, want := s.Params(), int64(295_725_953); got != want {
		t.Errorf("parameters %d, want %d", got, want)
	}
	if want := []int{2, 5, 8, 11, 14}; !slices.Equal(s.Taps, want) {
		t.Errorf("taps %v, want %v", s.Taps, want)
	}
	if s.MaskTokenID != 64402 || s.BlockSize != 9 || s.MarkovRank != 256 {
		t.Errorf("mask %d, block %d, rank %d; want 64402, 9, 256", s.MaskTokenID, s.BlockSize, s.MarkovRank)
	}
}

// TestTaps: spread evenly from layer 2 to L−2, never the last layer.
func TestTaps(t *testing.T) {
	for _, c := range []struct {
		L, n int
		want []int
	}{
		{16, 5, []int{2, 5, 8, 11, 14}},
		{24, 5, []int{2, 7, 12, 17, 22}},
		{40, 5, []int{2, 11, 20, 29, 38}},
		{4, 5, []int{0, 1, 1, 2, 2}},
		{16, 1, []int{8}},
	} {
		if got := drafttest.Taps(c.L, c.n); !slices.Equal(got, c.want) {
			t.Errorf("Taps(%d, %d) = %v, want %v", c.L, c.n, got, c.want)
		}
	}
}

// TestWriteLoads: a released-shape drafter written for a synthetic tiny
// target loads with draft.Load (config and every tensor checked against
// the target) and drafts a block of 9 in-vocabulary tokens.
func TestWriteLoads(t *testing.T) {
	dir := t.TempDir()
	res, err := synth.Write(context.Background(), dir+"/target", synth.Options{Shape: synth.TinyShape(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := load.Load(res.Dir, load.Options{MaxContext: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := drafttest.Released(res.Config)
	n, err := drafttest.Write(dir+"/drafter", s, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2*s.Params() {
		t.Errorf("wrote %d bytes of BF16, want %d", n, 2*s.Params())
	}
	d, err := draft.Load(dir+"/drafter", m)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Config.BlockSize != 9 || d.Config.NumLayers != 5 || !slices.Equal(d.Config.TargetLayerIDs, s.Taps) {
		t.Errorf("loaded config %+v", d.Config)
	}
	seq := m.NewSequence()
	if _, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{{1, 2, 3, 4, 5}}, model.ForwardOptions{}); err != nil {
		t.Fatal(err)
	}
	blk, err := d.Propose([]*model.Sequence{seq}, []int{6}, false)
	if err != nil {
		t.Fatal(err)
	}
	if blk.B != 9 || len(blk.Draft(0)) != 9 {
		t.Fatalf("block of %d rows", blk.B)
	}
	for _, id := range blk.Draft(0) {
		if id < 0 || id >= res.Config.VocabSize {
			t.Errorf("draft %d outside the vocabulary", id)
		}
	}
}

// TestWriteRefusesEmptyShape: a shape with no layers is an error, not a
// checkpoint the loader would refuse later.
func TestWriteRefusesEmptyShape(t *testing.T) {
	if _, err := drafttest.Write(t.TempDir(), drafttest.Shape{}, 1); err == nil {
		t.Error("an empty shape was written")
	}
}

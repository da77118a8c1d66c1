package model_test

import (
	"math"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// TestReleasePagesKeepsLogits: after ReleasePages drops the checkpoint's
// read pages, the weights read again give the same logits, bit for bit, as
// before.
func TestReleasePagesKeepsLogits(t *testing.T) {
	m, err := load.Load(tinyDir, load.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := []int{1, 4790, 2277, 828, 25, 465, 3617, 381}
	logits := func() []float32 {
		t.Helper()
		out, err := m.Forward(t.Context(), []*model.Sequence{m.NewSequence()}, [][]int{prompt}, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	before := logits()
	for range 2 {
		if err := m.ReleasePages(); err != nil {
			t.Fatal(err)
		}
		after := logits()
		if len(after) != len(before) {
			t.Fatalf("%d logits after ReleasePages, %d before", len(after), len(before))
		}
		for i := range before {
			if math.Float32bits(after[i]) != math.Float32bits(before[i]) {
				t.Fatalf("logit %d is %v after ReleasePages, %v before", i, after[i], before[i])
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.ReleasePages(); err != nil {
		t.Errorf("ReleasePages after Close: %v, want nothing to release", err)
	}
}

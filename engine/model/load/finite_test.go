package load_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/model/load/loadtest"
)

const tinyModel = "../../../testdata/tiny-lfm2-moe/model"

// TestNonFiniteWeights: a Hugging Face checkpoint with a NaN or an
// infinity in a weight loads, but its background scan names the tensor
// and the element, and every Forward once the scan has ended fails with
// it; an intact checkpoint scans clean.
func TestNonFiniteWeights(t *testing.T) {
	const tensor = "model.layers.3.feed_forward.experts.5.w2.weight"
	for _, c := range []struct {
		name  string
		bits  uint16
		check func(float64) bool
	}{
		{"NaN", 0x7fc1, math.IsNaN},
		{"+Inf", 0x7f80, func(v float64) bool { return math.IsInf(v, 1) }},
		{"-Inf", 0xff80, func(v float64) bool { return math.IsInf(v, -1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := loadtest.Damaged(t, tinyModel, tensor, 1234, c.bits)
			m, err := load.Load(dir, load.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			err = m.Verified(context.Background())
			var nf *load.NonFiniteError
			if !errors.As(err, &nf) || nf.Tensor != tensor || nf.Index != 1234 || !c.check(nf.Value) || nf.Dir != dir {
				t.Fatalf("Verified: %v; want a NonFiniteError for element 1234 of %s", err, tensor)
			}
			_, err = m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{{1, 2, 3}}, model.ForwardOptions{})
			if !errors.As(err, &nf) {
				t.Errorf("Forward after the scan: %v; want the NonFiniteError", err)
			}
		})
	}
	t.Run("intact", func(t *testing.T) {
		m, err := load.Load(tinyModel, load.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := m.Verified(context.Background()); err != nil {
			t.Errorf("Verified: %v", err)
		}
	})
}

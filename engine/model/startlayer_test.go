package model_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/quant"
)

// checkSplit runs ids through m in full, then as layers [0, k) followed by
// [k, L) from the saved stream (the second part in two calls, small
// chunks), and requires bit-identical hidden states and logits.
func checkSplit(t *testing.T, name string, m *model.Model, ids []int) {
	t.Helper()
	L, H := m.Config.NumLayers, m.Config.HiddenSize
	full := newRecorder()
	_, want := forward(t, m, ids, model.ForwardOptions{Logits: model.AllLogits, Observer: full})
	for _, k := range []int{1, L / 2, L - 1} {
		lower := newRecorder()
		forward(t, m, ids, model.ForwardOptions{Logits: model.NoLogits, Layers: k, Observer: lower})
		requireSame(t, name+": stream entering the split layer", lower.hidden[k], full.hidden[k])
		upper := newRecorder()
		s := m.NewSequence()
		half := len(ids) / 2
		var got []float32
		for _, part := range [][2]int{{0, half}, {half, len(ids)}} {
			out, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{ids[part[0]:part[1]]}, model.ForwardOptions{
				Logits: model.AllLogits, StartLayer: k, Hidden: [][]float32{lower.hidden[k][part[0]*H : part[1]*H]}, Observer: upper, ChunkSize: 7})
			if err != nil {
				t.Fatalf("%s: StartLayer %d: %v", name, k, err)
			}
			got = append(got, out[0]...)
		}
		if _, ok := upper.hidden[0]; ok && k > 0 {
			t.Errorf("%s: StartLayer %d reported the embedding", name, k)
		}
		for i := k; i <= L; i++ {
			requireSame(t, name+": hidden state after the split", upper.hidden[i], full.hidden[i])
		}
		requireSame(t, name+": logits after the split", got, want)
	}
}

// TestStartLayer: running the layers in two ranges, the second from the
// first's output stream, gives the bits of a single full run, for the BF16
// fixture and for an lfmq-1 checkpoint (packed-tile kernels).
func TestStartLayer(t *testing.T) {
	ids := prompts(t)[2].InputIDs
	checkSplit(t, "bf16", tiny(t), ids)

	dir := filepath.Join(t.TempDir(), "rtn")
	if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: tinyDir, OutDir: dir, Method: quant.RTN, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	q, err := load.Load(dir, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	checkSplit(t, "lfmq-1", q, ids)
}

// TestStartLayerErrors: malformed streams, ranges and sequences built by
// other ranges are refused with an *InputError, changing nothing.
func TestStartLayerErrors(t *testing.T) {
	m := tiny(t)
	bg := context.Background()
	H, L := m.Config.HiddenSize, m.Config.NumLayers
	toks := [][]int{{1, 2}}
	good := [][]float32{make([]float32, 2*H)}
	used, _ := forward(t, m, []int{1, 2}, model.ForwardOptions{Logits: model.NoLogits})
	lower, _ := forward(t, m, []int{1, 2}, model.ForwardOptions{Logits: model.NoLogits, Layers: 2})
	fresh := m.NewSequence()
	var ie *model.InputError
	for _, c := range []struct {
		name string
		s    *model.Sequence
		opts model.ForwardOptions
	}{
		{"no hidden", fresh, model.ForwardOptions{StartLayer: 2}},
		{"short hidden", fresh, model.ForwardOptions{StartLayer: 2, Hidden: [][]float32{make([]float32, 2*H-1)}}},
		{"hidden count", fresh, model.ForwardOptions{StartLayer: 2, Hidden: [][]float32{good[0], good[0]}}},
		{"hidden without start", fresh, model.ForwardOptions{Hidden: good}},
		{"negative start", fresh, model.ForwardOptions{StartLayer: -1, Hidden: good}},
		{"start past end", fresh, model.ForwardOptions{StartLayer: 3, Layers: 3, Logits: model.NoLogits, Hidden: good}},
		{"start past model", fresh, model.ForwardOptions{StartLayer: L, Hidden: good}},
		{"non-empty full sequence", used, model.ForwardOptions{StartLayer: 2, Hidden: good}},
		{"non-empty lower sequence", lower, model.ForwardOptions{StartLayer: 2, Hidden: good}},
	} {
		n := c.s.Len()
		if _, err := m.Forward(bg, []*model.Sequence{c.s}, toks, c.opts); !errors.As(err, &ie) {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.s.Len() != n {
			t.Errorf("%s: refused call changed the sequence", c.name)
		}
	}
	// A sequence built from StartLayer 2 is partial: a full call refuses it.
	upper := m.NewSequence()
	if _, err := m.Forward(bg, []*model.Sequence{upper}, toks, model.ForwardOptions{StartLayer: 2, Hidden: good, Logits: model.NoLogits}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Forward(bg, []*model.Sequence{upper}, toks, model.ForwardOptions{}); !errors.As(err, &ie) {
		t.Errorf("full call on a StartLayer sequence: %v", err)
	}
	if c := upper.Clone(); c.Len() != 2 {
		t.Errorf("clone Len %d", c.Len())
	} else if _, err := m.Forward(bg, []*model.Sequence{c}, toks, model.ForwardOptions{}); !errors.As(err, &ie) {
		t.Errorf("full call on a clone of a StartLayer sequence: %v", err)
	}
}

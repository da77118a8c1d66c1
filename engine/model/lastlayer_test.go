package model_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
)

// event is one Observer call with a copy of its data.
type event struct {
	kind  string // hidden, linear, routing, expert
	layer int    // the Hidden index for hidden
	name  string // linear: the weight; expert: its id
	data  []float32
}

// eventLog records every Observer call in order.
type eventLog struct{ events []event }

func (o *eventLog) Hidden(i int, _ model.Rows, h []float32) {
	o.events = append(o.events, event{kind: "hidden", layer: i, data: slices.Clone(h)})
}

func (o *eventLog) Linear(layer int, name string, _ model.Rows, x []float32) {
	o.events = append(o.events, event{kind: "linear", layer: layer, name: name, data: slices.Clone(x)})
}

func (o *eventLog) Routing(layer int, _ model.Rows, r *model.Routing) {
	d := slices.Clone(r.Weights)
	for _, e := range r.Experts {
		d = append(d, float32(e))
	}
	o.events = append(o.events, event{kind: "routing", layer: layer, data: append(d, r.Logits...)})
}

func (o *eventLog) Expert(layer, e int, _ model.Rows, x *model.ExpertRows) {
	o.events = append(o.events, event{kind: "expert", layer: layer, name: fmt.Sprint(e), data: append(slices.Clone(x.Up), x.Down...)})
}

// stopsAt reports whether ev is the last report a forward stopped by part
// inside layer makes in a step, on a layer with (moe) or without routed
// experts.
func stopsAt(ev event, layer int, part model.LayerPart, moe bool) bool {
	if ev.layer != layer {
		return false
	}
	switch {
	case part == model.MixerInputs:
		// LFM2's conv.out_proj and self_attn.out_proj, LFM3's self_attn.o_proj.
		return ev.kind == "linear" && (strings.HasSuffix(ev.name, "out_proj.weight") || strings.HasSuffix(ev.name, ".o_proj.weight"))
	case moe:
		return ev.kind == "routing"
	case part == model.FFNInput:
		return ev.kind == "linear" && strings.HasSuffix(ev.name, "feed_forward.w3.weight")
	default:
		return ev.kind == "linear" && strings.HasSuffix(ev.name, "feed_forward.w2.weight")
	}
}

// truncated is a whole forward's log cut, in every step (each begins with
// Hidden(0)), after the report at which part stops.
func truncated(whole []event, layer int, part model.LayerPart, moe bool) []event {
	var out []event
	stopped := false
	for _, ev := range whole {
		if ev.kind == "hidden" && ev.layer == 0 {
			stopped = false
		}
		if stopped {
			continue
		}
		out = append(out, ev)
		stopped = stopsAt(ev, layer, part, moe)
	}
	return out
}

// checkLastLayer runs ids through the first k+1 layers of m, in steps of 7
// rows, whole and stopped at each LayerPart inside layer k, and requires
// that the stopped forward makes exactly the whole one's reports up to its
// stop, bit for bit, and leaves the sequence with the same state: a further
// whole call continuing it gives the bits of one continuing the whole run.
func checkLastLayer(t *testing.T, name string, m *model.Model, ids []int) {
	t.Helper()
	bg := context.Background()
	half := len(ids) / 2
	for k := range m.Config.NumLayers {
		moe := m.Config.IsMoE(k)
		whole := &eventLog{}
		ws, _ := forward(t, m, ids[:half], model.ForwardOptions{Logits: model.NoLogits, Layers: k + 1, ChunkSize: 7, Observer: whole})
		wantNext := &eventLog{}
		if _, err := m.Forward(bg, []*model.Sequence{ws}, [][]int{ids[half:]}, model.ForwardOptions{Logits: model.NoLogits, Layers: k + 1, Observer: wantNext}); err != nil {
			t.Fatal(err)
		}
		for _, part := range []model.LayerPart{model.MixerInputs, model.FFNInput, model.LinearInputs} {
			what := fmt.Sprintf("%s: layer %d (MoE %v), part %d", name, k, moe, part)
			got := &eventLog{}
			s, _ := forward(t, m, ids[:half], model.ForwardOptions{Logits: model.NoLogits, Layers: k + 1, ChunkSize: 7, Observer: got, LastLayer: part})
			want := truncated(whole.events, k, part, moe)
			if len(want) == len(whole.events) {
				t.Fatalf("%s: the whole forward has nothing after the stop", what)
			}
			compareEvents(t, what, got.events, want)
			next := &eventLog{}
			if _, err := m.Forward(bg, []*model.Sequence{s}, [][]int{ids[half:]}, model.ForwardOptions{Logits: model.NoLogits, Layers: k + 1, Observer: next}); err != nil {
				t.Fatal(err)
			}
			compareEvents(t, what+", continued", next.events, wantNext.events)
		}
	}
}

func compareEvents(t *testing.T, what string, got, want []event) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.kind != w.kind || g.layer != w.layer || g.name != w.name {
			t.Fatalf("%s: report %d is %s(%d, %q), want %s(%d, %q)", what, i, g.kind, g.layer, g.name, w.kind, w.layer, w.name)
		}
		if len(g.data) != len(w.data) || sameBits(g.data, w.data) >= 0 {
			t.Fatalf("%s: report %d, %s(%d, %q): values differ from the whole forward's", what, i, w.kind, w.layer, w.name)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d reports, want %d", what, len(got), len(want))
	}
}

// TestLastLayer: a forward stopped inside its last layer reports what a
// whole forward reports up to the stop, bit for bit, and nothing after it,
// on every layer kind of both fixtures (conv and attention mixers, dense
// and MoE feed-forwards).
func TestLastLayer(t *testing.T) {
	checkLastLayer(t, "moe", tiny(t), prompts(t)[2].InputIDs)
	checkLastLayer(t, "dense", dense(t), promptsIn(t, denseRefDir)[0].InputIDs)
}

// TestLastLayerErrors: a stopped forward asked for logits, or an unknown
// part, is refused with an *InputError, changing nothing.
func TestLastLayerErrors(t *testing.T) {
	m := tiny(t)
	var ie *model.InputError
	for _, c := range []struct {
		name string
		opts model.ForwardOptions
	}{
		{"logits", model.ForwardOptions{Logits: model.LastLogits, LastLayer: model.MixerInputs}},
		{"seq logits", model.ForwardOptions{SeqLogits: []model.LogitsMode{model.AllLogits}, LastLayer: model.FFNInput}},
		{"unknown part", model.ForwardOptions{Logits: model.NoLogits, LastLayer: model.LinearInputs + 1}},
		{"negative part", model.ForwardOptions{Logits: model.NoLogits, LastLayer: -1}},
	} {
		s := m.NewSequence()
		if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{{1, 2}}, c.opts); !errors.As(err, &ie) {
			t.Errorf("%s: %v", c.name, err)
		}
		if s.Len() != 0 {
			t.Errorf("%s: refused call changed the sequence", c.name)
		}
	}
}

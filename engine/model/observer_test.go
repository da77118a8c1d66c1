package model_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/hf"
)

// calibObserver records what a calibration run would: per layer the linear
// inputs, the routing and every expert's rows.
type calibObserver struct {
	model.BaseObserver
	linear  map[string][]float32 // name → concatenated input rows
	rows    map[string]int
	routing map[int][]*model.Routing
	experts map[int][]expertCall
	steps   int
}

type expertCall struct {
	expert int
	rows   model.Rows
	e      model.ExpertRows
}

func newCalib() *calibObserver {
	return &calibObserver{linear: map[string][]float32{}, rows: map[string]int{}, routing: map[int][]*model.Routing{}, experts: map[int][]expertCall{}}
}

func (o *calibObserver) Hidden(i int, _ model.Rows, _ []float32) {
	if i == 0 {
		o.steps++
	}
}

func (o *calibObserver) Linear(_ int, name string, rows model.Rows, x []float32) {
	o.linear[name] = append(o.linear[name], x...)
	o.rows[name] += rows.Len()
}

func (o *calibObserver) Routing(layer int, _ model.Rows, r *model.Routing) {
	o.routing[layer] = append(o.routing[layer], &model.Routing{K: r.K, Experts: slices.Clone(r.Experts), Weights: slices.Clone(r.Weights)})
}

func (o *calibObserver) Expert(layer, e int, rows model.Rows, x *model.ExpertRows) {
	o.experts[layer] = append(o.experts[layer], expertCall{expert: e, rows: model.Rows{Seq: slices.Clone(rows.Seq), Pos: slices.Clone(rows.Pos)}, e: model.ExpertRows{
		Rows: slices.Clone(x.Rows), Weights: slices.Clone(x.Weights), Up: slices.Clone(x.Up), Down: slices.Clone(x.Down),
	}})
}

// TestObserver checks the calibration hooks on a two-sequence batch run in
// steps of 24 rows: router weights sum to routed_scaling_factor (2.5 in a
// copy of the fixture's config), every routed (row, expert) pair reaches its
// expert with its weight, expert inputs are the router's input rows (the
// ffn-normed stream), the w2 inputs are silu(w1·z)⊙(w3·z) recomputed here in
// float64 from the checkpoint, and every linear reports its input rows.
func TestObserver(t *testing.T) {
	dir := configVariant(t, func(c map[string]any) { c["routed_scaling_factor"] = 2.5 })
	m, err := load.Load(dir, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := m.Config
	if cfg.RoutedScalingFactor != 2.5 {
		t.Fatalf("routed_scaling_factor %g", cfg.RoutedScalingFactor)
	}
	ps := prompts(t)
	inputs := [][]int{ps[0].InputIDs, ps[2].InputIDs}
	total := len(inputs[0]) + len(inputs[1])
	obs := newCalib()
	seqs := []*model.Sequence{m.NewSequence(), m.NewSequence()}
	if _, err := m.Forward(t.Context(), seqs, inputs, model.ForwardOptions{Observer: obs, ChunkSize: 24, Logits: model.NoLogits}); err != nil {
		t.Fatal(err)
	}
	if obs.steps != 2 {
		t.Errorf("%d steps, want 2 of at most 24 rows for %d tokens", obs.steps, total)
	}
	ck, err := hf.Open(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()

	H, K, Fe := cfg.HiddenSize, cfg.NumExpertsPerTok, cfg.MoEIntermediateSize
	for l := range cfg.NumLayers {
		p := config.LayerPrefix(l)
		// Every linear of the layer, with the right rows and widths.
		want := map[string]int{}
		if cfg.LayerKinds[l] == config.Conv {
			want[p+"conv.in_proj.weight"], want[p+"conv.out_proj.weight"] = H, H
		} else {
			for _, n := range []string{"q_proj", "k_proj", "v_proj", "out_proj"} {
				want[p+"self_attn."+n+".weight"] = H
			}
		}
		if cfg.IsMoE(l) {
			want[p+"feed_forward.gate.weight"] = H
		} else {
			want[p+"feed_forward.w1.weight"], want[p+"feed_forward.w3.weight"], want[p+"feed_forward.w2.weight"] = H, H, cfg.IntermediateSize
		}
		for n, in := range want {
			if obs.rows[n] != total || len(obs.linear[n]) != total*in {
				t.Errorf("%s: %d rows of %d values, want %d rows of %d", n, obs.rows[n], len(obs.linear[n])/max(obs.rows[n], 1), total, in)
			}
		}
		if !cfg.IsMoE(l) {
			continue
		}
		// Routing: K distinct experts per row, weights summing to the
		// scaling factor (renormalised with +1e-6, then scaled).
		var sel []int
		var wts []float32
		for _, r := range obs.routing[l] {
			sel, wts = append(sel, r.Experts...), append(wts, r.Weights...)
		}
		if len(sel) != total*K {
			t.Fatalf("layer %d: %d selections, want %d", l, len(sel), total*K)
		}
		var worst float64
		for r := range total {
			var sum float64
			for i := range K {
				sum += float64(wts[r*K+i])
			}
			worst = max(worst, math.Abs(sum-2.5))
			if s := slices.Clone(sel[r*K : r*K+K]); len(slices.Compact(slices.Sorted(slices.Values(s)))) != K {
				t.Fatalf("layer %d row %d: experts %v not distinct", l, r, s)
			}
		}
		if worst > 2.5*2e-5 {
			t.Errorf("layer %d: router weights sum to 2.5 ± %.3g", l, worst)
		}
		// Expert calls: each (row, expert) pair of the routing exactly once
		// with its weight; Up rows equal the router input rows; Down rows
		// are the SwiGLU of Up.
		gateIn := obs.linear[p+"feed_forward.gate.weight"]
		seen := map[[2]int]bool{}
		var maxDown float64
		for _, c := range obs.experts[l] {
			w1, w3 := weights(t, ck, fmt.Sprintf("%sfeed_forward.experts.%d.w1.weight", p, c.expert)), weights(t, ck, fmt.Sprintf("%sfeed_forward.experts.%d.w3.weight", p, c.expert))
			for i, r := range c.e.Rows {
				g := globalRow(c.rows, r, inputs)
				if seen[[2]int{g, c.expert}] {
					t.Fatalf("layer %d: row %d reached expert %d twice", l, g, c.expert)
				}
				seen[[2]int{g, c.expert}] = true
				slot := slices.Index(sel[g*K:g*K+K], c.expert)
				if slot < 0 || wts[g*K+slot] != c.e.Weights[i] {
					t.Fatalf("layer %d row %d expert %d: not selected or weight %g differs", l, g, c.expert, c.e.Weights[i])
				}
				up := c.e.Up[i*H : (i+1)*H]
				requireSame(t, "expert input vs router input", up, gateIn[g*H:(g+1)*H])
				for f := range Fe {
					var a, b float64
					for j, x := range up {
						a += float64(w1[f*H+j]) * float64(x)
						b += float64(w3[f*H+j]) * float64(x)
					}
					want := a / (1 + math.Exp(-a)) * b
					maxDown = max(maxDown, math.Abs(float64(c.e.Down[i*Fe+f])-want))
				}
			}
		}
		if len(seen) != total*K {
			t.Errorf("layer %d: %d (row, expert) pairs reached experts, want %d", l, len(seen), total*K)
		}
		if maxDown > 1e-5 {
			t.Errorf("layer %d: w2 inputs differ from silu(w1·z)⊙(w3·z) by %.3g", l, maxDown)
		}
	}
}

// globalRow maps a step row to its index in the concatenation of inputs.
func globalRow(rows model.Rows, r int, inputs [][]int) int {
	g := rows.Pos[r]
	for s := range rows.Seq[r] {
		g += len(inputs[s])
	}
	return g
}

func weights(t *testing.T, ck *hf.Checkpoint, name string) []float32 {
	t.Helper()
	w, err := ck.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

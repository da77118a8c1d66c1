package model_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
)

// recorder is an Observer that keeps copies of the residual streams, the
// head input and the routing of one single-sequence Forward call.
type recorder struct {
	model.BaseObserver
	hidden  map[int][]float32
	final   []float32
	routing map[int]*model.Routing
}

func newRecorder() *recorder {
	return &recorder{hidden: map[int][]float32{}, routing: map[int]*model.Routing{}}
}

func (r *recorder) Hidden(i int, _ model.Rows, h []float32) {
	r.hidden[i] = append(r.hidden[i], h...)
}

func (r *recorder) Linear(layer int, name string, _ model.Rows, x []float32) {
	if layer == -1 {
		r.final = append(r.final, x...)
	}
}

func (r *recorder) Routing(layer int, _ model.Rows, rt *model.Routing) {
	got := r.routing[layer]
	if got == nil {
		got = &model.Routing{K: rt.K}
		r.routing[layer] = got
	}
	got.Experts = append(got.Experts, rt.Experts...)
	got.Weights = append(got.Weights, rt.Weights...)
	got.Logits = append(got.Logits, rt.Logits...)
}

// Tolerances of TestReferenceHiddenStates, each about 2-4x the largest
// error measured on linux/amd64 with the AVX2/FMA kernels and with -tags
// purego (identical on both paths).
const (
	hiddenTol       = 2e-5  // residual streams and final norm: max |Δ| 8.58e-6 (layer 8)
	hiddenCosTol    = 4e-13 // 1−cosine of the same: 1.2e-13 (layer 1)
	routerWeightTol = 5e-7  // top-k routing weights: 1.79e-7 (layer 5)
	routerLogitTol  = 1e-5  // router logits: 3.34e-6 (layer 7)
)

// TestReferenceHiddenStates compares every layer's residual stream, the
// final norm and the router decisions of the chat_multiturn_unicode prompt
// with the reference, in small chunks so that the observer sees several
// steps.
func TestReferenceHiddenStates(t *testing.T) {
	m := tiny(t)
	ref := openRef(t, "hidden_states.safetensors")
	ids := ref.ints(t, "input_ids")
	T, H := len(ids), m.Config.HiddenSize
	rec := newRecorder()
	forward(t, m, ids, model.ForwardOptions{Logits: model.AllLogits, Observer: rec, ChunkSize: 16})

	hs := ref.get(t, "hidden_states")
	for i := 0; i <= m.Config.NumLayers; i++ {
		want := hs[i*T*H : (i+1)*T*H]
		got := rec.hidden[i]
		d, c := maxAbsDiff(got, want), cosine(got, want)
		t.Logf("hidden_states[%d]: max |Δ| %.3g, 1−cosine %.2g", i, d, 1-c)
		if d > hiddenTol || 1-c > hiddenCosTol {
			t.Errorf("hidden_states[%d]: max |Δ| %.3g (tolerance %g), 1−cosine %.2g (tolerance %g)", i, d, hiddenTol, 1-c, hiddenCosTol)
		}
	}
	fn := ref.get(t, "final_norm")
	if d, c := maxAbsDiff(rec.final, fn), cosine(rec.final, fn); d > hiddenTol || 1-c > hiddenCosTol {
		t.Errorf("final_norm: max |Δ| %.3g (tolerance %g), 1−cosine %.2g (tolerance %g)", d, hiddenTol, 1-c, hiddenCosTol)
	} else {
		t.Logf("final_norm: max |Δ| %.3g, 1−cosine %.2g", d, 1-c)
	}

	// router_topk.json holds the same decisions as JSON; check it agrees
	// with the safetensors copy, then compare both with ours.
	var rj struct {
		InputIDs []int `json:"input_ids"`
		Layers   map[string]struct {
			TopkIDs     [][]int     `json:"topk_ids"`
			TopkWeights [][]float64 `json:"topk_weights"`
		} `json:"layers"`
	}
	data, err := os.ReadFile(filepath.Join(refDir, "router_topk.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rj); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rj.InputIDs) != fmt.Sprint(ids) {
		t.Fatal("router_topk.json is for other input ids")
	}
	K, E := m.Config.NumExpertsPerTok, m.Config.NumExperts
	for l := range m.Config.NumLayers {
		if !m.Config.IsMoE(l) {
			if rec.routing[l] != nil {
				t.Errorf("layer %d is dense but reported routing", l)
			}
			continue
		}
		got := rec.routing[l]
		wantIDs := ref.ints(t, fmt.Sprintf("layer%d.topk_ids", l))
		wantW := ref.get(t, fmt.Sprintf("layer%d.topk_weights", l))
		wantLogits := ref.get(t, fmt.Sprintf("layer%d.router_logits", l))
		js := rj.Layers[fmt.Sprint(l)]
		var wd float64
		for tok := range T {
			for i := range K {
				if js.TopkIDs[tok][i] != wantIDs[tok*K+i] {
					t.Fatalf("layer %d token %d: router_topk.json and hidden_states.safetensors disagree", l, tok)
				}
				if got.Experts[tok*K+i] != wantIDs[tok*K+i] {
					t.Errorf("layer %d token %d: experts %v, want %v", l, tok, got.Experts[tok*K:tok*K+K], wantIDs[tok*K:tok*K+K])
					break
				}
				wd = max(wd, math.Abs(float64(got.Weights[tok*K+i])-float64(wantW[tok*K+i])))
			}
		}
		ld := maxAbsDiff(got.Logits, wantLogits)
		t.Logf("layer %d router: top-%d ids identical for %d tokens, max |Δweight| %.3g, max |Δlogit| %.3g", l, K, T, wd, ld)
		if wd > routerWeightTol {
			t.Errorf("layer %d: router weights differ by %.3g (tolerance %g)", l, wd, routerWeightTol)
		}
		if len(got.Logits) != T*E || ld > routerLogitTol {
			t.Errorf("layer %d: router logits differ by %.3g (tolerance %g)", l, ld, routerLogitTol)
		}
	}
}

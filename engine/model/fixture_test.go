package model_test

import (
	"fmt"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
)

// TestReferenceLogits checks the BF16 fixture against the float32 reference:
// full-sequence logits of every prompt, the logits of every greedy decode
// step, and the 32 greedy tokens.
func TestReferenceLogits(t *testing.T) {
	checkReferenceLogits(t, tiny(t), prompts(t), openRef(t, "logits.safetensors"))
}

// checkReferenceLogits compares m's full-sequence and greedy-decode logits
// of every prompt with the float32 reference ref, and its greedy ids.
func checkReferenceLogits(t *testing.T, m *model.Model, ps []prompt, ref refTensors) {
	checkReferenceLogitsTol(t, m, ps, ref, logitTol)
}

// checkReferenceLogitsTol is checkReferenceLogits with the tolerance tol.
func checkReferenceLogitsTol(t *testing.T, m *model.Model, ps []prompt, ref refTensors, tol float64) {
	V := m.Config.VocabSize
	for i, p := range ps {
		t.Run(p.Name, func(t *testing.T) {
			key := fmt.Sprintf("%d.%s.", i, p.Name)
			if ids := ref.ints(t, key+"input_ids"); fmt.Sprint(ids) != fmt.Sprint(p.InputIDs) {
				t.Fatalf("input ids differ between prompts.json and logits.safetensors")
			}
			s, got := forward(t, m, p.InputIDs, model.ForwardOptions{Logits: model.AllLogits})
			want := ref.get(t, key+"logits")
			full := maxAbsDiff(got, want)

			decodeRef := ref.get(t, key+"decode_logits")
			greedyRef := ref.ints(t, key+"greedy_ids")
			last := got[(len(p.InputIDs)-1)*V:]
			var dec float64
			var greedy []int
			for k := range greedyN {
				dec = max(dec, maxAbsDiff(last, decodeRef[k*V:(k+1)*V]))
				id := argmax(last)
				greedy = append(greedy, id)
				if k < greedyN-1 {
					last = step(t, m, s, id)
				}
			}
			t.Logf("max |Δlogit|: full sequence %.3g (%d positions), decode steps %.3g", full, len(p.InputIDs), dec)
			if full > tol || dec > tol {
				t.Errorf("max |Δlogit| full %.3g, decode %.3g; tolerance %g", full, dec, tol)
			}
			if fmt.Sprint(greedy) != fmt.Sprint(greedyRef) || fmt.Sprint(greedyRef) != fmt.Sprint(p.GreedyIDs) {
				t.Errorf("greedy ids\n got %v\nwant %v", greedy, greedyRef)
			}
		})
	}
}

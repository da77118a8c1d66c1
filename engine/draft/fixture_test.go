package draft_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/safetensors"
)

const (
	targetDir  = "../../testdata/tiny-lfm2-moe/model"
	drafterDir = "../../testdata/tiny-lfm2-moe-dspark/model"
	refDir     = "../../testdata/tiny-lfm2-moe-dspark/reference"
)

// refStep is one verify step of the reference's greedy speculative run.
type refStep struct {
	ContextLen   int       `json:"context_len"`
	Anchor       int       `json:"anchor"`
	Drafted      []int     `json:"drafted"`
	BaseArgmax   []int     `json:"base_argmax"`
	Confidence   []float32 `json:"confidence"`
	TargetGreedy []int     `json:"target_greedy"`
	Accepted     int       `json:"accepted"`
	Appended     []int     `json:"appended"`
}

type refPrompt struct {
	Name      string    `json:"name"`
	InputIDs  []int     `json:"input_ids"`
	OutputIDs []int     `json:"output_ids"`
	Plain     []int     `json:"plain_greedy_ids"`
	Steps     []refStep `json:"steps"`
}

type refSpec struct {
	BlockSize int         `json:"block_size"`
	NewTokens int         `json:"n_new_tokens"`
	Prompts   []refPrompt `json:"prompts"`
}

func readSpec(t *testing.T) *refSpec {
	t.Helper()
	b, err := os.ReadFile(refDir + "/spec.json")
	if err != nil {
		t.Fatal(err)
	}
	var s refSpec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// loadPair loads the fixture's target with KV cache format dt and
// attaches the fixture's drafter.
func loadPair(t testing.TB, dt kv.DType) (*model.Model, *draft.Drafter) {
	t.Helper()
	return loadPairWith(t, load.Options{KVCacheDType: dt, Threads: 2})
}

// loadPairWith loads the fixture's target with opts and attaches the
// fixture's drafter; both are closed when t ends.
func loadPairWith(t testing.TB, opts load.Options) (*model.Model, *draft.Drafter) {
	t.Helper()
	m, err := load.Load(targetDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := draft.Load(drafterDir, m)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	return m, d
}

// step is one greedy speculative step as the reference runs it
// (Drafter.GreedyStep): the block, the target's greedy ids and the
// accepted count; seq then holds the anchor and the accepted drafts.
func step(t testing.TB, m *model.Model, d *draft.Drafter, seq *model.Sequence, anchor int, keep bool) (*draft.Block, []int, int) {
	t.Helper()
	st, err := d.GreedyStep(context.Background(), seq, anchor, keep)
	if err != nil {
		t.Fatal(err)
	}
	return st.Block, st.Target, st.Accepted
}

// TestReferenceRun reproduces the fixture's greedy speculative run with a
// float32 KV cache: at every step of every prompt the same context
// length, drafted ids, target ids and accepted count, the confidence
// logits within 1e-4, and the same 48 tokens, which are plain greedy
// decoding's.
func TestReferenceRun(t *testing.T) {
	spec := readSpec(t)
	m, d := loadPair(t, kv.F32)
	if d.Config.BlockSize != spec.BlockSize {
		t.Fatalf("block size %d, reference %d", d.Config.BlockSize, spec.BlockSize)
	}
	for _, p := range spec.Prompts {
		t.Run(p.Name, func(t *testing.T) {
			seq := m.NewSequence()
			out, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{p.InputIDs}, model.ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := []int{kernels.Argmax(out[0])}
			for i, ref := range p.Steps {
				if seq.Len() != ref.ContextLen || got[len(got)-1] != ref.Anchor {
					t.Fatalf("step %d: context %d, anchor %d; reference %d, %d", i, seq.Len(), got[len(got)-1], ref.ContextLen, ref.Anchor)
				}
				blk, g, a := step(t, m, d, seq, ref.Anchor, false)
				if !slices.Equal(blk.Draft(0), ref.Drafted) {
					t.Fatalf("step %d: drafted %v, reference %v", i, blk.Draft(0), ref.Drafted)
				}
				for k, c := range blk.Conf(0) {
					if math.Abs(float64(c-ref.Confidence[k])) > 1e-4 {
						t.Errorf("step %d: confidence %d is %g, reference %g", i, k, c, ref.Confidence[k])
					}
				}
				if !slices.Equal(g, ref.TargetGreedy) || a != ref.Accepted {
					t.Fatalf("step %d: target %v accepted %d; reference %v accepted %d", i, g, a, ref.TargetGreedy, ref.Accepted)
				}
				got = append(got, g[:a+1]...)
			}
			got = got[:spec.NewTokens]
			if !slices.Equal(got, p.OutputIDs) || !slices.Equal(got, p.Plain) {
				t.Fatalf("output %v\nreference %v\nplain greedy %v", got, p.OutputIDs, p.Plain)
			}
		})
	}
}

// TestFirstBlock compares each prompt's first block with the reference's
// float32 tensors: the hidden rows, the base logits (the target's head)
// and the logits after the Markov head, within 1e-4.
func TestFirstBlock(t *testing.T) {
	spec := readSpec(t)
	m, d := loadPair(t, kv.F32)
	f, err := safetensors.Open(refDir + "/blocks.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, p := range spec.Prompts {
		t.Run(p.Name, func(t *testing.T) {
			seq := m.NewSequence()
			if _, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{p.InputIDs}, model.ForwardOptions{Logits: model.NoLogits}); err != nil {
				t.Fatal(err)
			}
			blk, err := d.Propose([]*model.Sequence{seq}, []int{p.Steps[0].Anchor}, true)
			if err != nil {
				t.Fatal(err)
			}
			R := blk.B
			base := make([]float32, R*m.Config.VocabSize)
			m.HeadRows(base, blk.Hidden, R)
			for _, c := range []struct {
				name string
				got  []float32
			}{{"first_block_hidden", blk.Hidden}, {"first_block_base_logits", base}, {"first_block_logits", blk.Logits}} {
				want, err := f.Float32(fmt.Sprintf("%d.%s.%s", i, p.Name, c.name))
				if err != nil {
					t.Fatal(err)
				}
				if len(want) != len(c.got) {
					t.Fatalf("%s: %d values, reference %d", c.name, len(c.got), len(want))
				}
				worst := 0.0
				for j := range want {
					worst = max(worst, math.Abs(float64(c.got[j]-want[j])))
				}
				if worst > 1e-4 {
					t.Errorf("%s: max |Δ| %.3g > 1e-4", c.name, worst)
				}
				t.Logf("%s: max |Δ| %.3g", c.name, worst)
			}
		})
	}
}

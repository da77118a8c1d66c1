package draft_test

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

const corporaDir = "../../testdata/tiny-lfm2-moe/corpora"

// refAcceptance is the part of the fixture's acceptance.json the engine
// reproduces: per corpus, the verify steps and the accepted-count
// histogram of a greedy speculative run over held-out records.
type refAcceptance struct {
	Setup   string `json:"setup"`
	Corpora map[string]struct {
		Records     int   `json:"records"`
		VerifySteps int   `json:"verify_steps"`
		AcceptHist  []int `json:"accept_hist"`
		SpecGreedy  bool  `json:"spec_equals_greedy"`
	} `json:"corpora"`
}

// The held-out run's setup (acceptance.json "setup", the fixture README's
// "Held-out acceptance"): per corpus, heldOutRecords records evenly spaced
// over those with at least heldOutPrompt+16 ids, the first heldOutPrompt
// ids as the prompt, heldOutNew new tokens.
const (
	heldOutRecords = 24
	heldOutPrompt  = 96
	heldOutNew     = 48
)

// heldOutPrompts reads a corpus and returns the prompts of the records
// the reference ran: those with at least heldOutPrompt+16 input ids, at
// numpy.linspace(0, n-1, heldOutRecords).round() — linspace's j·step
// rounded half to even (np.round), as the fixture's build_dspark.py eval
// stage picks them.
func heldOutPrompts(t *testing.T, corpus string) [][]int {
	t.Helper()
	f, err := os.Open(corporaDir + "/" + corpus + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs [][]int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r struct {
			InputIDs []int `json:"input_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", corpus, err)
		}
		if len(r.InputIDs) >= heldOutPrompt+16 {
			recs = append(recs, r.InputIDs[:heldOutPrompt])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(recs) < 2 {
		t.Fatalf("%s: %d records of %d ids or more", corpus, len(recs), heldOutPrompt+16)
	}
	step := float64(len(recs)-1) / float64(heldOutRecords-1)
	out := make([][]int, heldOutRecords)
	for j := range out {
		i := int(math.RoundToEven(float64(j) * step))
		if j == heldOutRecords-1 {
			i = len(recs) - 1 // linspace's endpoint is exact
		}
		out[j] = recs[i]
	}
	return out
}

// plainGreedy decodes n tokens greedily, one token per forward.
func plainGreedy(t testing.TB, m *model.Model, prompt []int, n int) []int {
	t.Helper()
	seq := m.NewSequence()
	defer seq.Free()
	out, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{prompt}, model.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []int{kernels.Argmax(out[0])}
	for len(got) < n {
		out, err = m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{{got[len(got)-1]}}, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, kernels.Argmax(out[0]))
	}
	return got
}

// TestHeldOutAcceptance reproduces the fixture's held-out acceptance
// (reference/acceptance.json, made by an independent float32
// implementation): per corpus, the same number of verify steps and the
// same histogram of accepted counts, with a float32 KV cache. As in the
// reference, the run stops at the first step that brings the new tokens
// to heldOutNew or more, and that step counts whole (its accepted count
// is not cut by the truncation to heldOutNew tokens). Every record's 48
// tokens are plain greedy decoding's, as in the reference.
func TestHeldOutAcceptance(t *testing.T) {
	b, err := os.ReadFile(refDir + "/acceptance.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref refAcceptance
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	m, d := loadPair(t, kv.F32)
	B := d.Config.BlockSize
	for _, corpus := range []string{"code", "chat", "instruct", "book"} {
		t.Run(corpus, func(t *testing.T) {
			want, ok := ref.Corpora[corpus]
			if !ok {
				t.Fatalf("acceptance.json has no corpus %q", corpus)
			}
			prompts := heldOutPrompts(t, corpus)
			if len(prompts) != want.Records {
				t.Fatalf("%d records, reference %d", len(prompts), want.Records)
			}
			steps, hist := 0, make([]int, B+1)
			for r, prompt := range prompts {
				seq := m.NewSequence()
				out, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{prompt}, model.ForwardOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got := []int{kernels.Argmax(out[0])}
				for len(got) < heldOutNew {
					_, g, a := step(t, m, d, seq, got[len(got)-1], false)
					got = append(got, g[:a+1]...)
					steps++
					hist[a]++
				}
				seq.Free()
				if want.SpecGreedy {
					if plain := plainGreedy(t, m, prompt, heldOutNew); !slices.Equal(got[:heldOutNew], plain) {
						t.Errorf("record %d: drafted output %v\nplain greedy %v", r, got[:heldOutNew], plain)
					}
				}
			}
			kept := 0
			for a, n := range hist {
				kept += a * n
			}
			t.Logf("%d verify steps, accepted counts %v: %.3f tokens per verify step", steps, hist, float64(kept)/float64(steps)+1)
			if steps != want.VerifySteps || !slices.Equal(hist, want.AcceptHist) {
				t.Errorf("%d verify steps, accepted counts %v; reference %d, %v", steps, hist, want.VerifySteps, want.AcceptHist)
			}
		})
	}
}

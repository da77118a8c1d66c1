package model_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// TestIncrementalEqualsFull: decoding token by token, prefilling in chunks of
// any size and one full-sequence forward give bit-identical logits, for
// every fixture prompt including the longest (chat_long_300: 314 prompt
// tokens plus 31 decoded, about 4 s of the test's 6 on 2 busy cores).
func TestIncrementalEqualsFull(t *testing.T) { checkIncrementalEqualsFull(t, tiny(t), prompts(t)) }

// checkIncrementalEqualsFull runs every prompt and its greedy continuation
// through m token by token, in chunks and whole, and requires the same bits.
func checkIncrementalEqualsFull(t *testing.T, m *model.Model, ps []prompt) {
	V := m.Config.VocabSize
	for _, p := range ps {
		t.Run(p.Name, func(t *testing.T) {
			all := append(append([]int(nil), p.InputIDs...), p.GreedyIDs[:greedyN-1]...)
			_, full := forward(t, m, all, model.ForwardOptions{Logits: model.AllLogits})

			s, last := forward(t, m, p.InputIDs, model.ForwardOptions{})
			n := len(p.InputIDs)
			requireSame(t, "prefill last position", last, full[(n-1)*V:n*V])
			for k, id := range p.GreedyIDs[:greedyN-1] {
				got := step(t, m, s, id)
				requireSame(t, fmt.Sprintf("decode step %d", k), got, full[(n+k)*V:(n+k+1)*V])
			}
			if s.Len() != len(all) {
				t.Fatalf("Len %d, want %d", s.Len(), len(all))
			}
			for _, chunk := range []int{1, 3, 7, 64} {
				_, got := forward(t, m, all, model.ForwardOptions{Logits: model.AllLogits, ChunkSize: chunk})
				requireSame(t, fmt.Sprintf("prefill in chunks of %d", chunk), got, full)
			}
		})
	}
}

// batchInputs returns four different prompts of different lengths.
func batchInputs(t *testing.T) [][]int { return batchInputsOf(prompts(t)) }

func batchInputsOf(ps []prompt) [][]int {
	return [][]int{ps[0].InputIDs, ps[1].InputIDs, ps[2].InputIDs, ps[4].InputIDs}
}

// runBatch prefills every input in one batched Forward, then decodes
// `decode` steps, feeding sequence i the tokens decodeToken(tags[i], k),
// and returns for each sequence its prompt logits followed by its decode
// logits.
func runBatch(t *testing.T, m *model.Model, inputs [][]int, tags []int, chunk, decode int) [][]float32 {
	t.Helper()
	seqs := make([]*model.Sequence, len(inputs))
	for i := range seqs {
		seqs[i] = m.NewSequence()
	}
	out, err := m.Forward(context.Background(), seqs, inputs, model.ForwardOptions{Logits: model.AllLogits, ChunkSize: chunk})
	if err != nil {
		t.Fatal(err)
	}
	for k := range decode {
		toks := make([][]int, len(seqs))
		for i := range toks {
			toks[i] = []int{decodeToken(tags[i], k)}
		}
		step, err := m.Forward(context.Background(), seqs, toks, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range out {
			out[i] = append(out[i], step[i]...)
		}
	}
	return out
}

func decodeToken(tag, k int) int { return 100 + 37*tag + 11*k }

var allTags = []int{0, 1, 2, 3}

// TestBatchInvariance: a sequence's logits are bit-identical alone and in a
// batch of four different sequences, including batches whose steps split
// sequences (chunk 5) and batched decode.
func TestBatchInvariance(t *testing.T) { checkBatchInvariance(t, tiny(t), batchInputs(t)) }

// checkBatchInvariance requires each of inputs to give the same bits alone
// and batched with the others, in any step split.
func checkBatchInvariance(t *testing.T, m *model.Model, inputs [][]int) {
	const decode = 4
	alone := make([][]float32, len(inputs))
	for i, in := range inputs {
		alone[i] = runBatch(t, m, [][]int{in}, []int{i}, 0, decode)[0]
	}
	for _, chunk := range []int{0, 5, 33} {
		got := runBatch(t, m, inputs, allTags, chunk, decode)
		for i := range inputs {
			requireSame(t, fmt.Sprintf("chunk %d: sequence %d batched vs alone", chunk, i), got[i], alone[i])
		}
	}
	// LastLogits when the steps split sequences: each sequence's last row.
	seqs := []*model.Sequence{m.NewSequence(), m.NewSequence(), m.NewSequence(), m.NewSequence()}
	last, err := m.Forward(context.Background(), seqs, inputs, model.ForwardOptions{ChunkSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	for i, in := range inputs {
		requireSame(t, fmt.Sprintf("LastLogits in chunks of 5: sequence %d", i), last[i], alone[i][(len(in)-1)*V:len(in)*V])
	}
	// A sequence that sits in a batch with an empty token list is unaffected.
	s1, s2 := m.NewSequence(), m.NewSequence()
	out, err := m.Forward(context.Background(), []*model.Sequence{s1, s2}, [][]int{inputs[0], nil}, model.ForwardOptions{Logits: model.AllLogits})
	if err != nil {
		t.Fatal(err)
	}
	if out[1] != nil || s2.Len() != 0 {
		t.Errorf("empty token list: logits %d, Len %d", len(out[1]), s2.Len())
	}
	requireSame(t, "beside an empty sequence", out[0], alone[0][:len(out[0])])
}

// TestThreadInvariance: the thread count never changes a bit, including
// GOMAXPROCS=1 and pools larger than the expert count per step (which
// switches the MoE block between expert-parallel and product-parallel).
func TestThreadInvariance(t *testing.T) { checkThreadInvariance(t, tinyDir, tiny(t), batchInputs(t)) }

// checkThreadInvariance loads dir at several thread counts and requires
// the bits of base (dir loaded with the default pool).
func checkThreadInvariance(t *testing.T, dir string, base *model.Model, inputs [][]int) {
	want := runBatch(t, base, inputs, allTags, 0, 2)
	run := func(name string, opts load.Options) {
		m, err := load.Load(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		got := runBatch(t, m, inputs, allTags, 0, 2)
		for i := range got {
			requireSame(t, fmt.Sprintf("%s: sequence %d", name, i), got[i], want[i])
		}
	}
	prev := runtime.GOMAXPROCS(1)
	run("GOMAXPROCS=1", load.Options{})
	runtime.GOMAXPROCS(prev)
	for _, threads := range []int{1, 3, 64} {
		run(fmt.Sprintf("%d threads", threads), load.Options{Threads: threads})
	}
}

// TestSeqLogits: a server-style step (decodes wanting their last row, a
// prefill chunk wanting none, a scoring prefill wanting every row) returns
// for each sequence exactly the rows it asked for, bit-identical to the
// same sequence run alone.
func TestSeqLogits(t *testing.T) {
	m := tiny(t)
	V := m.Config.VocabSize
	ps := prompts(t)
	dec, pre, scoring := ps[0].InputIDs, ps[1].InputIDs, ps[2].InputIDs
	_, decFull := forward(t, m, append(append([]int(nil), dec...), 42), model.ForwardOptions{Logits: model.AllLogits})
	_, scoreFull := forward(t, m, scoring, model.ForwardOptions{Logits: model.AllLogits})

	sDec, _ := forward(t, m, dec, model.ForwardOptions{})
	sPre, sScore := m.NewSequence(), m.NewSequence()
	out, err := m.Forward(context.Background(), []*model.Sequence{sDec, sPre, sScore}, [][]int{{42}, pre[:10], scoring},
		model.ForwardOptions{SeqLogits: []model.LogitsMode{model.LastLogits, model.NoLogits, model.AllLogits}})
	if err != nil {
		t.Fatal(err)
	}
	n := len(dec)
	requireSame(t, "decode row", out[0], decFull[n*V:(n+1)*V])
	if out[1] != nil {
		t.Errorf("NoLogits sequence got %d floats", len(out[1]))
	}
	requireSame(t, "scoring rows", out[2], scoreFull)
	if sPre.Len() != 10 {
		t.Errorf("prefill chunk: Len %d, want 10", sPre.Len())
	}

	for _, tc := range []struct {
		name string
		opts model.ForwardOptions
	}{
		{"too few modes", model.ForwardOptions{SeqLogits: []model.LogitsMode{model.LastLogits}}},
		{"unknown mode", model.ForwardOptions{SeqLogits: []model.LogitsMode{model.LastLogits, 7}}},
		{"partial forward", model.ForwardOptions{Layers: 2, Logits: model.NoLogits, SeqLogits: []model.LogitsMode{model.NoLogits, model.NoLogits}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence(), m.NewSequence()}, [][]int{{1}, {1}}, tc.opts)
			var ie *model.InputError
			if !errors.As(err, &ie) || ie.What != "ForwardOptions.SeqLogits" {
				t.Errorf("got %v, want an InputError on ForwardOptions.SeqLogits", err)
			}
		})
	}
}

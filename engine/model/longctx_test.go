package model_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// longTokens is a prompt whose keys cross attention's split boundary
// (1,024 positions) and, with the decoded tokens, end off the 64-position
// block grid.
const longTokens = 1100

// longRun prefills a seeded random prompt of longTokens in chunks of chunk
// rows, beside a short neighbour sequence, then decodes three tokens in
// the same batch; it returns the long sequence's last-row logits of the
// prefill and of each decode step.
func longRun(t *testing.T, m *model.Model, chunk int) []float32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(91, 92))
	ids := randomTokens(rng, longTokens, m.Config.VocabSize)
	seqs := []*model.Sequence{m.NewSequence(), m.NewSequence()}
	out, err := m.Forward(context.Background(), seqs, [][]int{ids, ids[:37]}, model.ForwardOptions{ChunkSize: chunk})
	if err != nil {
		t.Fatal(err)
	}
	got := out[0]
	for k := range 3 {
		step, err := m.Forward(context.Background(), seqs, [][]int{{decodeToken(0, k)}, {decodeToken(1, k)}}, model.ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, step[0]...)
	}
	return got
}

// TestLongContextInvariance: past attention's first split, a prompt
// prefilled whole, in chunks that cut blocks and splits anywhere, or on
// other thread counts, and then decoded in a batch, gives the same bits.
func TestLongContextInvariance(t *testing.T) {
	base := tiny(t)
	want := longRun(t, base, 0)
	for _, chunk := range []int{100, 1023} {
		requireSame(t, fmt.Sprintf("chunks of %d", chunk), longRun(t, base, chunk), want)
	}
	for _, threads := range []int{1, 3} {
		m, err := load.Load(tinyDir, load.Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		requireSame(t, fmt.Sprintf("%d threads, chunks of 300", threads), longRun(t, m, 300), want)
		m.Close()
	}
}

// TestDeviceLongContext: on the device, in every KV cache format, the same
// long prompt and decode steps give the CPU engine's bits for that format:
// the device kernels follow the blocked attention's order across splits
// and read the cache's values exactly.
func TestDeviceLongContext(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1,100-token prefill on PoCL")
	}
	forEachKVDType(t, func(t *testing.T, dev, cpu *model.Model) {
		requireSame(t, "device", longRun(t, dev, 0), longRun(t, cpu, 0))
	})
}

package model_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
)

// BenchmarkPrefill measures prompt processing of the fixture model
// (chat_long_300, 314 tokens) in chunks of 512 rows.
func BenchmarkPrefill(b *testing.B) {
	m := tiny(b)
	ids := prompts(b)[5].InputIDs
	b.ReportAllocs()
	for b.Loop() {
		forward(b, m, ids, model.ForwardOptions{})
	}
	b.ReportMetric(float64(b.N*len(ids))/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkDecode measures one decode step for batches of 1 and 8 sequences
// holding a 66-token prompt.
func BenchmarkDecode(b *testing.B) {
	m := tiny(b)
	ids := prompts(b)[4].InputIDs
	for _, batch := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			base, _ := forward(b, m, ids, model.ForwardOptions{})
			seqs := make([]*model.Sequence, batch)
			toks := make([][]int, batch)
			reset := func() {
				for i := range seqs {
					seqs[i], toks[i] = base.Clone(), []int{100 + i}
				}
			}
			reset()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if seqs[0].Len() == m.MaxContext() {
					reset()
				}
				if _, err := m.Forward(context.Background(), seqs, toks, model.ForwardOptions{}); err != nil {
					b.Fatal(err)
				}
				n += batch
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

package model_test

import (
	"fmt"
	"testing"
)

// BenchmarkResume measures what an agent's turn pays before its prefill:
// resuming a context of each depth from a cached span (Sequence.Extend),
// on the synthetic LFM2-8B-A1B shapes. The scheduler extends one 64-token
// block span at a time and copies the same bytes; withContext's context
// has the conv state of its end only, so the context is one span here.
// tokens/s is context tokens resumed per second.
func BenchmarkResume(b *testing.B) {
	for _, depth := range []int{4096, 14528} {
		b.Run(fmt.Sprintf("synth/lfmq1/depth=%d%s", depth, kvName()), func(b *testing.B) {
			m := loadBench(b, benchModel(b, "synth", "lfmq1"), 1)
			defer m.Close()
			src := withContext(b, m, depth)
			conv, ok := src.ConvAt(depth)
			if !ok {
				b.Fatal("no conv state at the context's end")
			}
			sp, err := src.CopySpan(0, depth, conv)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := m.NewSequence().Extend(sp); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*depth)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

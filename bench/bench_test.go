package bench

import (
	"testing"
	"time"
)

// BenchmarkLogprobs measures what per-token log-probs cost against the
// fakes of vLLM and llama.cpp's server (fakeServer: a chunk per token, no
// model, so the cost is the servers' JSON and the bench's reading of it).
// Every iteration runs one stream of ten 64-token requests in each of
// three modes, in turn, so the three share the machine's load: without
// log-probs (off), with the sampled token's (logprobs 0) and with one
// alternative (logprobs 1). It reports each mode's output tokens/s and
// the two modes' ratios to off:
//
//	go test -run '^$' -bench Logprobs -benchtime 10x ./bench
//
// A real server's cost (computing them) is measured by running lfmq bench
// against it the same way (docs/bench.md).
func BenchmarkLogprobs(b *testing.B) {
	modes := []struct {
		name string
		on   bool
		top  int
	}{{"off", false, 0}, {"sampled", true, 0}, {"top1", true, 1}}
	for _, kind := range []string{"vllm", "llama.cpp"} {
		b.Run("server="+kind, func(b *testing.B) {
			f, url := newFake(b, kind)
			elapsed := make([]time.Duration, len(modes))
			tokens := make([]int64, len(modes))
			for range b.N {
				for k, m := range modes {
					o := Options{URL: url, Concurrency: []int{1}, PromptTokens: []int{16}, OutputTokens: 64, Duration: time.Minute,
						MaxRequests: 10, Vocab: f.vocab, Logprobs: m.on, TopLogprobs: m.top, Seed: 1}
					start := time.Now()
					res, err := Run(b.Context(), o)
					elapsed[k] += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					c := res.Cells[0]
					if c.Requests != o.MaxRequests || len(c.Failures) != 0 {
						b.Fatalf("%s: requests %d, failures %v %v", m.name, c.Requests, c.Failures, c.FailureSamples)
					}
					tokens[k] += c.Sent.CompletionTokens
				}
			}
			rate := func(k int) float64 { return float64(tokens[k]) / elapsed[k].Seconds() }
			for k, m := range modes {
				b.ReportMetric(rate(k), m.name+"_tok/s")
			}
			b.ReportMetric(rate(1)/rate(0), "sampled/off")
			b.ReportMetric(rate(2)/rate(0), "top1/off")
		})
	}
}

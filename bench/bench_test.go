package bench

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkLogprobs measures what per-token log-probs cost against the
// fakes of vLLM and llama.cpp's server (fakeServer: a chunk per token, no
// model, so the cost is the servers' JSON and the bench's reading of it):
// one stream of 64-token requests without log-probs, with the sampled
// token's (logprobs 0) and with one alternative (logprobs 1), reported as
// output tokens/s. Run with -count to alternate the three:
//
//	go test -run '^$' -bench Logprobs -count 4 ./bench
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
		for _, m := range modes {
			b.Run(fmt.Sprintf("server=%s/logprobs=%s", kind, m.name), func(b *testing.B) {
				f, url := newFake(b, kind)
				o := Options{URL: url, Concurrency: []int{1}, PromptTokens: []int{16}, OutputTokens: 64, Duration: time.Minute,
					MaxRequests: 10, Vocab: f.vocab, Logprobs: m.on, TopLogprobs: m.top, Seed: 1}
				var tokens int64
				start := time.Now()
				for range b.N {
					res, err := Run(b.Context(), o)
					if err != nil {
						b.Fatal(err)
					}
					c := res.Cells[0]
					if c.Requests != o.MaxRequests || len(c.Failures) != 0 {
						b.Fatalf("requests %d, failures %v %v", c.Requests, c.Failures, c.FailureSamples)
					}
					tokens += c.Sent.CompletionTokens
				}
				b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tok/s")
			})
		}
	}
}

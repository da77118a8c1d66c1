package bench

import (
	"strings"
	"testing"
	"time"
)

// FuzzReadStream: any bytes a server sends as its event stream give a
// result or an error, never a panic, and never more token events than
// the stream has bytes.
func FuzzReadStream(f *testing.F) {
	f.Add("data: {\"choices\":[{\"text\":\"a\",\"logprobs\":{\"tokens\":[\"a\"]}}]}\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n")
	f.Add("data: {\"error\":\"x\"}\n")
	f.Add("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		res, err := readStream(strings.NewReader(s), func() time.Duration { return time.Millisecond })
		if res == nil {
			t.Fatalf("nil result (err %v)", err)
		}
		if n := res.tokens(); n < 0 || n > len(s) {
			t.Fatalf("%d tokens from %d bytes", n, len(s))
		}
	})
}

// FuzzParseMetrics: any /metrics answer parses or is refused, never a
// panic.
func FuzzParseMetrics(f *testing.F) {
	f.Add("lfmq_requests_total{route=\"/v1/completions\",status=\"200\"} 12\n# c\nvllm:x_total 1e3 17\n")
	f.Add("lfmq_a_total{a=\"\\\"}\"} 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		parseMetrics([]byte(s))
	})
}

package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/synth"
	"github.com/lfmq/lfmq/engine/sched"
	"github.com/lfmq/lfmq/quant"
)

// The server's speed benchmarks (make bench, or
// go test -run '^$' -bench Serve -benchtime 3x ./engine/api):
//
//   - Serve/decode: one user's greedy decode over HTTP against the same
//     decode through engine/generate (what lfmq generate runs), in the
//     same run, interleaved: http_tok/s, generate_tok/s and their ratio.
//     Decode speed is (N−1)/(t(N) − t(1)) for non-streaming requests of N
//     and of 1 new tokens, so prefill and HTTP set-up cancel out.
//   - Serve/users=U: U concurrent users, each a 64-token greedy
//     completion of its own 32-token prompt: aggregate tokens/s.
//   - Serve/ttft=P: time to the first token of a P-token prompt.
//
// They run on the RTN lfmq-1 quantization of a synthetic checkpoint with
// LFM2-8B-A1B's layer shapes (engine/model/synth.RealShape: 4 of the 24
// layers, so per-token times are about a sixth of the real model's), with
// the fixture's tokenizer, written to a temporary directory (or kept under
// $LFMQ_BENCH_SYNTH_DIR/serve-synth-*). Generation ignores stop tokens
// (min_tokens) so every request makes exactly its tokens.

var (
	serveSynthOnce sync.Once
	serveSynthDir  string
	serveSynthErr  error
	serveSynthTmp  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if serveSynthTmp != "" {
		os.RemoveAll(serveSynthTmp)
	}
	os.Exit(code)
}

// serveSynth returns the synthetic lfmq-1 checkpoint with a tokenizer.
func serveSynth(b *testing.B) string {
	serveSynthOnce.Do(func() {
		root := os.Getenv("LFMQ_BENCH_SYNTH_DIR")
		if root == "" {
			if serveSynthTmp, serveSynthErr = os.MkdirTemp("", "lfmq-serve-bench-"); serveSynthErr != nil {
				return
			}
			root = serveSynthTmp
		}
		src, dst := filepath.Join(root, "serve-synth-bf16"), filepath.Join(root, "serve-synth-rtn")
		serveSynthDir = dst
		if _, err := os.Stat(filepath.Join(dst, "manifest.json")); err == nil {
			return
		}
		if _, serveSynthErr = synth.Write(context.Background(), src, synth.Options{Seed: 1}); serveSynthErr != nil {
			return
		}
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"} {
			data, err := os.ReadFile(filepath.Join(tinyModel, f))
			if err == nil {
				err = os.WriteFile(filepath.Join(src, f), data, 0o644)
			}
			if err != nil {
				serveSynthErr = err
				return
			}
		}
		os.RemoveAll(dst)
		_, serveSynthErr = quant.Quantize(context.Background(), quant.Options{ModelDir: src, OutDir: dst, Method: quant.RTN, CreatedBy: "bench"})
		os.RemoveAll(src)
	})
	if serveSynthErr != nil {
		b.Fatal(serveSynthErr)
	}
	return serveSynthDir
}

// benchServer serves dir with a scheduler of its own.
func benchServer(b *testing.B, sess *generate.Session, sc sched.Config) string {
	s := New(Options{ServedModelName: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	sch, err := sched.New(sess.Model, sc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sch.Run(ctx); close(done) }()
	s.SetReady(&Engine{Session: sess, Sched: sch})
	hs := httptest.NewServer(s.Handler())
	b.Cleanup(func() { hs.Close(); cancel(); <-done })
	return hs.URL
}

func randomPrompt(rng *rand.Rand, n int) []int {
	p := make([]int, n)
	p[0] = 1
	for i := 1; i < n; i++ {
		p[i] = 300 + rng.IntN(7800)
	}
	return p
}

// complete posts a greedy completion of exactly n new tokens and returns
// how long it took.
func complete(b *testing.B, url string, prompt []int, n int) time.Duration {
	t0 := time.Now()
	status, body := post(b, url+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": n, "min_tokens": n, "temperature": 0})
	if status != 200 {
		b.Fatalf("%d %s", status, body)
	}
	return time.Since(t0)
}

func BenchmarkServe(b *testing.B) {
	dir := serveSynth(b)
	sess, err := generate.Open(dir, model.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	url := benchServer(b, sess, sched.Config{MaxModelLen: 4096})
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 64
	complete(b, url, randomPrompt(rng, 16), 4) // warm-up: page the weights in

	b.Run("decode", func(b *testing.B) {
		var httpSec, genSec float64
		for range b.N {
			prompt := randomPrompt(rng, 16)
			t1 := complete(b, url, prompt, 1)
			tn := complete(b, url, prompt, n)
			httpSec += (tn - t1).Seconds()
			p := greedyParams()
			p.MinTokens, p.StopIDs = n, sess.StopIDs
			res, err := sess.Run(context.Background(), prompt, generate.Options{MaxTokens: n, Params: p})
			if err != nil {
				b.Fatal(err)
			}
			genSec += res.DecodeTime.Seconds()
		}
		h, g := float64(b.N*(n-1))/httpSec, float64(b.N*(n-1))/genSec
		b.ReportMetric(h, "http_tok/s")
		b.ReportMetric(g, "generate_tok/s")
		b.ReportMetric(h/g, "ratio")
	})

	for _, users := range []int{1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			var wall time.Duration
			for range b.N {
				prompts := make([][]int, users)
				for u := range prompts {
					prompts[u] = randomPrompt(rng, 32)
				}
				t0 := time.Now()
				var wg sync.WaitGroup
				for u := range users {
					wg.Go(func() { complete(b, url, prompts[u], n) })
				}
				wg.Wait()
				wall += time.Since(t0)
			}
			b.ReportMetric(float64(b.N*users*n)/wall.Seconds(), "agg_tok/s")
		})
	}

	for _, p := range []int{128, 2048} {
		b.Run(fmt.Sprintf("ttft=%d", p), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				total += complete(b, url, randomPrompt(rng, p), 1)
			}
			b.ReportMetric(total.Seconds()*1000/float64(b.N), "ttft_ms")
		})
	}
}

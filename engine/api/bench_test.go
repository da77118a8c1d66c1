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
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/model/load"
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

// synthSession opens the synthetic checkpoint for one benchmark.
func synthSession(b *testing.B) *generate.Session {
	sess, err := generate.Open(serveSynth(b), load.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sess.Close() })
	return sess
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
	sess := synthSession(b)
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

// BenchmarkSpeculation: one user's decode with speculation off and on (two
// servers on the same model, interleaved): decode tokens/s of each, their
// ratio, and with speculation the acceptance and tokens per verify step.
// Decode speed is (N−1)/(t(N) − t(1)) as in BenchmarkServe. Workloads:
//
//   - copy: the synthetic model has random weights and never copies from
//     its context by itself; a logit bias of +100 on four of the prompt's
//     tokens confines its greedy answer to them, and after a short
//     transient the answer repeats itself, as a real model re-emitting a
//     document or a file under edit does (the draft comes from the
//     answer's own earlier text);
//   - free: seeded sampling at temperature 0.8, which never repeats.
func BenchmarkSpeculation(b *testing.B) {
	sess := synthSession(b)
	cfg := sched.Config{MaxModelLen: 4096, PrefixCache: sched.PrefixConfig{Off: true}}
	off := cfg
	off.Speculation.Off = true
	urlOff, urlOn := benchServer(b, sess, off), benchServer(b, sess, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 256
	for _, wl := range []string{"copy", "free"} {
		b.Run(wl, func(b *testing.B) {
			var secOff, secOn float64
			stats := func(url string) (steps, emitted, draft, accepted float64) {
				return metricValue(b, url, "lfmq_spec_verify_steps_total"), metricValue(b, url, "lfmq_spec_emitted_tokens_total"),
					metricValue(b, url, "lfmq_spec_draft_tokens_total"), metricValue(b, url, "lfmq_spec_accepted_tokens_total")
			}
			s0, e0, d0, a0 := stats(urlOn)
			for range b.N {
				var prompt []int
				body := map[string]any{"temperature": 0}
				if wl == "copy" {
					passage := randomPrompt(rng, 400)[1:]
					prompt = slices.Concat([]int{1}, passage, passage[:24])
					bias := map[string]float64{}
					for _, id := range passage[:4] {
						bias[fmt.Sprint(id)] = 100
					}
					body["logit_bias"] = bias
				} else {
					prompt = randomPrompt(rng, 64)
					body = map[string]any{"temperature": 0.8, "seed": rng.IntN(1 << 30)}
				}
				timed := func(url string, max int) time.Duration {
					req := map[string]any{"prompt": prompt, "max_tokens": max, "min_tokens": max}
					for k, v := range body {
						req[k] = v
					}
					t0 := time.Now()
					if status, out := post(b, url+"/v1/completions", req); status != 200 {
						b.Fatalf("%d %s", status, out)
					}
					return time.Since(t0)
				}
				secOff += (timed(urlOff, n) - timed(urlOff, 1)).Seconds()
				secOn += (timed(urlOn, n) - timed(urlOn, 1)).Seconds()
			}
			s1, e1, d1, a1 := stats(urlOn)
			tOff, tOn := float64(b.N*(n-1))/secOff, float64(b.N*(n-1))/secOn
			b.ReportMetric(tOff, "off_tok/s")
			b.ReportMetric(tOn, "on_tok/s")
			b.ReportMetric(tOn/tOff, "speedup")
			if d1 > d0 {
				b.ReportMetric((a1-a0)/(d1-d0), "acceptance")
				b.ReportMetric((e1-e0)/(s1-s0), "tok/verify")
			}
			b.ReportMetric(s1-s0, "verify_steps")
		})
	}
}

// BenchmarkPrefixCache: time to the first token of a 2,000-token prompt
// sent cold (a new prompt each time) and again right after (resumed from
// the prefix cache), on one server.
func BenchmarkPrefixCache(b *testing.B) {
	sess := synthSession(b)
	url := benchServer(b, sess, sched.Config{MaxModelLen: 4096})
	rng := rand.New(rand.NewPCG(5, 6))
	var cold, warm time.Duration
	for range b.N {
		prompt := randomPrompt(rng, 2000)
		cold += complete(b, url, prompt, 1)
		warm += complete(b, url, prompt, 1)
	}
	b.ReportMetric(cold.Seconds()*1000/float64(b.N), "cold_ms")
	b.ReportMetric(warm.Seconds()*1000/float64(b.N), "cached_ms")
	b.ReportMetric(cold.Seconds()/warm.Seconds(), "ratio")
}

package sched

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/format/safetensors"
)

// shuffledDrafter writes the fixture's drafter with every tensor's values
// permuted (seeded): the same shapes, statistics and cost, and drafts
// that almost never survive.
func shuffledDrafter(b *testing.B) string {
	dir := b.TempDir()
	cfg, err := os.ReadFile(filepath.Join(tinyDrafter, "config.json"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(tinyDrafter, "model.safetensors"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(43, 1))
	var ts []safetensors.Tensor
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		data, err := f.Bytes(name)
		if err != nil {
			b.Fatal(err)
		}
		out := make([]byte, len(data))
		w := len(data) / int(info.NumElements()) // bytes per value
		for i, j := range rng.Perm(int(info.NumElements())) {
			copy(out[i*w:(i+1)*w], data[j*w:(j+1)*w])
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: out})
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkDrafterCostsNothing: decode with the fixture's drafter and with
// that drafter's weights shuffled (drafts that never survive), scheduled
// as lfmq serve schedules them, against plain decoding, for 1 and 16
// users at once, each answering 64 tokens of a chat prompt (greedy and
// seeded); the servers take turns in every iteration, and a fourth keeps
// the trained drafter's context without ever drafting (context/plain: the
// floor). The figures to read are trained/plain and shuffled/plain: on
// this model, bound by arithmetic on 2 cores, drafting does not pay, and
// the guard must hold it off so that a drafter costs at most the context
// it keeps (the goal: ≥ 0.95× plain). The guard's first decisions, paid
// for in the first warmRuns runs, are reported apart (shuffled_first/plain).
func BenchmarkDrafterCostsNothing(b *testing.B) {
	plainM, err := load.Load(tinyModel, load.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { plainM.Close() })
	servers := map[string]*Scheduler{"plain": start(b, plainM, Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})}
	for name, dir := range map[string]string{"trained": tinyDrafter, "shuffled": shuffledDrafter(b)} {
		m, err := load.Load(tinyModel, load.Options{})
		if err != nil {
			b.Fatal(err)
		}
		d, err := draft.Load(dir, m)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close(); m.Close() })
		costs, err := MeasureDraftCosts(context.Background(), m, d, 16)
		if err != nil {
			b.Fatal(err)
		}
		servers[name] = start(b, m, Config{Drafter: d, DraftCosts: costs, Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})
		if name == "trained" {
			// The drafter's context kept, never drafted: its floor.
			servers["context"] = start(b, m, Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})
		}
	}
	ps := fixturePrompts(b)
	const n, warmRuns = 64, 8
	for _, users := range []int{1, 16} {
		b.Run(map[int]string{1: "users=1", 16: "users=16"}[users], func(b *testing.B) {
			took := map[string]time.Duration{}
			run := func(s *Scheduler, iter int) time.Duration {
				recs := make([]*recorder, users)
				t0 := time.Now()
				for u := range users {
					p := greedy()
					if u%2 == 1 {
						p = sample.Neutral()
						p.Temperature, p.TopP, p.Seed = 0.6, 0.95, uint64(iter*users+u)
					}
					recs[u] = newRecorder()
					if err := s.Submit(context.Background(), &Request{Prompt: ps[(iter+len(ps)*warmRuns+u)%len(ps)].InputIDs, MaxTokens: n, Params: p, Sink: recs[u]}); err != nil {
						b.Fatal(err)
					}
				}
				for _, r := range recs {
					r.wait(b)
				}
				return time.Since(t0)
			}
			// The guard's first decisions at each width class are paid for
			// in the first runs (a few drafted steps, then pauses that
			// double): those runs are timed apart, as first/plain.
			first := map[string]time.Duration{}
			for i := range warmRuns {
				for _, name := range []string{"plain", "context", "trained", "shuffled"} {
					first[name] += run(servers[name], -1-i)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				for _, name := range []string{"plain", "context", "trained", "shuffled"} {
					took[name] += run(servers[name], i)
				}
			}
			for _, name := range []string{"context", "trained", "shuffled"} {
				b.ReportMetric(took["plain"].Seconds()/took[name].Seconds(), name+"/plain")
			}
			b.ReportMetric(first["plain"].Seconds()/first["shuffled"].Seconds(), "shuffled_first/plain")
			b.ReportMetric(float64(b.N*users*n)/took["plain"].Seconds(), "plain_tok/s")
			st := servers["shuffled"].Stats()
			if st.DraftTokens > 0 {
				b.ReportMetric(float64(st.DraftAccepted)/float64(st.DraftTokens), "shuffled_acceptance")
			}
		})
	}
}

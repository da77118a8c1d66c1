package sched

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/sample"
)

// corpusIDs returns the input_ids of the first n records of a fixture
// corpus.
func corpusIDs(b *testing.B, name string, n int) [][]int {
	f, err := os.Open("../../testdata/tiny-lfm2-moe/corpora/" + name + ".jsonl")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var out [][]int
	for sc.Scan() && len(out) < n {
		var r struct {
			InputIDs []int `json:"input_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			b.Fatal(err)
		}
		out = append(out, r.InputIDs)
	}
	return out
}

// BenchmarkSpeculation runs one request at a time on the trained fixture
// model with speculation off and on, interleaved, and reports decode
// tokens/s of each, the speed-up, the draft acceptance and the tokens per
// verify step, for three workloads:
//
//   - copy: a code file, then its first 48 tokens again; greedy, so the
//     model continues the file it has just seen (an edit or a re-quote);
//   - quote: a book passage, a blank line and its first 48 tokens
//     (document QA quoting its source);
//   - free: a chat prompt answered with seeded sampling at temperature 0.8.
//
// On this small model a step's cost grows with its width about as fast as
// the tokens it may emit (the work is arithmetic, not reading weights), so
// the policy measures that and stops drafting: the figure to look for
// here is that speculation costs nothing. On a memory-bound model a
// verify step reads the weights once for several tokens; see
// BenchmarkVerifyStep in engine/model for that cost at LFM2-8B-A1B shapes
// and BenchmarkSpeculation in engine/api for the speed-up there.
func BenchmarkSpeculation(b *testing.B) {
	m := loadTiny(b)
	off := start(b, m, Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})
	on := start(b, m, Config{PrefixCache: PrefixConfig{Off: true}})
	code, book := corpusIDs(b, "code", 8), corpusIDs(b, "book", 8)
	ps := fixturePrompts(b)
	const n = 128
	workloads := map[string]func(i int) ([]int, sample.Params){
		"copy": func(i int) ([]int, sample.Params) {
			f := code[i%len(code)][:min(400, len(code[i%len(code)]))]
			return slices.Concat(f, f[:48]), greedy()
		},
		"quote": func(i int) ([]int, sample.Params) {
			p := book[i%len(book)][:min(400, len(book[i%len(book)]))]
			return slices.Concat(p, []int{p[0]}, p[1:48]), greedy()
		},
		"free": func(i int) ([]int, sample.Params) {
			p := sample.Neutral()
			p.Temperature, p.Seed = 0.8, uint64(i)
			return ps[2+i%4].InputIDs, p
		},
	}
	for _, name := range []string{"copy", "quote", "free"} {
		b.Run(name, func(b *testing.B) {
			var tOff, tOn time.Duration
			st0 := on.Stats()
			decode := func(s *Scheduler, prompt []int, p sample.Params) time.Duration {
				r := newRecorder()
				if err := s.Submit(context.Background(), &Request{Prompt: prompt, MaxTokens: n, Params: p, Sink: r}); err != nil {
					b.Fatal(err)
				}
				<-r.first
				t0 := time.Now()
				r.wait(b)
				return time.Since(t0)
			}
			for i := range b.N {
				prompt, p := workloads[name](i)
				tOff += decode(off, prompt, p)
				tOn += decode(on, prompt, p)
			}
			st := on.Stats()
			steps, draft := st.SpecSteps-st0.SpecSteps, st.SpecDraftTokens-st0.SpecDraftTokens
			rOff, rOn := float64(b.N*(n-1))/tOff.Seconds(), float64(b.N*(n-1))/tOn.Seconds()
			b.ReportMetric(rOff, "off_tok/s")
			b.ReportMetric(rOn, "on_tok/s")
			b.ReportMetric(rOn/rOff, "speedup")
			if draft > 0 {
				b.ReportMetric(float64(st.SpecAcceptedTokens-st0.SpecAcceptedTokens)/float64(draft), "acceptance")
				b.ReportMetric(float64(st.SpecEmittedTokens-st0.SpecEmittedTokens)/float64(steps), "tok/verify")
			}
			b.ReportMetric(float64(steps)/float64(b.N), "verify_steps/op")
		})
	}
}

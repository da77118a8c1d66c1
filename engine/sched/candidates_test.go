package sched

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/sample"
)

// submitN submits a request with n candidates (candidate i seeded by
// CandidateSeed) and returns their recorders, candidate 0 first.
func submitN(t *testing.T, s *Scheduler, ctx context.Context, prompt []int, max int, p sample.Params, n int, sink0 *recorder) []*recorder {
	t.Helper()
	recs := []*recorder{sink0}
	if sink0 == nil {
		recs[0] = newRecorder()
	}
	r := &Request{ID: "n", Prompt: prompt, MaxTokens: max, Params: p, Sink: recs[0]}
	for i := 1; i < n; i++ {
		recs = append(recs, newRecorder())
		r.Candidates = append(r.Candidates, Candidate{Seed: CandidateSeed(p.Seed, i), Sink: recs[i]})
	}
	if err := s.Submit(ctx, r); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestCandidates: a request's candidates (OpenAI's n) answer as requests
// with n = 1 and the derived seeds do; greedy ones are all the fixture's
// greedy continuation. The prompt is prefilled once (in chunks here) and
// cloned.
func TestCandidates(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	seeded := sample.Neutral()
	seeded.Temperature, seeded.TopK, seeded.Seed = 0.9, 50, 7
	for _, tc := range []struct {
		name   string
		prompt fixturePrompt
		params sample.Params
		n      int
	}{
		{"greedy n=3", ps[3], greedy(), 3},
		{"seeded n=3", ps[3], seeded, 3},
		{"seeded n=4 short prompt", ps[0], seeded, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, m, Config{PrefillChunk: 64})
			max := len(tc.prompt.GreedyIDs)
			recs := submitN(t, s, context.Background(), tc.prompt.InputIDs, max, tc.params, tc.n, nil)
			distinct := map[string]bool{}
			for i, r := range recs {
				r.wait(t)
				if r.err != nil || r.reason != FinishLength {
					t.Fatalf("candidate %d: %v %v", i, r.reason, r.err)
				}
				distinct[string(rune(len(r.tokens)))+fmtIDs(r.tokens)] = true
				var want []int
				if tc.params.Temperature == 0 {
					want = tc.prompt.GreedyIDs
				} else {
					p := tc.params
					p.Seed = CandidateSeed(tc.params.Seed, i)
					one := newRecorder()
					if err := s.Submit(context.Background(), &Request{Prompt: tc.prompt.InputIDs, MaxTokens: max, Params: p, Sink: one}); err != nil {
						t.Fatal(err)
					}
					one.wait(t)
					want = one.tokens
				}
				if !slices.Equal(r.tokens, want) {
					t.Errorf("candidate %d: %v\nwant %v", i, r.tokens, want)
				}
			}
			if tc.params.Temperature > 0 && len(distinct) < 2 {
				t.Errorf("seeded candidates all drew the same tokens")
			}
			if st := s.Stats(); st.Running != 0 || st.KVReservedTokens != 0 || st.KVUsedTokens != 0 {
				t.Errorf("after the run: %+v", st)
			}
		})
	}
}

func fmtIDs(ids []int) string {
	b := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		b = append(b, byte(id), byte(id>>8), byte(id>>16), ',')
	}
	return string(b)
}

// statsProbe is a Sink that snapshots the scheduler's Stats as its first
// and second tokens arrive (in the loop's goroutine, so nothing runs
// between).
type statsProbe struct {
	*recorder
	s    *Scheduler
	seen []Stats
}

func (p *statsProbe) Token(id int, logits []float32, stop bool) bool {
	if len(p.seen) < 2 {
		p.seen = append(p.seen, p.s.Stats())
	}
	return p.recorder.Token(id, logits, stop)
}

// TestCandidatePages: a request with n = 4 holds its prompt's pages once,
// by reference; the first decode copies the prompt's last, partial page
// for all but the last writer, and nothing else is copied. The pool's
// arithmetic (docs/serving.md §8): the prompt's whole pages once, and per
// candidate the pages of its partial prompt page and its output, so a pool
// of exactly that serves it and one page less refuses it.
func TestCandidatePages(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	prompt := ps[3].InputIDs // 143 tokens: 2 whole pages of 64 and a partial one
	const n, max = 4, 8
	// Per candidate: pages of 143+8 tokens = 3, of which 2 shared.
	want := 3 + (n-1)*(3-2)
	off := PrefixConfig{Off: true}
	for _, tc := range []struct {
		name  string
		pages int
		err   string
	}{
		{"pool of the reservation", want, ""},
		{"one page less", want - 1, "kv_pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, m, Config{KVPoolTokens: tc.pages * 64, PrefixCache: off})
			probe := &statsProbe{recorder: newRecorder(), s: s}
			r := &Request{Prompt: prompt, MaxTokens: max, Params: greedy(), Sink: probe}
			var recs []*recorder
			for i := 1; i < n; i++ {
				recs = append(recs, newRecorder())
				r.Candidates = append(r.Candidates, Candidate{Sink: recs[i-1]})
			}
			err := s.Submit(context.Background(), r)
			if tc.err != "" {
				var le *LimitError
				if !errors.As(err, &le) || le.What != tc.err || le.N != n {
					t.Fatalf("got %v, want a %s LimitError for %d candidates", err, tc.err, n)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			probe.wait(t)
			for i, r := range recs {
				r.wait(t)
				if r.err != nil || !slices.Equal(r.tokens, probe.tokens) || len(r.tokens) != max {
					t.Errorf("candidate %d: %v %v, want %v", i+1, r.err, r.tokens, probe.tokens)
				}
			}
			if len(probe.seen) != 2 {
				t.Fatalf("probed %d times", len(probe.seen))
			}
			first, second := probe.seen[0], probe.seen[1]
			if first.Running != n || first.KVReservedTokens != len(prompt)+n*max {
				t.Errorf("after the prompt: %d running, %d tokens reserved; want %d, %d", first.Running, first.KVReservedTokens, n, len(prompt)+n*max)
			}
			// Cloned: the prompt's 3 pages, held by all four.
			if first.KVPagesUsed != 3 || first.KVPagesShared != 3 {
				t.Errorf("after the prompt: %d pages used, %d shared; want 3, 3", first.KVPagesUsed, first.KVPagesShared)
			}
			// One decode: 3 copies of the partial page.
			if second.KVPagesUsed != 2+n || second.KVPagesShared != 2 {
				t.Errorf("after one decode: %d pages used, %d shared; want %d, 2", second.KVPagesUsed, second.KVPagesShared, 2+n)
			}
			if st := s.Stats(); st.KVPagesUsed != 0 || st.KVReservedTokens != 0 {
				t.Errorf("after the run: %+v", st)
			}
		})
	}
}

// TestCandidateLimits: more candidates than MaxNumSeqs can never run;
// candidates need a generation; a request cancelled before it starts ends
// every candidate.
func TestCandidateLimits(t *testing.T) {
	m := loadTiny(t)
	s := start(t, m, Config{MaxNumSeqs: 3})
	var le *LimitError
	r := &Request{Prompt: []int{1, 2}, MaxTokens: 2, Params: greedy(), Sink: newRecorder()}
	for range 3 {
		r.Candidates = append(r.Candidates, Candidate{Sink: newRecorder()})
	}
	if err := s.Submit(context.Background(), r); !errors.As(err, &le) || le.What != "max_num_seqs" || le.N != 4 || le.Limit != 3 {
		t.Errorf("4 candidates over 3 sequences: %v", err)
	}
	var ie *InputError
	for name, r := range map[string]*Request{
		"prompt logits": {Prompt: []int{1}, PromptLogits: true, Sink: newRecorder(), Candidates: []Candidate{{Sink: newRecorder()}}},
		"no sink":       {Prompt: []int{1}, MaxTokens: 1, Params: greedy(), Sink: newRecorder(), Candidates: []Candidate{{}}},
	} {
		if err := s.Submit(context.Background(), r); !errors.As(err, &ie) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i, rec := range submitN(t, s, ctx, []int{1, 2}, 2, greedy(), 3, nil) {
		rec.wait(t)
		if rec.reason != FinishCancelled {
			t.Errorf("candidate %d of a cancelled request: %v", i, rec.reason)
		}
	}
	// Cancelled while decoding (a client went away): every candidate
	// ends and gives its pages and its share of the reservation back.
	ctx, cancel = context.WithCancel(context.Background())
	recs := submitN(t, s, ctx, []int{1, 2, 3}, 3000, greedy(), 3, nil)
	<-recs[2].first
	cancel()
	for i, rec := range recs {
		rec.wait(t)
		if rec.reason != FinishCancelled {
			t.Errorf("candidate %d cancelled while decoding: %v", i, rec.reason)
		}
	}
	if st := s.Stats(); st.Running != 0 || st.KVReservedTokens != 0 || st.KVUsedTokens != 0 {
		t.Errorf("after cancelling: %+v", st)
	}
}

package sched

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// loadLFM3 loads the LFM3 fixture: sliding layers of window 32.
func loadLFM3(t testing.TB) (*model.Model, []fixturePrompt) {
	t.Helper()
	m, err := load.Load("../../testdata/tiny-lfm3/model", load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	data, err := os.ReadFile("../../testdata/tiny-lfm3/reference/prompts.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Prompts []fixturePrompt }
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return m, f.Prompts
}

// TestLFM3WindowServing: on tiny-lfm3, whose sequences give back their
// sliding layers' pages as the window moves on, prompt-lookup
// speculation (verify steps rewound past rejected drafts) and the prefix
// cache (blocks registered after each prefill chunk and decode step,
// resumed by Extend) give what plain greedy decoding from a cold start
// gives, token for token, over prompts and answers several windows long;
// a follow-up turn resumes every whole block of prompt and answer. The
// second turn runs three requests at once, so that pages given back are
// taken again at once (speculation runs in the first, alone).
func TestLFM3WindowServing(t *testing.T) {
	m, ps := loadLFM3(t)
	const B = 64
	passage := ps[5].InputIDs[20:140]
	copyPrompt := slices.Concat(ps[5].InputIDs[:20], passage, passage[:12]) // the model copies: drafts are accepted
	cold := start(t, m, Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}, PrefillChunk: 100})
	cases := []struct {
		name   string
		prompt []int
		cfg    Config
	}{
		{"speculation, long prompt", ps[5].InputIDs, Config{PrefixCache: PrefixConfig{Off: true}, Speculation: SpecConfig{Tokens: 7}}},
		{"speculation, copy prompt", copyPrompt, Config{PrefixCache: PrefixConfig{Off: true}, Speculation: SpecConfig{Tokens: 7}, PrefillChunk: 33}},
		{"prefix cache, chunks of 100", ps[5].InputIDs, Config{PrefixCache: PrefixConfig{Identity: "tiny-lfm3"}, PrefillChunk: 100, Speculation: SpecConfig{Off: true}}},
		{"prefix cache and speculation, chunks of 7", copyPrompt, Config{PrefixCache: PrefixConfig{Identity: "tiny-lfm3"}, PrefillChunk: 7, Speculation: SpecConfig{Tokens: 7}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, m, c.cfg)
			const answer = 100 // three windows of decoding
			want := runOne(t, cold, &Request{Prompt: c.prompt, MaxTokens: answer, Params: greedy()})
			// In the second turn two more requests run beside it: the
			// pages one sequence gives back are taken by another at once.
			others := [][]int{ps[3].InputIDs, ps[4].InputIDs}
			var wantOthers []*recorder
			for _, o := range others {
				wantOthers = append(wantOthers, runOne(t, cold, &Request{Prompt: o, MaxTokens: answer, Params: greedy()}))
			}
			for turn := range 2 {
				var recs []*recorder
				batch := [][]int{c.prompt}
				if turn == 1 {
					batch = append(batch, others...)
				}
				for _, p := range batch {
					rec := newRecorder()
					if err := s.Submit(context.Background(), &Request{Prompt: p, MaxTokens: answer, Params: greedy(), Sink: rec}); err != nil {
						t.Fatal(err)
					}
					recs = append(recs, rec)
				}
				for i, rec := range recs {
					rec.wait(t)
					if rec.err != nil {
						t.Fatal(rec.err)
					}
					ref := want
					if i > 0 {
						ref = wantOthers[i-1]
					}
					if !slices.Equal(rec.tokens, ref.tokens) {
						t.Fatalf("turn %d, request %d:\n got %v\ncold %v", turn, i, rec.tokens, ref.tokens)
					}
				}
				got := recs[0]
				if st := s.Stats(); turn == 0 && !c.cfg.Speculation.Off && st.SpecSteps == 0 {
					t.Errorf("no verify step ran: %+v", st)
				}
				if wantCached := turn * (len(c.prompt) - 1) / B * B; !c.cfg.PrefixCache.Off && got.cached != wantCached {
					t.Errorf("turn %d resumed %d tokens, want %d", turn, got.cached, wantCached)
				}
			}
			if !c.cfg.PrefixCache.Off {
				follow := slices.Concat(c.prompt, want.tokens[:len(want.tokens)-1], ps[2].InputIDs)
				got := runOne(t, s, &Request{Prompt: follow, MaxTokens: 12, Params: greedy()})
				ref := runOne(t, cold, &Request{Prompt: follow, MaxTokens: 12, Params: greedy()})
				if !slices.Equal(got.tokens, ref.tokens) {
					t.Errorf("follow-up resumed from the cache %v\ncold %v", got.tokens, ref.tokens)
				}
				if wantCached := (len(c.prompt) + answer - 1) / B * B; got.cached != wantCached {
					t.Errorf("the follow-up turn resumed %d tokens, want %d (every whole block of prompt and answer)", got.cached, wantCached)
				}
			}
			if st := s.Stats(); st.KVUsedTokens != 0 || st.KVReservedTokens != 0 {
				t.Errorf("state left behind: %+v", st)
			}
		})
	}
}

package sched

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
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

// TestLFM3WindowDrafted: with a DSpark drafter attached to tiny-lfm3 (the
// tiny MoE target's drafter, its config's target depth set to tiny-lfm3's
// 10 layers in a temporary copy: its drafts are poor, which exactness does
// not need), measuring the verify costs (steps on a 256-token context,
// eight windows, each rewound to it) succeeds, and drafted decoding at a
// fixed depth, alone and three at once, gives plain greedy decoding's
// tokens over answers several windows long: no rewind the engine makes
// needs a window page given back.
func TestLFM3WindowDrafted(t *testing.T) {
	plainM, ps := loadLFM3(t)
	m, _ := loadLFM3(t)
	dir := t.TempDir()
	cfg, err := os.ReadFile(tinyDrafter + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.ReplaceAll(cfg, []byte(`"num_target_layers": 8`), []byte(`"num_target_layers": 10`))
	if err := os.WriteFile(dir+"/config.json", cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(tinyDrafter + "/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, dir+"/model.safetensors"); err != nil {
		t.Fatal(err)
	}
	d, err := draft.Load(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	costs, err := MeasureDraftCosts(context.Background(), m, d, 4)
	if err != nil {
		t.Fatalf("measuring the verify costs on a 256-token context: %v", err)
	}
	plain := start(t, plainM, Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})
	drafted := start(t, m, Config{Drafter: d, DraftCosts: costs, DraftDepth: 5, Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})
	reqs := func() []*Request {
		var rs []*Request
		for i, p := range []fixturePrompt{ps[5], ps[3], ps[4]} {
			rs = append(rs, &Request{ID: fmt.Sprint(i), Prompt: p.InputIDs, MaxTokens: 100, Params: greedy()})
		}
		return rs
	}
	want, _ := runAll(t, plain, reqs())
	got, _ := runAll(t, drafted, reqs())
	for i, r := range reqs()[:1] {
		alone, _ := runAll(t, drafted, []*Request{r})
		got = append(got, alone[0])
		want = append(want, want[i])
	}
	for i := range got {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d: drafted %v\nplain %v", i, got[i], want[i])
		}
	}
	st := drafted.Stats()
	if st.DraftPasses == 0 || st.DraftSteps == 0 {
		t.Errorf("no draft was verified: %+v", st)
	}
	t.Logf("drafter passes %d, verify steps %d, draft tokens %d, accepted %d", st.DraftPasses, st.DraftSteps, st.DraftTokens, st.DraftAccepted)
}

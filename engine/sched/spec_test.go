package sched

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/sample"
)

// run submits one request to s and waits for it.
func runOne(t *testing.T, s *Scheduler, r *Request) *recorder {
	t.Helper()
	rec := newRecorder()
	r.Sink = rec
	if err := s.Submit(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	return rec
}

// TestSpeculationExact: greedy and seeded sampled generation give the same
// tokens with speculation on and off, on prompts that the model copies
// from and on free text; drafts were verified and some accepted.
func TestSpeculationExact(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	off := start(t, m, Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})
	on := start(t, m, Config{PrefixCache: PrefixConfig{Off: true}, Speculation: SpecConfig{Tokens: 7}})
	// A copy-heavy prompt: a passage, then the start of the same passage.
	passage := ps[5].InputIDs[20:140]
	copyPrompt := slices.Concat(ps[5].InputIDs[:20], passage, passage[:12])
	prompts := map[string][]int{"copy": copyPrompt, "prose": ps[0].InputIDs, "chat": ps[2].InputIDs, "long": ps[5].InputIDs}
	params := map[string]sample.Params{"greedy": greedy()}
	for i, T := range []float64{0.7, 1.0} {
		p := sample.Neutral()
		p.Temperature, p.TopK, p.RepetitionPenalty, p.Seed = T, 40, 1.02, uint64(77+i)
		params[fmt.Sprintf("T=%v", T)] = p
	}
	for pn, prompt := range prompts {
		for qn, q := range params {
			t.Run(pn+"/"+qn, func(t *testing.T) {
				a := runOne(t, off, &Request{Prompt: prompt, MaxTokens: 80, Params: q})
				b := runOne(t, on, &Request{Prompt: prompt, MaxTokens: 80, Params: q})
				if !slices.Equal(a.tokens, b.tokens) || a.reason != b.reason {
					t.Errorf("speculation changed the output:\noff %v %v\non  %v %v", a.reason, a.tokens, b.reason, b.tokens)
				}
			})
		}
	}
	st := on.Stats()
	if st.SpecSteps == 0 || st.SpecAcceptedTokens == 0 || st.SpecEmittedTokens <= st.SpecSteps {
		t.Errorf("speculation did not run or never paid: %+v", st)
	}
	if s := off.Stats(); s.SpecSteps != 0 {
		t.Errorf("speculation ran while off: %+v", s)
	}
	t.Logf("verify steps %d, draft tokens %d, accepted %d, emitted %d (%.2f tokens/step)", st.SpecSteps, st.SpecDraftTokens,
		st.SpecAcceptedTokens, st.SpecEmittedTokens, float64(st.SpecEmittedTokens)/float64(st.SpecSteps))
	if st.KVUsedTokens != 0 || st.KVReservedTokens != 0 {
		t.Errorf("state left behind: %+v", st)
	}
}

// TestSpeculationStops: a stop id or MaxTokens inside an accepted draft
// cuts the step exactly where plain decoding stops.
func TestSpeculationStops(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	off := start(t, m, Config{Speculation: SpecConfig{Off: true}})
	on := start(t, m, Config{Speculation: SpecConfig{Tokens: 7}})
	p := greedy()
	p.StopIDs = []int{7}
	for _, max := range []int{3, 17, 32} {
		for _, pr := range ps {
			a := runOne(t, off, &Request{Prompt: pr.InputIDs, MaxTokens: max, Params: p})
			b := runOne(t, on, &Request{Prompt: pr.InputIDs, MaxTokens: max, Params: p})
			if !slices.Equal(a.tokens, b.tokens) || a.reason != b.reason || a.stopSeen != b.stopSeen {
				t.Errorf("%s max %d: off %v %v, on %v %v", pr.Name, max, a.reason, a.tokens, b.reason, b.tokens)
			}
		}
	}
}

// TestPrefixCache: a request resumed from cached blocks gives the cold
// output token for token; a follow-up turn (prompt + answer + more) hits
// the cache through the previous answer; salts separate requests.
func TestPrefixCache(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	cold := start(t, m, Config{PrefixCache: PrefixConfig{Off: true}, PrefillChunk: 100})
	warm := start(t, m, Config{PrefixCache: PrefixConfig{Identity: "tiny"}, PrefillChunk: 100})
	prompt := ps[5].InputIDs // 314 tokens: 4 full blocks before the last token
	q := greedy()
	want := runOne(t, cold, &Request{Prompt: prompt, MaxTokens: 70, Params: q})
	first := runOne(t, warm, &Request{Prompt: prompt, MaxTokens: 70, Params: q})
	second := runOne(t, warm, &Request{Prompt: prompt, MaxTokens: 70, Params: q})
	if first.cached != 0 || second.cached != 4*64 {
		t.Errorf("cached tokens: first %d, second %d (want 0, 256)", first.cached, second.cached)
	}
	for _, r := range []*recorder{first, second} {
		if !slices.Equal(r.tokens, want.tokens) {
			t.Errorf("with the cache %v\ncold %v", r.tokens, want.tokens)
		}
	}
	// Follow-up: the previous prompt and answer, then more tokens. The
	// answer's blocks were registered as it was generated.
	follow := slices.Concat(prompt, want.tokens[:len(want.tokens)-1], ps[2].InputIDs)
	coldFollow := runOne(t, cold, &Request{Prompt: follow, MaxTokens: 20, Params: q})
	warmFollow := runOne(t, warm, &Request{Prompt: follow, MaxTokens: 20, Params: q})
	if warmFollow.cached <= len(prompt) {
		t.Errorf("follow-up: %d cached tokens; want more than the first prompt's %d (through the answer)", warmFollow.cached, len(prompt))
	}
	if !slices.Equal(coldFollow.tokens, warmFollow.tokens) {
		t.Errorf("follow-up with the cache %v\ncold %v", warmFollow.tokens, coldFollow.tokens)
	}
	// Another salt shares nothing; a scoring request never resumes.
	if r := runOne(t, warm, &Request{Prompt: prompt, MaxTokens: 5, Params: q, CacheSalt: "tenant-b"}); r.cached != 0 {
		t.Errorf("salted request resumed %d tokens", r.cached)
	}
	if r := runOne(t, warm, &Request{Prompt: prompt, PromptLogits: true}); r.cached != 0 {
		t.Errorf("a prompt-logits request resumed %d tokens", r.cached)
	}
	st := warm.Stats()
	if st.PrefixHitTokens == 0 || st.PrefixQueryTokens <= st.PrefixHitTokens || st.PrefixBlocks == 0 || st.PrefixCachedTokens != 64*st.PrefixBlocks {
		t.Errorf("stats %+v", st)
	}
}

// TestPrefixCacheBudget: cached blocks yield to running requests: the
// cache holds at most what the pool leaves, and a request needing the
// whole pool (16 pages of 64 tokens for 1,000) takes the earlier blocks'
// pages back, least recently used first; its own blocks are then cached
// in the pages it leaves, held once.
func TestPrefixCacheBudget(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	s := start(t, m, Config{KVPoolTokens: 1000, MaxModelLen: 1000})
	runOne(t, s, &Request{Prompt: ps[5].InputIDs, MaxTokens: 10, Params: greedy()})
	if st := s.Stats(); st.PrefixCachedTokens != 5*64 {
		t.Errorf("after one request of 324 tokens: %+v, want 5 blocks", st)
	}
	// A request reserving 990 tokens leaves room for no block.
	r := runOne(t, s, &Request{Prompt: ps[0].InputIDs, MaxTokens: 990 - len(ps[0].InputIDs), Params: greedy()})
	if r.reason != FinishLength && r.reason != FinishStop {
		t.Errorf("the pool-sized request: %v", r.reason)
	}
	st := s.Stats()
	if st.KVPages != 16 || st.KVPagesUsed != st.PrefixBlocks || st.KVPagesFree != 16-st.KVPagesUsed || st.KVPagesShared != 0 || st.PrefixBlocks > 16 {
		t.Errorf("after the pool-sized request, only the cache should hold pages: %+v", st)
	}
	// The first request's blocks were the least recently used: at most
	// a block both prompts begin with is still cached.
	if r := runOne(t, s, &Request{Prompt: ps[5].InputIDs, MaxTokens: 1, Params: greedy()}); r.cached >= 5*64 {
		t.Errorf("the cache did not yield to the running request: %d tokens resumed, stats %+v", r.cached, st)
	}
}

// orderSink records the order of Started and Done calls of several
// requests into a shared log.
type orderSink struct {
	*recorder
	name string
	log  *[]string
	mu   *sync.Mutex
}

func (o orderSink) Started(cached int) {
	o.mu.Lock()
	*o.log = append(*o.log, o.name+" started")
	o.mu.Unlock()
	o.recorder.Started(cached)
}

func (o orderSink) Done(reason FinishReason, err error) {
	o.mu.Lock()
	*o.log = append(*o.log, o.name+" done")
	o.mu.Unlock()
	o.recorder.Done(reason, err)
}

// TestAdmissionReservesPages: admission counts whole pages of 64 tokens,
// not tokens. Two requests of 70 tokens each (2 pages each) fit a pool of
// 192 tokens by their tokens (140) but not by their pages (4 of 3): the
// second waits until the first has ended and given its pages back, then
// runs to the end; neither fails mid-generation.
func TestAdmissionReservesPages(t *testing.T) {
	m := loadTiny(t)
	s, err := New(m, Config{KVPoolTokens: 192, MaxModelLen: 192, MaxNumSeqs: 2, PrefixCache: PrefixConfig{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	var mu sync.Mutex
	prompt := make([]int, 60)
	for i := range prompt {
		prompt[i] = 100 + i
	}
	var recs []*recorder
	for _, name := range []string{"a", "b"} {
		rec := newRecorder()
		recs = append(recs, rec)
		if err := s.Submit(context.Background(), &Request{Prompt: prompt, MaxTokens: 10, Params: greedy(), Sink: orderSink{rec, name, &log, &mu}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	for _, rec := range recs {
		rec.wait(t)
		if rec.err != nil || len(rec.tokens) == 0 {
			t.Fatalf("%v, %d tokens", rec.err, len(rec.tokens))
		}
	}
	if want := []string{"a started", "a done", "b started", "b done"}; !slices.Equal(log, want) {
		t.Errorf("order %v, want %v", log, want)
	}
	if st := s.Stats(); st.KVPages != 3 || st.KVPagesUsed != 0 || st.KVPagesFree != 3 {
		t.Errorf("after both: %+v", st)
	}
}

// TestPrefixCacheFollowUpTurn: an agent's next turn (the previous prompt,
// every id of the answer, then new tokens) resumes every whole block of
// prompt and answer, wherever the answer ends relative to a block
// boundary and however it ends, with speculation on and off; the resumed
// turn generates what a cold run does.
func TestPrefixCacheFollowUpTurn(t *testing.T) {
	m := loadTiny(t)
	ps := fixturePrompts(t)
	prompt := ps[5].InputIDs // 314 tokens
	more := ps[2].InputIDs
	const B = 64
	cold := start(t, m, Config{PrefixCache: PrefixConfig{Off: true}, PrefillChunk: 100})
	tests := []struct {
		name     string
		answer   int // tokens generated
		byLength bool
		specOff  bool
	}{
		{"ends on a boundary", 384 - 314, true, false},
		{"ends on a boundary, no speculation", 384 - 314, true, true},
		{"one short of a boundary", 383 - 314, true, false},
		{"one past a boundary", 385 - 314, true, false},
		{"mid block", 40, true, false},
		{"sink ends on a boundary", 384 - 314, false, false},
		{"two blocks of answer ending on a boundary", 448 - 314, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			warm := start(t, m, Config{PrefixCache: PrefixConfig{Identity: "tiny"}, PrefillChunk: 100, Speculation: SpecConfig{Off: tc.specOff}})
			r := &Request{Prompt: prompt, MaxTokens: tc.answer, Params: greedy()}
			if !tc.byLength {
				r.MaxTokens = tc.answer + 50
			}
			rec := newRecorder()
			rec.endAfter = tc.answer
			r.Sink = rec
			if err := warm.Submit(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			rec.wait(t)
			if len(rec.tokens) != tc.answer || rec.stopSeen {
				t.Fatalf("the first turn generated %d tokens (stop seen %v), want %d", len(rec.tokens), rec.stopSeen, tc.answer)
			}
			follow := slices.Concat(prompt, rec.tokens, more)
			got := runOne(t, warm, &Request{Prompt: follow, MaxTokens: 12, Params: greedy()})
			// Every whole block of prompt and answer, short of the last
			// prompt token (which is always computed).
			want := min((len(prompt)+tc.answer)/B, (len(follow)-1)/B) * B
			if got.cached != want {
				t.Errorf("the follow-up turn resumed %d tokens, want %d (every whole block of the %d-token prompt and %d-token answer)",
					got.cached, want, len(prompt), tc.answer)
			}
			ref := runOne(t, cold, &Request{Prompt: follow, MaxTokens: 12, Params: greedy()})
			if !slices.Equal(got.tokens, ref.tokens) {
				t.Errorf("resumed turn %v\ncold %v", got.tokens, ref.tokens)
			}
			if st := warm.Stats(); st.KVUsedTokens != 0 || st.KVReservedTokens != 0 {
				t.Errorf("state left behind: %+v", st)
			}
		})
	}
}

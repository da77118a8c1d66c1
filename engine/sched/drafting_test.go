package sched

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/prefix"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/spec"
)

const tinyDrafter = "../../testdata/tiny-lfm2-moe-dspark/model"

// loadDrafted loads the tiny target with the fixture's DSpark drafter.
func loadDrafted(t testing.TB) (*model.Model, *draft.Drafter) {
	t.Helper()
	return loadDraftedAt(t, tinyModel)
}

// loadDraftedAt is loadDrafted with the target read from dir.
func loadDraftedAt(t testing.TB, dir string) (*model.Model, *draft.Drafter) {
	t.Helper()
	m, err := load.Load(dir, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := draft.Load(tinyDrafter, m)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	return m, d
}

// runAll submits every request at once and returns each one's tokens and
// finish reason.
func runAll(t *testing.T, s *Scheduler, reqs []*Request) ([][]int, []FinishReason) {
	t.Helper()
	recs := make([]*recorder, len(reqs))
	for i, r := range reqs {
		recs[i] = newRecorder()
		r.Sink = recs[i]
		if err := s.Submit(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	toks := make([][]int, len(reqs))
	reasons := make([]FinishReason, len(reqs))
	for i, rec := range recs {
		rec.wait(t)
		if rec.err != nil {
			t.Fatal(rec.err)
		}
		toks[i], reasons[i] = rec.tokens, rec.reason
	}
	return toks, reasons
}

// TestDrafterExact: with the DSpark drafter a reply is the same tokens as
// without it, greedy and seeded sampled, alone and in a batch of 16, with
// prompt lookup on or off beside it; drafts were verified and some kept.
func TestDrafterExact(t *testing.T) {
	began := time.Now()
	plainM := loadTiny(t)
	m, d := loadDrafted(t)
	ps := fixturePrompts(t)
	plain := start(t, plainM, Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})
	drafted := start(t, m, Config{Drafter: d, Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Identity: "tiny+dspark"}})
	both := start(t, m, Config{Drafter: d, PrefixCache: PrefixConfig{Off: true}})
	fixed := start(t, m, Config{Drafter: d, DraftDepth: 5, Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Identity: "tiny+dspark"}})
	params := []sample.Params{greedy()}
	for i, T := range []float64{0.7, 1.0} {
		p := sample.Neutral()
		p.Temperature, p.TopK, p.TopP, p.RepetitionPenalty, p.Seed = T, 40, 0.95, 1.02, uint64(91+i)
		params = append(params, p)
	}
	var reqs func() []*Request
	reqs = func() []*Request {
		var rs []*Request
		for i := range 16 {
			p := params[i%len(params)]
			rs = append(rs, &Request{ID: fmt.Sprint(i), Prompt: ps[i%len(ps)].InputIDs, MaxTokens: 24 + 3*i, Params: p})
		}
		return rs
	}
	want, wantR := runAll(t, plain, reqs())
	for _, c := range []struct {
		name string
		s    *Scheduler
	}{{"drafter", drafted}, {"drafter+lookup", both}, {"depth5", fixed}} {
		t.Run(c.name+"/16", func(t *testing.T) {
			got, gotR := runAll(t, c.s, reqs())
			for i := range got {
				if !slices.Equal(got[i], want[i]) || gotR[i] != wantR[i] {
					t.Errorf("request %d: with the drafter %v %v\nwithout %v %v", i, gotR[i], got[i], wantR[i], want[i])
				}
			}
		})
		t.Run(c.name+"/1", func(t *testing.T) {
			for i, r := range reqs()[:6] {
				got, gotR := runAll(t, c.s, []*Request{r})
				if !slices.Equal(got[0], want[i]) || gotR[0] != wantR[i] {
					t.Errorf("request %d alone: with the drafter %v\nwithout %v", i, got[0], want[i])
				}
			}
		})
	}
	// Candidates (n = 3, seeded) cloned from one prompt draft each on
	// their own: each answer is the plain one with its seed.
	t.Run("candidates", func(t *testing.T) {
		p := params[1]
		recs := []*recorder{newRecorder(), newRecorder(), newRecorder()}
		r := &Request{Prompt: ps[3].InputIDs, MaxTokens: 30, Params: p, Sink: recs[0]}
		for i := 1; i < 3; i++ {
			r.Candidates = append(r.Candidates, Candidate{Seed: p.Seed + uint64(i), Sink: recs[i]})
		}
		if err := fixed.Submit(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		for i, rec := range recs {
			rec.wait(t)
			q := p
			q.Seed += uint64(i)
			want := runOne(t, plain, &Request{Prompt: ps[3].InputIDs, MaxTokens: 30, Params: q})
			if !slices.Equal(rec.tokens, want.tokens) {
				t.Errorf("candidate %d: drafted %v\nplain %v", i, rec.tokens, want.tokens)
			}
		}
	})
	if st := fixed.Stats(); st.DraftSteps == 0 || st.DraftAccepted == 0 || st.DraftEmitted <= st.DraftSteps {
		t.Errorf("depth 5: the drafter did not run: %+v", st)
	} else {
		// What the drafter cost is counted: its passes took time, no
		// more than the test has run, and its context too.
		if el := time.Since(began).Seconds(); st.DraftPassSeconds <= 0 || st.DraftPassSeconds > el || st.DraftContextSeconds <= 0 || st.DraftContextSeconds > el {
			t.Errorf("depth 5: %d passes took %.6f s and the context %.6f s, in a test of %.3f s", st.DraftPasses, st.DraftPassSeconds, st.DraftContextSeconds, el)
		}
		t.Logf("depth 5: verify steps %d, drafts %d, kept %d, emitted %d (%.2f tokens/verify step)",
			st.DraftSteps, st.DraftTokens, st.DraftAccepted, st.DraftEmitted, float64(st.DraftEmitted)/float64(st.DraftSteps))
	}
	// Scheduled, on this model (bound by arithmetic) the pass rarely pays
	// and the scheduler may draft little or nothing: its replies are what
	// is checked above; the depth-5 server shows the verification at work.
	st := drafted.Stats()
	t.Logf("scheduled: drafter passes %d, verify steps %d, drafts %d, kept %d, emitted %d; guard %+v",
		st.DraftPasses, st.DraftSteps, st.DraftTokens, st.DraftAccepted, st.DraftEmitted, st.DraftGuard)
	if st.KVUsedTokens != 0 || st.KVReservedTokens != 0 {
		t.Errorf("state left behind: %+v", st)
	}
}

// TestPassMayPay: the decision before a pass, against cases worked by
// hand. One sequence, block 4; a plain step costs 1 s, each verified row
// 0.5 s more. A new drafter (no row verified) is taken to keep 0.8 of its
// drafts: with a 0.5 s pass, depth 4 expects 1 + 0.8 + 0.64 + 0.512 +
// 0.41 = 3.36 tokens in 3.5 s, and no depth reaches the plain 1 per
// second: skipped; with a 0.1 s pass, depth 1 expects 1.8 in 1.6 s: run.
// A drafter whose rows were kept 9 times in 10 (a rate of 10/12 with the
// prior) is run at a 0.5 s pass (depth 2: 2.53 tokens in 2.5 s); one whose
// rows were never kept is skipped but for probes: the first after
// probeEvery skipped passes, then after twice as many each time, until a
// pass pays, which starts the count again; but never sooner than keeps
// them within probeBudget (2 %) of the plain steps' time: a probe here
// costs the 0.1 s pass and a 3 s verify of the whole block, 2.1 s more
// than a plain step, so the first waits for 105 skipped passes.
func TestPassMayPay(t *testing.T) {
	newSched := func(pass float64, kept, reached float64) *Scheduler {
		s := &Scheduler{cfg: Config{Drafter: &draft.Drafter{Config: &draft.Config{BlockSize: 4}}}}
		s.dTable = spec.NewTable()
		for rows := 1; rows <= 5; rows++ {
			s.dTable.Observe(1, rows, 1+0.5*float64(rows-1))
		}
		s.dTable.ObserveDraft(1, pass)
		for i := range 4 {
			s.calKept[i], s.calReached[i] = kept, reached
		}
		return s
	}
	for _, c := range []struct {
		name          string
		pass          float64
		kept, reached float64
		want          bool
	}{
		{"new drafter, costly pass", 0.5, 0, 0, false},
		{"new drafter, cheap pass", 0.1, 0, 0, true},
		{"good drafter", 0.2, 9, 10, true},
		{"good drafter, 4% gain at best", 0.5, 9, 10, false},
		{"useless drafter, cheap pass", 0.1, 0, 100, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := newSched(c.pass, c.kept, c.reached).passMayPay(1, 1, nil); got != c.want {
				t.Errorf("passMayPay = %v, want %v", got, c.want)
			}
		})
	}
	s := newSched(0.1, 0, 100)
	probes := func(s *Scheduler, calls int) []int {
		var at []int
		for i := range calls {
			if run, _ := s.passMayPay(1, 1, nil); run {
				at = append(at, i+1)
			}
		}
		return at
	}
	g := probeEvery
	want := []int{105, 105 + 2*g, 105 + 6*g, 105 + 14*g}
	if got := probes(s, 16*g); !slices.Equal(got, want) {
		t.Errorf("probes at skipped passes %v, want %v", got, want)
	}
	// A pass that pays (the rows kept after all) starts the count again.
	for i := range 4 {
		s.calKept[i], s.calReached[i] = 1000, 1000
	}
	if run, _ := s.passMayPay(1, 1, nil); !run {
		t.Fatal("a drafter whose rows all survive is skipped")
	}
	for i := range 4 {
		s.calKept[i], s.calReached[i] = 0, 1000
	}
	if got := probes(s, 2*g); !slices.Equal(got, []int{105}) {
		t.Errorf("after a pass that paid: probes at %v, want [105]", got)
	}
	runs := 0
	// Over four sequences, a pass that explores (survival not yet
	// measured) or probes drafts for one of them; one that pays by
	// measured survival drafts for all.
	for _, c := range []struct {
		name          string
		pass          float64
		kept, reached float64
		run, one      bool
	}{
		{"new drafter", 0.1, 0, 0, true, true},
		{"good drafter", 0.2, 9, 10, true, false},
		{"useless drafter", 0.1, 0, 100, false, false},
	} {
		run, one := newSched(c.pass, c.kept, c.reached).passMayPay(4, 4, nil)
		if run != c.run || one != c.one {
			t.Errorf("%s over 4 sequences: run %v, one %v; want %v, %v", c.name, run, one, c.run, c.one)
		}
	}
	s = newSched(0.1, 0, 100)
	for i := range probeEvery {
		run, one := s.passMayPay(4, 4, nil)
		if run != (i == probeEvery-1) || one != run {
			t.Fatalf("skipped pass %d over 4 sequences: run %v, one %v; want a probe of one sequence on the %dth alone", i+1, run, one, probeEvery)
		}
	}
	// Rows that each cost a whole step (many sequences on few cores):
	// not even drafts that all survive pay for a pass, so there is no
	// probe either.
	s = newSched(0.1, 0, 100)
	s.dTable = spec.NewTable()
	for rows := 1; rows <= 5; rows++ {
		s.dTable.Observe(1, rows, float64(rows))
	}
	s.dTable.ObserveDraft(1, 0.1)
	runs = 0
	for range 4 * probeEvery {
		if run, _ := s.passMayPay(1, 1, nil); run {
			runs++
		}
	}
	if runs != 0 {
		t.Errorf("%d of %d passes probed where none can pay, want 0", runs, 4*probeEvery)
	}
}

// TestDraftHopeless: a width is hopeless where not even drafts that all
// survive pay for a pass, by the cost table, whether one sequence drafts
// or all do; worked by hand on the table of TestPassMayPay (a plain step
// of one sequence 1 s, each verified row 0.5 s more; block 4). With a
// 0.5 s pass, four surviving drafts give 5 tokens in 3.5 s, 1.43 a second
// against the plain 1 × payMargin: not hopeless. With a 10 s pass the best
// is 5 tokens in 13 s: hopeless. Unmeasured, or at a fixed depth, nothing
// is.
func TestDraftHopeless(t *testing.T) {
	newSched := func(pass float64) *Scheduler {
		s := &Scheduler{cfg: Config{Drafter: &draft.Drafter{Config: &draft.Config{BlockSize: 4}}}}
		s.dTable = spec.NewTable()
		for rows := 1; rows <= 5; rows++ {
			s.dTable.Observe(1, rows, 1+0.5*float64(rows-1))
		}
		if pass > 0 {
			s.dTable.ObserveDraft(1, pass)
		}
		return s
	}
	if newSched(0.5).draftHopeless(1) {
		t.Error("a 0.5 s pass: hopeless")
	}
	if !newSched(10).draftHopeless(1) {
		t.Error("a 10 s pass: not hopeless")
	}
	if newSched(0).draftHopeless(1) {
		t.Error("no pass measured: hopeless")
	}
	s := newSched(10)
	s.cfg.DraftDepth = 3
	if s.draftHopeless(1) {
		t.Error("a fixed depth: hopeless")
	}
}

// TestDrafterHopelessExact: where no pass can pay (a cost table whose
// pass takes 100 s), the scheduler runs no pass, every step gives up the
// drafter's context of its rows, and the replies are the plain ones,
// greedy and seeded, alone and 16 at once; with the prefix cache on, the
// blocks cached without their drafter context (which a saved cache leaves
// out) are resumed by the same requests again, with the same replies.
func TestDrafterHopelessExact(t *testing.T) {
	plainM := loadTiny(t)
	m, d := loadDrafted(t)
	ps := fixturePrompts(t)
	table := spec.NewTable()
	for _, n := range []int{1, 16} {
		for rows := n; rows <= 10*n; rows += n {
			table.Observe(n, rows, 0.001*float64(rows))
		}
		table.ObserveDraft(n, 100)
	}
	plain := start(t, plainM, Config{Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Off: true}})
	hopeless := start(t, m, Config{Drafter: d, DraftCosts: table, Speculation: SpecConfig{Off: true}, PrefixCache: PrefixConfig{Identity: "tiny+dspark"}})
	reqs := func() []*Request {
		var rs []*Request
		for i := range 16 {
			p := greedy()
			if i%2 == 1 {
				p = sample.Neutral()
				p.Temperature, p.TopK, p.Seed = 0.8, 40, uint64(7+i)
			}
			// Past a prompt block and 64 pending rows: some rows are
			// given up, some blocks cached without their context.
			prompt := slices.Concat(ps[i%len(ps)].InputIDs, ps[(i+1)%len(ps)].InputIDs)
			rs = append(rs, &Request{ID: fmt.Sprint(i), Prompt: prompt, MaxTokens: 70 + i, Params: p})
		}
		return rs
	}
	want, _ := runAll(t, plain, reqs())
	for round := range 2 {
		got, _ := runAll(t, hopeless, reqs())
		for i := range got {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("round %d, request %d: %v\nplain %v", round, i, got[i], want[i])
			}
		}
		for i, r := range reqs()[:3] {
			got, _ := runAll(t, hopeless, []*Request{r})
			if !slices.Equal(got[0], want[i]) {
				t.Errorf("round %d, request %d alone: %v\nplain %v", round, i, got[0], want[i])
			}
		}
	}
	// Some cached blocks lack their drafter context: a saved cache
	// leaves them out.
	hopeless.cacheMu.Lock()
	cached := hopeless.cache.Blocks()
	path, h := filepath.Join(t.TempDir(), prefix.FileName), prefix.Header{Identity: "tiny+dspark", Runtime: "test"}
	err := hopeless.cache.Save(path, h)
	hopeless.cacheMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if saved, err := prefix.New().Load(path, h, m, 1<<30); err != nil || saved >= cached {
		t.Errorf("%d of %d cached blocks saved (%v): want the blocks without their drafter context left out", saved, cached, err)
	}
	st := hopeless.Stats()
	if st.DraftPasses != 0 || st.DraftPassSeconds != 0 || st.DraftHopelessSteps != st.Steps || st.PrefixHitTokens == 0 {
		t.Errorf("passes %d, hopeless steps %d of %d, prefix hits %d tokens: want no pass, every step hopeless, the cache resumed",
			st.DraftPasses, st.DraftHopelessSteps, st.Steps, st.PrefixHitTokens)
	}
}

package sched

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/spec"
)

// drafting is the scheduler's part for a DSpark drafter
// (docs/drafting.md §4): the verify cost table, the guard, the
// calibration of the confidence head against what verification keeps,
// and the counters of Stats.
type drafting struct {
	dTable                                        *spec.Table
	dGuard                                        *spec.Guard
	dPasses, dSteps, dTokens, dAccepted, dEmitted atomic.Int64
	// dDropSteps counts steps run where no pass could pay
	// (draftHopeless), whose rows' drafter context was given up.
	dDropSteps atomic.Int64
	// dPassNanos is the time the drafter's passes took.
	dPassNanos atomic.Int64

	calMu sync.Mutex
	// Per block row: the confidence head's predicted survival summed
	// over the rows verified, the rows verified (reached: every draft
	// before them survived) and the rows that survived.
	calPred, calReached, calKept [draft.MaxBlockSize]float64
	// skipped counts passes the pre-pass decision left out since the
	// last probe; the probeGap()-th runs anyway, so that the acceptance
	// it decides by stays measured. probes counts the probes since a
	// pass last paid: each doubles the gap.
	skipped, probes int

	// hooks are set by the speed benchmark at real shapes only
	// (drafting_bench_test.go, docs/drafting-speed.md); nil in use.
	hooks *draftHooks
}

// draftHooks let a benchmark stand in for a trained drafter: propose
// rewrites a candidate's drafts and confidence logits after the
// drafter's pass (which still runs and is paid for), given its request
// and the tokens it has produced; depths receives the depths chosen for
// a pass's candidates.
type draftHooks struct {
	propose func(req *Request, produced int, drafts []int, conf []float32)
	depths  func(depths []int)
}

// probeEvery is how many passes the pre-pass decision skips before the
// first probe, which runs one anyway; the wait doubles at each later
// probe, probeDoublings times at most (to 4096).
const (
	probeEvery     = 64
	probeDoublings = 6
	// probeBudget is the most of the plain steps' time that probes may
	// take: a probe waits for as many skipped passes as its cost over a
	// plain step divided by this share of one.
	probeBudget = 0.02
)

// payMargin is how much faster than plain decoding a pass must be expected
// to make its step before it runs: the cost table's cells are medians of a
// few timings on a machine that other work shares, and a pass that gains
// less than their error is as likely to lose, while on a small target one
// pass costs several plain steps.
const payMargin = 1.1

func (s *Scheduler) initDrafting() {
	if s.cfg.Drafter == nil {
		return
	}
	s.dTable = s.cfg.DraftCosts
	if s.dTable == nil {
		s.dTable = spec.NewTable()
		s.cfg.DraftCosts = s.dTable
	}
	s.dGuard = spec.NewGuard()
}

func (s *Scheduler) guardStates() []spec.State {
	if s.dGuard == nil {
		return nil
	}
	return s.dGuard.States()
}

// calibrated returns the probability that row i's draft survives, its
// confidence logit c read through the sigmoid and scaled by how row i's
// predictions have fared so far (a head trained on teacher-forced rows is
// over-confident on the first).
func (s *Scheduler) calibrated(i int, c float32) float64 {
	p := float64(kernels.Sigmoid(c))
	s.calMu.Lock()
	f := (s.calKept[i] + 4) / (s.calPred[i] + 4)
	s.calMu.Unlock()
	return min(p*f, 1)
}

// draftFor runs the drafter over the candidate decodes (sequences with no
// prompt-lookup draft and room for more than one token) of a step of
// decodes decoding sequences, and gives each the depth spec.Choose finds
// pays; it returns the drafter's seconds and whether it ran. While the guard holds drafting
// off at this width, nothing is drafted.
func (s *Scheduler) draftFor(cands []*work, decodes int, ws []*work) (sec float64, ran bool) {
	fixed := s.cfg.DraftDepth
	if fixed == 0 {
		if !s.dGuard.Allow(decodes) {
			return 0, false
		}
		run, one := s.passMayPay(len(cands), decodes, ws)
		if !run {
			return 0, false
		}
		if one {
			// A pass that explores or probes measures how the
			// drafts survive, which one sequence's drafts tell as
			// well as many: it costs a sixteenth of one over 16.
			cands = cands[:1]
		}
	}
	seqs := make([]*model.Sequence, len(cands))
	pending := make([]int, len(cands))
	for i, w := range cands {
		seqs[i], pending[i] = w.st.seq, w.toks[0]
	}
	t0 := time.Now()
	blk, err := s.cfg.Drafter.Propose(seqs, pending, false)
	el := time.Since(t0)
	s.dPassNanos.Add(int64(el))
	sec = el.Seconds()
	if err != nil {
		s.log.Debug("drafting failed", "err", err)
		return sec, true
	}
	s.dPasses.Add(1)
	s.dTable.ObserveDraft(len(cands), sec)
	if s.hooks != nil {
		for i, w := range cands {
			s.hooks.propose(w.st.req, len(w.st.output), blk.Draft(i), blk.Conf(i))
		}
	}
	p := make([][]float64, len(cands))
	for i, w := range cands {
		room := w.st.req.MaxTokens - len(w.st.output) - 1
		conf := blk.Conf(i)[:min(blk.B, room)]
		p[i] = make([]float64, len(conf))
		for j, c := range conf {
			p[i][j] = s.calibrated(j, c)
		}
	}
	// The other decodes' rows are in the step whatever is drafted.
	other := decodes - len(cands)
	for _, w := range ws {
		if w.draft != nil {
			other += len(w.draft)
		}
	}
	cost := func(n, rows int) float64 {
		if c := s.dTable.Cost(decodes, rows+other); c > 0 {
			return c
		}
		// Nothing measured yet: a tenth more per row.
		r := float64(rows + other)
		return r * (1 + 0.1*(r/float64(decodes)-1))
	}
	depths := make([]int, len(cands))
	if fixed > 0 {
		for i := range depths {
			depths[i] = min(fixed, len(p[i]))
		}
	} else {
		depths = spec.Choose(p, cost)
	}
	if s.hooks != nil {
		s.hooks.depths(depths)
	}
	for i, k := range depths {
		if k == 0 {
			continue
		}
		w := cands[i]
		w.draft = append([]int(nil), blk.Draft(i)[:k]...)
		w.toks = append([]int{w.toks[0]}, w.draft...)
		w.mode, w.drafted, w.conf = model.AllLogits, true, p[i][:k]
	}
	return sec, true
}

// draftVerified records a verify step of the drafter's drafts of which
// accepted survived.
func (s *Scheduler) draftVerified(w *work, accepted int) {
	s.dSteps.Add(1)
	s.dTokens.Add(int64(len(w.draft)))
	s.dAccepted.Add(int64(accepted))
	s.dEmitted.Add(int64(w.emitted))
	s.calMu.Lock()
	for i := 0; i < len(w.draft) && i <= accepted; i++ {
		s.calPred[i] += w.conf[i]
		s.calReached[i]++
		if i < accepted {
			s.calKept[i]++
		}
	}
	s.calMu.Unlock()
}

// guardStep tells the guard how a decode step of the drafter's scheduler
// paid: tokens emitted in sec (the drafter's pass included).
// A step where the drafter ran counts as drafted even if nothing was
// verified: its pass was paid for.
func (s *Scheduler) guardStep(ws []*work, ran bool, sec float64) {
	n, tokens := len(ws), 0
	for _, w := range ws {
		tokens += w.emitted
	}
	if s.cfg.DraftDepth > 0 {
		return
	}
	if ran {
		s.dGuard.Drafted(n, tokens, sec, s.dTable.Cost(n, n))
	} else {
		s.dGuard.Plain(n, tokens, sec)
	}
}

// passMayPay decides, before the drafter runs, whether some depth can pay
// for its pass (docs/drafting.md §4): with r_i each block row's survival
// rate so far (kept over reached, from a prior of one half, and no less
// than 0.8 before a row was verified eight times, so that a new drafter is
// tried), n of the step's decodes drafting k rows each expect
// n·(1 + r_0 + r_0·r_1 + …) tokens for the step's time at n·k more rows
// plus the pass's (the cost table's DraftCost), against a plain step; a
// depth pays where it is expected to be payMargin times as fast. A pass
// that no depth pays for is skipped, but for a probe where drafts that
// all survived would pay (where even they would not, as with many
// sequences on few cores, no measurement of survival can change the
// answer and there is no probe): the first after probeEvery skipped
// passes, each next after twice as many as the last, up to 4096,
// until a pass pays again; and never sooner than keeps the probes'
// extra cost (a pass, and a verify of the whole block beyond a plain
// step) within probeBudget of the plain steps' time.
//
// one reports a pass that explores (before the first row was verified
// eight times, its survival the prior's) or probes: it drafts for one
// sequence of the n, since what it is for is measuring survival.
func (s *Scheduler) passMayPay(n, decodes int, ws []*work) (run, one bool) {
	pass := s.dTable.DraftCost(n)
	if s.dTable.Cost(decodes, decodes) <= 0 || pass <= 0 {
		return true, n > 1 // nothing measured: try
	}
	other := 0
	for _, w := range ws {
		if w.draft != nil {
			other += len(w.draft)
		}
	}
	s.calMu.Lock()
	B := s.cfg.Drafter.Config.BlockSize
	explore := s.calReached[0] < 8
	r := make([]float64, B)
	for i := range r {
		r[i] = (s.calKept[i] + 1) / (s.calReached[i] + 2)
		if s.calReached[i] < 8 {
			r[i] = max(r[i], 0.8)
		}
	}
	s.calMu.Unlock()
	pays := s.payRule(n, decodes, other)
	gain, q := 0.0, 1.0
	for k := 1; k <= B; k++ {
		q *= r[k-1]
		gain += q
		if pays(float64(decodes)+float64(n)*gain, k) {
			s.calMu.Lock()
			s.skipped, s.probes = 0, 0
			s.calMu.Unlock()
			return true, explore && n > 1
		}
	}
	// A probe measures the rows' survival again; where not even drafts
	// that all survive would pay for the pass, no survival can, and the
	// probe would be a pass thrown away.
	if !s.allSurvivingPay(pays, n, decodes) {
		return false, false
	}
	// A probe's pass and its verify of a whole block cost probeCost more
	// than a plain step; waiting at least budgetGap skipped passes keeps
	// probes within probeBudget of the plain steps' time, however
	// costly a pass is beside a step of this target.
	plain := s.dTable.Cost(decodes, decodes+other)
	probeCost := s.dTable.DraftCost(1) + s.dTable.Cost(decodes, decodes+other+B) - plain
	budgetGap := int(math.Ceil(probeCost / (probeBudget * plain)))
	s.calMu.Lock()
	defer s.calMu.Unlock()
	s.skipped++
	if s.skipped < max(s.probeGap(), budgetGap) {
		return false, false
	}
	s.skipped, s.probes = 0, min(s.probes+1, probeDoublings)
	return true, n > 1
}

// probeGap is how many skipped passes the next probe waits for: each
// probe since a pass last paid doubles it, as the guard's pauses do, so
// that over a long run a drafter that cannot pay costs ever less.
// Called with calMu held.
func (s *Scheduler) probeGap() int { return probeEvery << s.probes }

// payRule returns whether a step of decodes decoding sequences, other
// rows of other drafts among them, n of which verify k drafts each after
// the drafter's pass over the n, expecting tokens, is payMargin times as
// fast as a plain step, by the cost table.
func (s *Scheduler) payRule(n, decodes, other int) func(tokens float64, k int) bool {
	pass := s.dTable.DraftCost(n)
	plainRate := float64(decodes) / s.dTable.Cost(decodes, decodes+other)
	return func(tokens float64, k int) bool {
		return tokens/(s.dTable.Cost(decodes, decodes+other+n*k)+pass) > payMargin*plainRate
	}
}

// allSurvivingPay reports whether n of decodes sequences drafting k rows
// that all survive would pay (pays) at some depth k of the block.
func (s *Scheduler) allSurvivingPay(pays func(tokens float64, k int) bool, n, decodes int) bool {
	for k := 1; k <= s.cfg.Drafter.Config.BlockSize; k++ {
		if pays(float64(decodes+n*k), k) {
			return true
		}
	}
	return false
}

// draftHopeless reports whether, at a width of decodes decoding
// sequences, no pass can pay by the cost table: not even drafts that all
// survive, whether one sequence drafts or all of them. Its steps give up
// the drafter's context of the rows they make (model.ForwardOptions.
// DropDraft, docs/drafting.md §3), so that a drafter that cannot pay on
// this machine at this width costs nothing there. Unmeasured, or with a
// fixed depth (Config.DraftDepth), nothing is hopeless.
func (s *Scheduler) draftHopeless(decodes int) bool {
	if s.cfg.Drafter == nil || s.cfg.DraftDepth > 0 || decodes < 1 ||
		s.dTable.Cost(decodes, decodes) <= 0 || s.dTable.DraftCost(1) <= 0 {
		return false
	}
	for _, n := range []int{1, decodes} {
		if s.allSurvivingPay(s.payRule(n, decodes, 0), n, decodes) {
			return false
		}
	}
	return true
}

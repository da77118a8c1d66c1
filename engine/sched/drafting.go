package sched

import (
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

	calMu sync.Mutex
	// Per block row: the confidence head's predicted survival summed
	// over the rows verified, and the rows that survived.
	calPred, calKept [draft.MaxBlockSize]float64

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
	if fixed == 0 && !s.dGuard.Allow(decodes) {
		return 0, false
	}
	seqs := make([]*model.Sequence, len(cands))
	pending := make([]int, len(cands))
	for i, w := range cands {
		seqs[i], pending[i] = w.st.seq, w.toks[0]
	}
	t0 := time.Now()
	blk, err := s.cfg.Drafter.Propose(seqs, pending, false)
	sec = time.Since(t0).Seconds()
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

package sched

import (
	"testing"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/spec"
)

// BenchmarkDraftDecision: what the drafting decisions of one step cost the
// scheduler (passMayPay before a pass and draftHopeless for the step's
// Forward), on a cost table as a server's looks after a while: the
// start-up cells (widths 1, 4 and 16, 1 to 10 rows a sequence, three
// timings each) and a full window of plain steps at every width from 1 to
// 16, with a drafter whose rows never survive (so that every rule runs to
// its end). A tiny model's step takes 0.7 to 1.6 ms on 2 cores, so this
// must stay far below that (docs/drafting.md §4).
func BenchmarkDraftDecision(b *testing.B) {
	s := &Scheduler{cfg: Config{Drafter: &draft.Drafter{Config: &draft.Config{BlockSize: 9}}}}
	s.dTable = spec.NewTable()
	for _, n := range []int{1, 4, 16} {
		for k := 1; k <= 10; k++ {
			for range 3 {
				s.dTable.Observe(n, n*k, 0.01*float64(n)*(1+0.2*float64(k)))
			}
		}
		s.dTable.ObserveDraft(n, 0.05*float64(n))
	}
	for w := 1; w <= 16; w++ {
		for range 9 {
			s.dTable.Observe(w, w, 0.01*float64(w))
		}
	}
	for i := range 9 {
		s.calKept[i], s.calReached[i] = 0, 100
	}
	b.ResetTimer()
	for range b.N {
		s.passMayPay(1, 1, nil)
		s.draftHopeless(1)
	}
}

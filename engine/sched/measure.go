package sched

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/spec"
)

// MeasureWidths and MeasureContext set what MeasureDraftCosts times: steps
// of 1, 4 and 16 sequences (the widths between are interpolated by
// spec.Table) whose context is MeasureContext tokens long.
var (
	MeasureWidths  = []int{1, 4, 16}
	MeasureContext = 256
)

// measureReps is how many times each cell is timed (the table keeps the
// median).
const measureReps = 3

// MeasureDraftCosts times, on m as loaded here (its threads and machine),
// the verify steps a drafter's schedule chooses between (docs/drafting.md
// §4): for each width up to maxSeqs in MeasureWidths, steps of 1, 2, 3, 5
// and block_size+1 rows per sequence (spec.Table interpolates the rest),
// and d's pass over that many sequences. The sequences are scratch: their
// tokens are arbitrary ids, which time like any others.
//
// It first waits for the check of m's checkpoint that loading left running
// (model.Model.Verified: an lfmq-1 checkpoint's hash, a BF16 one's scan
// for non-finite weights), and fails with what that check found: the
// check takes a core that the timed steps would use, and a cell timed
// beside it reads slow, a plain step most of all, which makes drafting
// look paying where it is not.
func MeasureDraftCosts(ctx context.Context, m *model.Model, d *draft.Drafter, maxSeqs int) (*spec.Table, error) {
	if err := m.Verified(ctx); err != nil {
		return nil, fmt.Errorf("measuring the drafter's costs: %w", err)
	}
	t := spec.NewTable()
	B := d.Config.BlockSize
	depths := []int{1, 2, 3, 5, B + 1}
	slices.Sort(depths)
	depths = slices.Compact(depths)
	for _, n := range MeasureWidths {
		if n > maxSeqs {
			break
		}
		seqs := make([]*model.Sequence, n)
		prompts := make([][]int, n)
		for i := range seqs {
			seqs[i] = m.NewSequence()
			prompts[i] = make([]int, MeasureContext)
			for j := range prompts[i] {
				prompts[i][j] = (17*i + 31*j + 1) % m.Config.VocabSize
			}
		}
		if _, err := m.Forward(ctx, seqs, prompts, model.ForwardOptions{Logits: model.NoLogits}); err != nil {
			return nil, fmt.Errorf("measuring the drafter's costs: %w", err)
		}
		pending := make([]int, n)
		for range measureReps {
			t0 := time.Now()
			if _, err := d.Propose(seqs, pending, false); err != nil {
				return nil, fmt.Errorf("measuring the drafter's costs: %w", err)
			}
			t.ObserveDraft(n, time.Since(t0).Seconds())
		}
		for _, r := range depths {
			toks := make([][]int, n)
			for i := range toks {
				toks[i] = prompts[i][:r]
			}
			snaps := make([][]int, n)
			for i := range snaps {
				snaps[i] = []int{MeasureContext}
			}
			for range measureReps {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				t0 := time.Now()
				_, err := m.Forward(ctx, seqs, toks, model.ForwardOptions{Logits: model.AllLogits, ChunkSize: n * r, ConvSnapshots: snaps})
				if err != nil {
					return nil, fmt.Errorf("measuring the drafter's costs: %w", err)
				}
				t.Observe(n, n*r, time.Since(t0).Seconds())
				for _, s := range seqs {
					conv, _ := s.ConvAt(MeasureContext)
					if err := s.Rewind(MeasureContext, conv); err != nil {
						return nil, err
					}
				}
			}
		}
		for _, s := range seqs {
			s.Free()
		}
	}
	return t, nil
}

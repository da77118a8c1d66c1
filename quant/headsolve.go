package quant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/gptq"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
)

// headStage is a GPTQ run's head stage: with DenseMethod GPTQ, the global
// file's statistics from the calibration stream after the last layer, its
// head solved (solveHead) and the rest packed, written to out. Nothing is
// calibrated after the head, so it is not installed in the engine.
func (r *gptqRun) headStage(ctx context.Context, out *runOutput) error {
	gf := lfmq1.GlobalFile
	if !fileHasDenseSolve(r.opts, r.plan.ByFile(gf)) {
		return nil
	}
	t0 := time.Now()
	st, err := r.denseFile(ctx, r.cfg.NumLayers, r.plan.ByFile(gf))
	r.report.DenseGPTQ += time.Since(t0)
	r.report.HeadGPTQ = time.Since(t0)
	if err != nil {
		return err
	}
	if err := out.w.WriteFile(gf, st.tensors); err != nil {
		return err
	}
	st.record(out)
	return nil
}

// headBandBytes bounds the band of the head's weights solveHead holds in
// float32 at once (three copies: the source, its RTN result and the
// solve's): at hidden 2048, 2,048 rows, whose float64 working sets
// (Quantize's band of W_tt and the losses' band of ΔWᵀ, 34 MB each) are
// small enough for gptq to recycle band after band. Tests lower it; it
// changes no bit.
var headBandBytes = 16 << 20

// headBand is the number of outputs (vocabulary rows) in one band of
// solveHead for a head [out, k]: a multiple of the tile width whose float32
// values fit headBandBytes, at least one tile, at most out.
func headBand(out, k int) int {
	return min(out, max(bfp.TileDim, headBandBytes/(4*k)&^(bfp.TileDim-1)))
}

// solveHead is solveAs for the LM head e (of the global file, layer), with
// its input statistics s, read from the source and solved band by band of
// outputs (headBand) instead of whole: the head grows with the vocabulary
// (65,536 × 2,048 in the 8B-A1B shape, twice that in the reference
// release's model), and whole it took a float32 copy of the source and of
// each result, 1.6–2.9 GB with the float64 working sets at those
// vocabularies. Each band is converted from the mapped source (its pages
// released as it goes), rounded to nearest for the loss ratio's baseline,
// solved against the whole head's factor (gptq.BandSolver) and added to
// the three losses (gptq.LossStream) and the weight error, each of which
// continues across the bands in output order: the result and its metrics
// have the bits of solveAs on the whole matrix (TestSolveHeadMatchesSolveAs),
// and what the head holds besides the packed result does not grow with
// the vocabulary (headSolveMemory).
func (r *gptqRun) solveHead(ctx context.Context, layer int, e *plan.Entry, s *hessian.Stat) (solved, error) {
	spec := denseSpec(r)
	out, k := int(e.Shape[0]), int(e.Shape[1])
	threads := r.workers
	res := solved{metric: MatrixMetrics{Tokens: s.Tokens(), WeightSum: s.Weight(), NEff: s.NEff()}}
	// A head no token reached is stored as RTN by the rule's fallback,
	// with neither losses nor a weight error, as solveAs stores it.
	tokens := s.Weight() > 0
	var (
		h       []float64
		f       *gptq.Factor
		fe      *gptq.FactorError
		solver  *gptq.BandSolver
		streams [3]*gptq.LossStream // RTN, Q = 0, the stored result
	)
	if tokens {
		var err error
		if h, res.metric.Shrink, err = hessian.Shrunk(s, s, spec.kappa); err != nil {
			return solved{}, err
		}
		// The dense files' solves report no flops (solved.flop counts the
		// experts' only).
		if f, fe, _, err = r.factor(ctx, spec, layer, -1, e.Name, h, k, r.g.DampDense, threads); err != nil {
			return solved{}, err
		}
		for i := range streams {
			if streams[i], err = gptq.NewLossStream(h, out, k, threads, ctx.Done()); err != nil {
				return solved{}, err
			}
		}
		if f != nil {
			if solver, err = f.NewBandSolver(spec.format, out); err != nil {
				return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
			}
			defer solver.Close()
		}
	}
	// The stored result when it is not GPTQ's: RTN by the rule's
	// Hessian-free form, band by band.
	var rtnStore *bfp.Builder
	if solver == nil {
		var err error
		if rtnStore, err = bfp.NewBuilder(spec.format, out, k); err != nil {
			return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
		}
	}
	band := headBand(out, k)
	w := make([]float32, band*k)
	q := make([]float32, band*k)
	var sums errorSums
	for n0 := 0; n0 < out; n0 += band {
		nb := min(band, out-n0)
		wb, qb := w[:nb*k], q[:nb*k]
		if err := weightRows(r.src, *e, n0, wb); err != nil {
			return solved{}, err
		}
		if j := firstNonFinite(wb); j >= 0 {
			return solved{}, &NonFiniteError{Tensor: e.Source, Index: n0*k + j, Value: wb[j]}
		}
		rtnP, err := bfp.PackMatrix(spec.format, wb, nb, k)
		if err != nil {
			return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
		}
		rtnQ, err := bfp.UnpackMatrix(spec.format, rtnP, nb, k)
		if err != nil {
			return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
		}
		switch {
		case solver != nil:
			if err := solver.Solve(wb, qb); err != nil {
				if errors.Is(err, gptq.ErrStopped) {
					return solved{}, ctx.Err()
				}
				return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
			}
		case spec.fallbackRule() != bfp.RuleMax:
			if rtnP, err = bfp.PackMatrixRule(spec.format, spec.fallbackRule(), wb, nb, k); err != nil {
				return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
			}
			if qb, err = bfp.UnpackMatrix(spec.format, rtnP, nb, k); err != nil {
				return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
			}
		default:
			qb = rtnQ
		}
		if rtnStore != nil {
			if err := rtnStore.SetBand(n0, nb, rtnP); err != nil {
				return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
			}
		}
		if tokens {
			if err := addLosses(ctx, streams[:], wb, rtnQ, nil, qb); err != nil {
				return solved{}, err
			}
			sums.add(wb, qb)
		}
	}
	if !tokens {
		res.metric.Method, res.metric.Reason = string(RTN), "no_tokens"
		res.packed = rtnStore.Bytes()
		return res, nil
	}
	if solver != nil {
		qr, err := solver.Finish()
		if err != nil {
			return solved{}, fmt.Errorf("quant: %s: %w", e.Name, err)
		}
		if err := checkCanonical(spec, e.Name, qr.Packed, out, k); err != nil {
			return solved{}, err
		}
		res.packed = qr.Packed
	} else {
		res.packed = rtnStore.Bytes()
		r.warnFallback(layer, -1, e.Name, fe)
	}
	var losses [3]float64
	for i, st := range streams {
		l, err := st.Total()
		if err != nil {
			return solved{}, err
		}
		losses[i] = l
	}
	res.metric.record(f, fe, losses[2], losses[0], losses[1])
	res.tensor = sums.metric()
	return res, nil
}

// addLosses adds a band of weights w to each stream, with the Q of the same
// index in qs (nil for Q = 0).
func addLosses(ctx context.Context, streams []*gptq.LossStream, w []float32, qs ...[]float32) error {
	for i, s := range streams {
		if err := s.Add(w, qs[i]); err != nil {
			if errors.Is(err, gptq.ErrStopped) {
				return ctx.Err()
			}
			return err
		}
	}
	return nil
}

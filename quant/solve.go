package quant

import (
	"context"
	"errors"
	"fmt"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/quant/gptq"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
)

// solved is one expert matrix's stored result.
type solved struct {
	packed []byte
	// q is the decoded result while solve runs; it is dropped once the
	// losses and tensor are computed, so that a layer's results hold
	// only the packed bytes (a decoded float32 expert matrix is 8× their
	// size, 14.7 MB at 8B-A1B's shapes).
	q      []float32
	metric MatrixMetrics
	tensor TensorMetric
	flop   float64
}

// solve quantizes the matrices ws (each [out, k], sharing one Hessian: an
// expert's w1 and w3, or its w2) against the expert statistics st shrunk
// toward the layer's pool, with relative damping alpha; it falls back to
// RTN when the Hessian cannot be factored (docs/gptq.md §5). The
// factorization, the row loops and the losses run on threads goroutines.
func (r *gptqRun) solve(ctx context.Context, l, e int, kind string, st, poolSt *hessian.Stat, alpha float64, ws [][]float32, pe []*plan.Entry, out, k, threads int) ([]solved, error) {
	return r.solveAs(ctx, expertSpec(r), l, e, kind, st, poolSt, alpha, ws, pe, out, k, threads)
}

// matrixSpec is what differs between the solves of a run's matrices: the
// routed experts' (BFP4, the experts' rule, shrunk toward the layer's pool)
// and the BFP8 dense tensors' (BFP8, the dense rule, their own Hessian).
type matrixSpec struct {
	format bfp.Format
	rule   ExponentRule
	kappa  float64
}

func expertSpec(r *gptqRun) matrixSpec {
	return matrixSpec{format: bfp.BFP4, rule: r.opts.ExponentRule, kappa: r.g.Shrink}
}

// solveAs is solve for matrices of spec, held whole in float32 (the head,
// too large for that, is solveHead's).
func (r *gptqRun) solveAs(ctx context.Context, spec matrixSpec, l, e int, kind string, st, poolSt *hessian.Stat, alpha float64, ws [][]float32, pe []*plan.Entry, out, k, threads int) ([]solved, error) {
	res := make([]solved, len(ws))
	base := MatrixMetrics{Tokens: st.Tokens(), WeightSum: st.Weight(), NEff: st.NEff()}
	rtnQ := make([][]float32, len(ws))
	fallbackRule := spec.fallbackRule()
	for i, w := range ws {
		if j := firstNonFinite(w); j >= 0 {
			return nil, &NonFiniteError{Tensor: pe[i].Source, Index: j, Value: w[j]}
		}
		packed, err := bfp.PackMatrix(spec.format, w, out, k)
		if err != nil {
			return nil, fmt.Errorf("quant: %s: %w", pe[i].Name, err)
		}
		q, err := bfp.UnpackMatrix(spec.format, packed, out, k)
		if err != nil {
			return nil, fmt.Errorf("quant: %s: %w", pe[i].Name, err)
		}
		rtnQ[i] = q
		res[i] = solved{packed: packed, q: q, metric: base}
		if fallbackRule != bfp.RuleMax {
			if res[i].packed, err = bfp.PackMatrixRule(spec.format, fallbackRule, w, out, k); err != nil {
				return nil, fmt.Errorf("quant: %s: %w", pe[i].Name, err)
			}
			if res[i].q, err = bfp.UnpackMatrix(spec.format, res[i].packed, out, k); err != nil {
				return nil, fmt.Errorf("quant: %s: %w", pe[i].Name, err)
			}
		}
		res[i].metric.Method, res[i].metric.Reason = string(RTN), "no_tokens"
	}
	if poolSt.Weight() == 0 {
		return res, nil // no token reached any expert of the layer
	}
	h, shrink, err := hessian.Shrunk(st, poolSt, spec.kappa)
	if err != nil {
		return nil, err
	}
	fk := float64(k)
	f, fe, flop, err := r.factor(ctx, spec, l, e, kind, h, k, alpha, threads)
	if err != nil {
		return nil, err
	}
	for i, w := range ws {
		m := &res[i].metric
		m.Shrink = shrink
		// The RTN and zero losses do not depend on the solve, so they are
		// formed first and the decoded RTN result can go before Quantize's
		// buffers exist: for a dense layer's w2 that is a float32 copy of
		// the matrix less at the peak. Losses forms each Q's loss alone, so
		// these calls give the bits of one call for all three.
		ref, err := gptq.LossesStop(h, w, [][]float32{rtnQ[i], nil}, out, k, threads, ctx.Done())
		if errors.Is(err, gptq.ErrStopped) {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		rtnQ[i] = nil
		if f != nil {
			res[i].q = nil // the RTN result (or the fallback rule's): replaced below
			qr, err := f.Quantize(spec.format, w, out)
			if errors.Is(err, gptq.ErrStopped) {
				return nil, ctx.Err()
			}
			if err != nil {
				return nil, fmt.Errorf("quant: %s: %w", pe[i].Name, err)
			}
			if err := checkCanonical(spec, pe[i].Name, qr.Packed, out, k); err != nil {
				return nil, err
			}
			res[i].packed, res[i].q = qr.Packed, qr.Q
			flop += fk * fk * float64(out)
		}
		lq, err := gptq.LossesStop(h, w, [][]float32{res[i].q}, out, k, threads, ctx.Done())
		if errors.Is(err, gptq.ErrStopped) {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		flop += 3 * fk * fk * float64(out)
		m.record(f, fe, lq[0], ref[0], ref[1])
		res[i].tensor = weightError(w, res[i].q)
		res[i].q = nil
	}
	if len(res) > 0 {
		res[0].flop = flop
	}
	if f == nil {
		r.warnFallback(l, e, kind, fe)
	}
	return res, nil
}

// checkCanonical checks that GPTQ's packed result for matrix name [out, k]
// is canonical. It is by construction (docs/gptq.md §1); checking costs
// little next to the solve.
func checkCanonical(spec matrixSpec, name string, packed []byte, out, k int) error {
	if err := bfp.Canonical(spec.format, packed, out, k); err != nil {
		return fmt.Errorf("quant: %s: GPTQ produced non-canonical tiles: %w", name, err)
	}
	return nil
}

// record sets how a solved matrix was stored, GPTQ against f or, when its
// Hessian could not be factored (f nil), RTN after fe, and its losses: lq
// of the stored result, lrtn of RTN and lzero of Q = 0.
func (m *MatrixMetrics) record(f *gptq.Factor, fe *gptq.FactorError, lq, lrtn, lzero float64) {
	if f != nil {
		m.Method, m.Reason = string(GPTQ), ""
		m.Alpha, m.Lambda, m.Retries = f.Alpha(), f.Lambda(), f.Retries()
	} else {
		m.Method, m.Reason = string(RTN), "cholesky_failed"
		m.Alpha, m.Retries = fe.Alpha, fe.Retries
	}
	m.LossGPTQ, m.LossRTN = lq, lrtn
	m.Ratio, m.RelMSE = ratioOf(lq, lrtn), ratioOf(lq, lzero)
}

// warnFallback records that a matrix's Hessian could not be factored.
func (r *gptqRun) warnFallback(l, e int, kind string, fe *gptq.FactorError) {
	r.warn(fmt.Sprintf("%s %s: Hessian could not be factored (%v); stored RTN", where(l, e), kind, fe))
}

// fallbackRule is the exponent rule of spec's matrices stored as RTN (no
// tokens, or a Hessian that cannot be factored): the rule's Hessian-free
// form (search for search and hessian, the plain packer for max). The
// loss ratio's baseline is always the plain packer, whatever the rule, so
// that ratios of runs with different rules compare.
func (spec matrixSpec) fallbackRule() bfp.ExponentRule {
	if spec.rule == ExponentSearch || spec.rule == ExponentHessian {
		return bfp.RuleSearch
	}
	return bfp.RuleMax
}

// factor factors the damped Hessian h (k×k, relative damping alpha) of a
// solve of spec's matrices (kind, of layer l's expert e; −1 for a dense
// tensor) on threads goroutines, and returns the factor with the
// factorization's flops. When h cannot be factored it returns a nil factor
// and the *gptq.FactorError, for the caller to store RTN, or, under
// --strict, a *FallbackError; statistics that are not a Hessian are a
// *StatsError.
func (r *gptqRun) factor(ctx context.Context, spec matrixSpec, l, e int, kind string, h []float64, k int, alpha float64, threads int) (*gptq.Factor, *gptq.FactorError, float64, error) {
	f, err := gptq.NewFactor(h, k, gptq.Options{Alpha: alpha, ActOrder: r.g.ActOrder, BlockSize: r.g.BlockSize, Retries: choleskyRetries, RetryFactor: retryFactor,
		Exponent: spec.rule.gptqRule(), HessianCost: r.g.hessianCost, Threads: threads, Stop: ctx.Done()})
	var fe *gptq.FactorError
	switch {
	case errors.Is(err, gptq.ErrStopped):
		return nil, nil, 0, ctx.Err()
	case errors.As(err, &fe):
		if r.g.Strict {
			return nil, nil, 0, &FallbackError{Layer: l, Expert: e, Matrix: kind, Reason: "cholesky_failed", Err: err}
		}
		return nil, fe, 0, nil
	case err != nil:
		return nil, nil, 0, &StatsError{Layer: l, Expert: e, Matrix: kind, Err: err}
	}
	fk := float64(k)
	return f, nil, (2 * fk * fk * fk / 3) * float64(f.Retries()+1), nil
}

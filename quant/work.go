package quant

import (
	"strings"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/quant/plan"
)

// WorkProgress may be implemented by a Progress to follow a GPTQ run by
// its work rather than its tensor count: a routed expert's tensor costs
// a solve, thousands of times an RTN tensor's packing, and a layer spends
// most of its time in its forward and statistics before its first expert
// tensor is done. The work is an estimate in floating-point operations
// (the solver's own count for the solves), reported as each calibration
// batch, each expert's statistics and each expert's solve finishes, so
// that an estimate of the time left from the share done holds steady
// through a layer. Layers taken over by --resume are no part of it.
type WorkProgress interface {
	// StartWork is called once, after Start and before any Work, with
	// the whole run's work.
	StartWork(total float64)
	// Work adds finished work; it may be called from several goroutines.
	Work(done float64)
}

// rtnWorkPerValue is the work, in the units of the solves' floating-point
// operations, of packing one weight by RTN: reading it, finding its
// group's exponent, rounding and measuring its error take about as long
// as this many multiply-adds of the solver.
const rtnWorkPerValue = 50

// tensorWork is the work of packing a tensor of the plan by RTN.
func tensorWork(e plan.Entry) float64 {
	n := 1.0
	for _, d := range e.Shape {
		n *= float64(d)
	}
	return n * rtnWorkPerValue
}

// forwardCost and statCost weigh the work of the calibration forwards
// (float32, on the engine's tile kernels) and of the statistics' rank-one
// updates (float64, in a fixed order) by their time per floating-point
// operation relative to the solves', so that the share of work done is the
// share of time spent. On the synthetic LFM2-8B-A1B shapes (2 layers, 8,192
// tokens, docs/bench-quantize.md) the MoE layer's forward took 0.28 of the
// solves' time per operation; its statistics between about 0.7 (w2, with
// its float32 products) and 2 (w1/w3) in these units, 1 being used.
const (
	forwardCost = 0.25
	statCost    = 1.0
)

// layerWork is the estimated work of one MoE layer's stages for a
// calibration set of tokens tokens.
type layerWork struct {
	forward, upStats, solveW13, downStats, solveW2 float64
}

// estimateLayer returns the work of an MoE layer of cfg over tokens
// calibration tokens: the forward through the layer's mixer and routed
// experts, the statistics' rank-one updates of every routed token, and
// each expert's solves as the solver counts them (the factorization, the
// row loop and the three losses of each matrix).
func estimateLayer(cfg *config.Config, tokens int) layerWork {
	h, f := float64(cfg.HiddenSize), float64(cfg.MoEIntermediateSize)
	e, k, t := float64(cfg.NumExperts), float64(cfg.NumExpertsPerTok), float64(tokens)
	routed := t * k
	return layerWork{
		forward:   t * 2 * (4*h*h + k*3*h*f) * forwardCost,
		upStats:   upStatsWork(routed, h),
		solveW13:  e * (2*h*h*h/3 + 2*4*h*h*f),
		downStats: downStatsWork(routed, h, f),
		solveW2:   e * (2*f*f*f/3 + 4*f*f*h),
	}
}

// upStatsWork is the work of the w1/w3 statistics of routed tokens.
func upStatsWork(routed, h float64) float64 { return routed * h * h * statCost }

// downStatsWork is the work of the w2 statistics of routed tokens: their
// w1/w3 products (float32, the engine's kernels) and rank-one updates.
func downStatsWork(routed, h, f float64) float64 {
	return routed * (f*f*statCost + 4*h*f*forwardCost)
}

func (w layerWork) total() float64 {
	return w.forward + w.upStats + w.solveW13 + w.downStats + w.solveW2
}

// denseStatsWork is the work of a BFP8 dense tensor's (or the head's)
// statistics for GPTQ over tokens calibration tokens: the forward through
// it and the rank-one updates of its input's statistics. The head's input
// is the final norm, formed without the head's product, so the head has no
// forward; a tensor that reads the input of another (k_proj and v_proj
// q_proj's, w3 w1's) shares that one's statistics.
func denseStatsWork(e plan.Entry, tokens int) float64 {
	n, k, t := float64(e.Shape[0]), float64(e.Shape[1]), float64(tokens)
	// The dense statistics are added inside the engine's forward, one row
	// at a time; weighted like the MoE layers' (forwardCost, statCost) they
	// came out at a third of their time (docs/bench-quantize.md), so the
	// forward and statistics of a dense tensor keep the weight 1.
	var work float64
	if e.Class != plan.Head {
		work += t * 2 * k * n
	}
	if !sharesInput(e.Name) {
		work += t * k * k
	}
	return work
}

// denseSolveWork is the work of solving a BFP8 dense tensor (or the head)
// by GPTQ as the solver counts it: the factorization and the row loop with
// its losses.
func denseSolveWork(e plan.Entry) float64 {
	n, k := float64(e.Shape[0]), float64(e.Shape[1])
	return 2*k*k*k/3 + 4*k*k*n
}

// sharesInput reports whether a dense tensor's input statistics are
// another tensor's (hessian.CollectLinear's shared inputs).
func sharesInput(name string) bool {
	for _, s := range []string{".self_attn.k_proj.weight", ".self_attn.v_proj.weight", ".feed_forward.w3.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

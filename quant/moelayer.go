package quant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
)

// layerResult is a finished MoE layer.
type layerResult struct {
	tensors       []lfmq1.Tensor // in the plan's order
	tensorMetrics map[string]TensorMetric
	report        LayerReport
}

// expertEntries maps a layer's plan entries by expert and projection.
func expertEntries(entries []plan.Entry, n int) ([][3]*plan.Entry, error) {
	out := make([][3]*plan.Entry, n)
	for i := range entries {
		e := &entries[i]
		var k int
		switch {
		case strings.HasSuffix(e.Name, ".w1.weight"):
			k = 0
		case strings.HasSuffix(e.Name, ".w3.weight"):
			k = 1
		case strings.HasSuffix(e.Name, ".w2.weight"):
			k = 2
		default:
			return nil, fmt.Errorf("quant: %s is not an expert projection", e.Name)
		}
		if e.Expert < 0 || e.Expert >= n || out[e.Expert][k] != nil {
			return nil, fmt.Errorf("quant: unexpected expert tensor %s", e.Name)
		}
		out[e.Expert][k] = e
	}
	for x, es := range out {
		for _, e := range es {
			if e == nil {
				return nil, fmt.Errorf("quant: expert %d lacks a projection in the plan", x)
			}
		}
	}
	return out, nil
}

// layer quantizes MoE layer l (docs/gptq.md §3–§4) in steps: calibration
// forward, w1/w3 statistics and solves, w2 statistics with the quantized
// w1/w3, w2 solves. Each step's inputs are dropped once the next has
// what it needs from them, so that one input kind's statistics are held at a time.
func (r *gptqRun) layer(ctx context.Context, l int, entries []plan.Entry) (*layerResult, error) {
	ml, err := r.newMoELayer(l, entries)
	if err != nil {
		return nil, err
	}
	cache, rt, err := r.layerForward(ctx, ml)
	if err != nil {
		return nil, err
	}
	r.releasePages() // the forward's weights: the statistics need only the cache
	up, upPool, err := r.upStats(ctx, ml, cache, rt)
	if err != nil {
		return nil, err
	}
	upRes, err := r.solveUp(ctx, ml, up, upPool)
	if err != nil {
		return nil, err
	}
	up, upPool = nil, nil // one input kind's statistics at a time (docs/gptq.md §2)
	releaseMemory()
	r.releasePages()
	down, downPool, err := r.downStats(ctx, ml, cache, rt, upRes)
	if err != nil {
		return nil, err
	}
	cache = nil // the layer's activations are no longer needed
	downRes, err := r.solveDown(ctx, ml, down, downPool)
	if err != nil {
		return nil, err
	}
	return ml.result(upRes, downRes), nil
}

// moeLayer is the FFN of one layer as layer's steps solve it: its shape
// (E experts of [Fe, H] w1/w3 and [H, Fe] w2), its plan entries by expert
// and projection, and its report so far.
type moeLayer struct {
	l        int
	E, H, Fe int
	entries  []plan.Entry
	ex       [][3]*plan.Entry
	rep      LayerReport
}

// newMoELayer is layer l's FFN, the plan's entries, to solve: an MoE
// layer's routed experts, or a dense FFN solved as the one expert of its
// layer, which every token reaches with weight 1 (hessian.Collect).
func (r *gptqRun) newMoELayer(l int, entries []plan.Entry) (*moeLayer, error) {
	cfg := r.cfg
	E, H, Fe := cfg.NumExperts, cfg.HiddenSize, cfg.MoEIntermediateSize
	if !cfg.IsMoE(l) {
		E, Fe = 1, cfg.IntermediateSize
		entries = slices.Clone(entries)
		for i := range entries {
			entries[i].Expert = 0
		}
	}
	ex, err := expertEntries(entries, E)
	if err != nil {
		return nil, err
	}
	return &moeLayer{l: l, E: E, H: H, Fe: Fe, entries: entries, ex: ex, rep: LayerReport{Layer: l}}, nil
}

// layerForward runs the calibration windows from the stream to ml's FFN
// input, and routes their tokens to its experts.
func (r *gptqRun) layerForward(ctx context.Context, ml *moeLayer) (*hessian.Cache, *hessian.Routed, error) {
	l := ml.l
	t0 := time.Now()
	// In sequential mode layer l's experts are replaced after its
	// statistics, so the stream stays at l's input and the next layer's
	// forward runs l again with the stored experts; otherwise the engine
	// keeps running the source weights and l's output is the next stream.
	// Either way each window's rows enter every layer with the bits a
	// forward from the embedding would give them, so the statistics are
	// those of a full forward up to l.
	forwardDone := 0
	cache, err := hessian.Collect(ctx, r.cal.m, l, r.cal.windows, hessian.CollectOptions{Progress: func(done, total int) {
		r.prog.setStage(l, fmt.Sprintf("forward %d/%d", done, total))
		r.prog.addWork(WorkForward, r.prog.forwardWork[l]*float64(done-forwardDone)/float64(max(total, 1)))
		forwardDone = done
	}, Stream: &r.cal.stream, Past: !r.g.Sequential})
	if err != nil {
		return nil, nil, err
	}
	rt, err := cache.Route(ml.E)
	if err != nil {
		return nil, nil, err
	}
	ml.rep.Forward = time.Since(t0)
	return cache, rt, nil
}

// upStats accumulates every expert's w1/w3 input statistics from the
// forward's cache and routing, and their pool.
func (r *gptqRun) upStats(ctx context.Context, ml *moeLayer, cache *hessian.Cache, rt *hessian.Routed) ([]*hessian.Stat, *hessian.Stat, error) {
	H := ml.H
	r.prog.setStage(ml.l, "statistics w1/w3")
	t0 := time.Now()
	up, err := hessian.UpStats(ctx, cache, rt, r.workers, func(e int) {
		r.prog.addWork(WorkUpStats, upStatsWork(float64(len(rt.Tokens[e])), float64(H)))
	})
	if err != nil {
		return nil, nil, r.statsError(ml.l, err, "w1/w3")
	}
	upPool, err := hessian.Pool(up)
	if err != nil {
		return nil, nil, err
	}
	ml.rep.UpStats = time.Since(t0)
	for _, st := range up {
		ml.rep.UpHessianFLOP += float64(st.Tokens()) * float64(H*(H+1))
	}
	return up, upPool, nil
}

// solveUp solves every expert's w1 and w3 against its statistics up
// (shrunk toward upPool), dropping each expert's statistics as its solve
// ends.
func (r *gptqRun) solveUp(ctx context.Context, ml *moeLayer, up []*hessian.Stat, upPool *hessian.Stat) ([][2]solved, error) {
	l, E, H, Fe, ex := ml.l, ml.E, ml.H, ml.Fe, ml.ex
	r.prog.setStage(l, "solve w1/w3")
	t0 := time.Now()
	upRes := make([][2]solved, E)
	if err := r.forExperts(ctx, E, solveScratch(Fe, H, 2, r.g.BlockSize), func(e, threads int) error {
		w1, err := weightValues(r.src, *ex[e][0])
		if err != nil {
			return err
		}
		w3, err := weightValues(r.src, *ex[e][1])
		if err != nil {
			return err
		}
		out, err := r.solve(ctx, l, r.who(l, e), "w1/w3", up[e], upPool, r.g.DampW13, [][]float32{w1, w3}, []*plan.Entry{ex[e][0], ex[e][1]}, Fe, H, threads)
		if err != nil {
			return err
		}
		upRes[e] = [2]solved{out[0], out[1]}
		up[e] = nil // this expert's statistics are used up
		r.prog.addWork(WorkUpSolve, r.prog.lw.solveW13/float64(E))
		r.prog.done(ex[e][0].Name)
		r.prog.done(ex[e][1].Name)
		return nil
	}); err != nil {
		return nil, err
	}
	ml.rep.SolveW13 = time.Since(t0)
	return upRes, nil
}

// downStats accumulates every expert's w2 input statistics, and their
// pool, from the forward's cache and routing through the w1/w3 the engine
// will run: the stored quantized ones (upRes) in sequential mode, the
// source ones otherwise.
func (r *gptqRun) downStats(ctx context.Context, ml *moeLayer, cache *hessian.Cache, rt *hessian.Routed, upRes [][2]solved) ([]*hessian.Stat, *hessian.Stat, error) {
	l, E, H, Fe, ex := ml.l, ml.E, ml.H, ml.Fe, ml.ex
	r.prog.setStage(l, "statistics w2")
	t0 := time.Now()
	var err error
	mats := make([]hessian.Expert, E)
	for e := range E {
		for k, dst := range []**kernels.Matrix{&mats[e].W1, &mats[e].W3} {
			var mat *kernels.Matrix
			if r.g.Sequential {
				mat, err = kernels.NewBFP(kernels.BFP4, Fe, H, upRes[e][k].packed)
			} else {
				var v []float32
				if v, err = weightValues(r.src, *ex[e][k]); err == nil {
					mat, err = kernels.NewF32(Fe, H, v)
				}
			}
			if err != nil {
				return nil, nil, fmt.Errorf("quant: layer %d expert %d: %w", l, e, err)
			}
			*dst = mat
		}
	}
	down, err := hessian.DownStats(ctx, cache, rt, mats, r.g.W2Weight, r.workers, func(e int) {
		r.prog.addWork(WorkDownStats, downStatsWork(float64(len(rt.Tokens[e])), float64(H), float64(Fe)))
	})
	if err != nil {
		return nil, nil, r.statsError(l, err, "w2")
	}
	downPool, err := hessian.Pool(down)
	if err != nil {
		return nil, nil, err
	}
	cache, mats = nil, nil // the layer's activations and w1/w3 are no longer needed
	ml.rep.DownStats = time.Since(t0)
	for _, st := range down {
		ml.rep.DownHessianFLOP += float64(st.Tokens()) * float64(Fe*(Fe+1))
		ml.rep.DownInputFLOP += float64(st.Tokens()) * float64(4*H*Fe)
	}
	return down, downPool, nil
}

// solveDown solves every expert's w2 against its statistics down (shrunk
// toward downPool), dropping each expert's statistics as its solve ends.
func (r *gptqRun) solveDown(ctx context.Context, ml *moeLayer, down []*hessian.Stat, downPool *hessian.Stat) ([]solved, error) {
	l, E, H, Fe, ex := ml.l, ml.E, ml.H, ml.Fe, ml.ex
	r.prog.setStage(l, "solve w2")
	t0 := time.Now()
	downRes := make([]solved, E)
	if err := r.forExperts(ctx, E, solveScratch(H, Fe, 1, r.g.BlockSize), func(e, threads int) error {
		w2, err := weightValues(r.src, *ex[e][2])
		if err != nil {
			return err
		}
		out, err := r.solve(ctx, l, r.who(l, e), "w2", down[e], downPool, r.g.DampW2, [][]float32{w2}, []*plan.Entry{ex[e][2]}, H, Fe, threads)
		if err != nil {
			return err
		}
		downRes[e] = out[0]
		r.prog.addWork(WorkDownSolve, r.prog.lw.solveW2/float64(E))
		r.prog.done(ex[e][2].Name)
		down[e] = nil
		return nil
	}); err != nil {
		return nil, err
	}
	ml.rep.SolveW2 = time.Since(t0)
	return downRes, nil
}

// result is the finished layer from its experts' solved w1/w3 (upRes) and
// w2 (downRes): its tensors in the plan's order, their metrics, and its
// report with the layer's metrics.
func (ml *moeLayer) result(upRes [][2]solved, downRes []solved) *layerResult {
	rep := ml.rep
	ex := ml.ex
	lr := &layerResult{tensorMetrics: map[string]TensorMetric{}}
	rep.Metrics = LayerMetrics{Layer: ml.l}
	stored := map[string]*solved{}
	for e := range ml.E {
		for k, s := range []*solved{&upRes[e][0], &upRes[e][1], &downRes[e]} {
			stored[ex[e][k].Name] = s
			rep.SolveFLOP += s.flop
		}
		rep.Metrics.Experts = append(rep.Metrics.Experts, ExpertMetrics{Expert: e, W1: upRes[e][0].metric, W3: upRes[e][1].metric, W2: downRes[e].metric})
	}
	rep.Metrics.summarise()
	for _, pe := range ml.entries {
		s := stored[pe.Name]
		out, in := int(pe.Shape[0]), int(pe.Shape[1])
		lr.tensors = append(lr.tensors, lfmq1.Tensor{Name: pe.Name, Format: lfmq1.BFP4, Shape: pe.Shape, DType: dtype.U8,
			StoredShape: []int64{int64(bfp.NumTiles(out, in)), int64(bfp.BFP4.TileBytes())}, Data: s.packed})
		lr.tensorMetrics[pe.Name] = s.tensor
	}
	lr.report = rep
	return lr
}

// who is the expert number errors and warnings give solve e of layer l:
// e, or −1 for a dense layer's FFN (solved as its one expert).
func (r *gptqRun) who(l, e int) int {
	if !r.cfg.IsMoE(l) {
		return -1
	}
	return e
}

func (r *gptqRun) statsError(l int, err error, matrix string) error {
	var nf *hessian.NonFiniteError
	var ee *hessian.ExpertError
	if errors.As(err, &nf) && errors.As(err, &ee) {
		return &StatsError{Layer: l, Expert: r.who(l, ee.Expert), Matrix: matrix, Err: nf}
	}
	return err
}

// forExperts runs fn for every expert, each a solve holding scratch bytes:
// as many at a time as the solve budget admits (at most the workers), each
// told to use threads goroutines so that together they keep the workers
// busy (solveSlots). Results go to slots the caller indexes by expert, and
// the solver's bits do not depend on threads, so neither do the bytes.
func (r *gptqRun) forExperts(ctx context.Context, n int, scratch int64, fn func(e, threads int) error) error {
	solves, threads := solveSlots(r.workers, r.budget.limit, scratch)
	p := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(solves)
	for e := range n {
		p.Go(func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.budget.acquire(ctx, scratch); err != nil {
				return err
			}
			defer r.budget.release(scratch)
			return fn(e, threads)
		})
	}
	return p.Wait()
}

package quant

import (
	"fmt"
	"strings"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/quant/plan"
)

// WorkProgress may be implemented by a Progress to follow a GPTQ run by
// its work rather than its tensor count: a routed expert's tensor costs
// a solve, thousands of times an RTN tensor's packing, and a layer spends
// most of its time in its forward and statistics before its first expert
// tensor is done. The work of each kind is counted in its own operations
// (floating-point operations, the solver's own count for the solves; see
// WorkKind), reported as each calibration batch, each expert's statistics,
// each solve and each packed tensor finishes. The kinds' speeds per
// operation differ and change with the code and the machine, so a
// WorkProgress that estimates the time left should time each kind apart
// (WorkKind.Cost is a prior for a kind not yet seen). Layers taken over by
// --resume are no part of it.
type WorkProgress interface {
	// StartWork is called once, after Start and before any Work, with
	// the whole run's work of each kind (zero for a kind the run does not
	// do).
	StartWork(total WorkTotals)
	// Work adds finished work of a kind; it may be called from several
	// goroutines, but a run does one kind at a time, apart from the
	// packing of a few tensors between a dense file's solves.
	Work(kind WorkKind, done float64)
}

// WorkKind is a kind of work of a GPTQ run, in the order a run meets them
// in an MoE layer (the packing and the dense files come first and between
// the layers, the head last).
type WorkKind int

const (
	// WorkPack is packing a tensor by round to nearest (BFP8 tensors not
	// solved, tensors of resumed layers): rtnWorkPerValue per value.
	WorkPack WorkKind = iota
	// WorkForward is an MoE layer's calibration forward: the layers from
	// the calibration stream's position through this one (as far as its
	// router), 2 operations per weight and token (layerForwardWork).
	WorkForward
	// WorkUpStats is the w1/w3 statistics of the routed experts: a
	// rank-one update of H² per routed token.
	WorkUpStats
	// WorkUpSolve is the w1/w3 solves: the factor and inverse (2K³/3)
	// and the row loop with its losses (4K²N per matrix).
	WorkUpSolve
	// WorkDownStats is the w2 statistics: each routed token's w1/w3
	// products (4HF, weighted by forwardPerStat) and a rank-one update of
	// F².
	WorkDownStats
	// WorkDownSolve is the w2 solves, counted as the w1/w3 ones.
	WorkDownSolve
	// WorkDenseStats is a layer's BFP8 dense tensors' statistics: the
	// forward of the layers from the stream's position through this one
	// (as far as its last solved input; weighted by denseForwardPerStat)
	// and the rank-one updates of each distinct input (K² per token).
	WorkDenseStats
	// WorkDenseSolve is the BFP8 dense tensors' solves, counted as the
	// experts'.
	WorkDenseSolve
	// WorkHeadStats is the head's input statistics, counted as a dense
	// layer's (the forward of the last layer, and K² per token).
	WorkHeadStats
	// WorkHeadSolve is the head's solve, counted as the experts'.
	WorkHeadSolve
	// NumWorkKinds is the number of kinds.
	NumWorkKinds
)

// WorkTotals is a run's work of each kind, indexed by WorkKind.
type WorkTotals [NumWorkKinds]float64

// Sum is the work of every kind.
func (t WorkTotals) Sum() float64 {
	var s float64
	for _, w := range t {
		s += w
	}
	return s
}

var workKindNames = [NumWorkKinds]string{"pack", "forward", "statistics w1/w3", "solve w1/w3", "statistics w2", "solve w2", "statistics dense", "solve dense", "statistics head", "solve head"}

func (k WorkKind) String() string {
	if k < 0 || k >= NumWorkKinds {
		return fmt.Sprintf("WorkKind(%d)", int(k))
	}
	return workKindNames[k]
}

// Cost is the prior time of one unit of the kind's work, relative to the
// w1/w3 solves' (WorkUpSolve = 1): what a progress estimate assumes for a
// kind until it has timed it, scaled by the timing of the kind's Family or
// of the run. The figures were measured on the synthetic LFM2-8B-A1B and
// LFM2-24B-A2B shapes (docs/bench-quantize.md, "The progress estimate");
// they depend on how each kind is implemented, on the shapes and, on a
// shared machine, on the load while each kind ran, so they are priors for
// the estimate to correct as it times each kind, not constants to trust.
func (k WorkKind) Cost() float64 {
	if k < 0 || k >= NumWorkKinds {
		return 1
	}
	return workCost[k]
}

// Family groups the kinds that share most of their code, so that a change
// in that code's speed moves them together: the packing (0); the
// forwards, alone or with a dense file's statistics (1); the experts'
// statistics (2); and the solves, all by the same solver (3). A progress
// estimate can time a kind it has not met yet by its family's timing.
func (k WorkKind) Family() int {
	switch k {
	case WorkPack:
		return 0
	case WorkForward, WorkDenseStats, WorkHeadStats:
		return 1
	case WorkUpStats, WorkDownStats:
		return 2
	}
	return 3
}

// workCost is each kind's Cost: the time per unit over the w1/w3 solves',
// in CPU time, from one run of the default command on an idle machine: the
// synthetic LFM2-8B-A1B shape with 4 layers, the fixture's 128 calibration
// windows, 2 workers (internal/progress/testdata/worktrace/8b-a1b-4layers-idle.trace;
// docs/bench-quantize.md). With fewer windows the statistics cost more per
// unit against the solves (their per-expert fixed work, the Hessian's
// finishing and shrinking, weighs more): the 2-layer, 32-window runs gave
// 1.8–2.9 times these for the experts' statistics, and a shared machine's
// load moves a kind's cost by up to 1.7× from one run to another. The
// packing, which took no measurable time, is given a tenth. On the fixture
// (testdata/tiny-lfm2-moe, its 128 windows) the statistics come out four
// to six times cheaper against the solves, whose small matrices cost more
// per operation there.
var workCost = [NumWorkKinds]float64{
	WorkPack:       0.1,
	WorkForward:    0.38,
	WorkUpStats:    0.82,
	WorkUpSolve:    1,
	WorkDownStats:  1.13,
	WorkDownSolve:  1.1,
	WorkDenseStats: 0.55,
	WorkDenseSolve: 1.39,
	WorkHeadStats:  0.44,
	WorkHeadSolve:  1.04,
}

// rtnWorkPerValue is the work of packing one weight by RTN: reading it,
// finding its group's exponent, rounding and measuring its error, counted
// as this many operations.
const rtnWorkPerValue = 50

// tensorWork is the work of packing a tensor of the plan by RTN.
func tensorWork(e plan.Entry) float64 {
	n := 1.0
	for _, d := range e.Shape {
		n *= float64(d)
	}
	return n * rtnWorkPerValue
}

// layerWork is the estimated work of one MoE layer's stages for a
// calibration set of tokens tokens.
type layerWork struct {
	upStats, solveW13, downStats, solveW2 float64
}

// estimateLayer returns the work of an MoE layer of cfg over tokens
// calibration tokens after its forward: the statistics' rank-one updates
// of every routed token, and
// each expert's solves as the solver counts them (the factorization, the
// row loop and the three losses of each matrix). A dense LFM2's layers,
// whose FFN is solved as the one expert that every token reaches, count
// the same way with one expert of the dense width.
func estimateLayer(cfg *config.Config, tokens int) layerWork {
	h, f := float64(cfg.HiddenSize), float64(cfg.MoEIntermediateSize)
	e, k, t := float64(cfg.NumExperts), float64(cfg.NumExpertsPerTok), float64(tokens)
	if cfg.Dense() {
		f, e, k = float64(cfg.IntermediateSize), 1, 1
	}
	routed := t * k
	return layerWork{
		upStats:   upStatsWork(routed, h),
		solveW13:  e * (2*h*h*h/3 + 2*4*h*h*f),
		downStats: downStatsWork(routed, h, f),
		solveW2:   e * (2*f*f*f/3 + 4*f*f*h),
	}
}

// upStatsWork is the work of the w1/w3 statistics of routed tokens.
func upStatsWork(routed, h float64) float64 { return routed * h * h }

// downStatsWork is the work of the w2 statistics of routed tokens: their
// w1/w3 products (float32, the engine's kernels) and rank-one updates.
func downStatsWork(routed, h, f float64) float64 {
	return routed * (f*f + 4*h*f*forwardPerStat)
}

// denseForwardPerStat is forwardPerStat for the dense files' and the
// head's statistics, whose mix of forward and rank-one updates differs
// from one layer to the next (layer 0's mostly the updates of its w2
// input, K = 7,168; layer 1's mostly the forward of layer 0): fitted to
// those two items' CPU times in two runs on the 8B-A1B shapes
// (docs/bench-quantize.md), where a forward operation cost 0.42 and 0.83
// of one of their updates, so that the kind's time per unit holds from
// one layer to the next.
const denseForwardPerStat = 0.6

// forwardPerStat weighs an operation of a forward (float32, on the
// engine's tile kernels) against one of the statistics' rank-one updates
// (float64, in a fixed order) where one kind of work does both (a dense
// file's statistics, the w2 statistics), so that the kind's time per unit
// holds from one layer to the next whatever their mix: layer 0's dense
// statistics are mostly rank-one updates of the dense w2's input (K =
// 7,168), layer 1's mostly the forward. Measured on the 8B-A1B shapes
// (docs/bench-quantize.md): the MoE forward took 0.017 ns per operation,
// the w1/w3 statistics 0.10 ns per rank-one operation.
const forwardPerStat = 0.16

// addTo adds the layer's work to a run's totals by kind.
func (w layerWork) addTo(t *WorkTotals) {
	t[WorkUpStats] += w.upStats
	t[WorkUpSolve] += w.solveW13
	t[WorkDownStats] += w.downStats
	t[WorkDownSolve] += w.solveW2
}

// layerForward is a decoder layer's forward work per token, two operations
// per weight of its linear maps (a routed expert's weighted by the share of
// tokens it gets, top-k of the experts), split where a calibration forward
// may stop inside it (model.LayerPart).
type layerForward struct {
	moe bool
	// mixer is the operator block's products before its output
	// projection, mixerOut that projection.
	mixer, mixerOut float64
	// router is an MoE layer's router; up and down are the FFN's w1/w3 and
	// w2 (a dense FFN's, or the routed experts' share).
	router, up, down float64
}

// upTo is the layer's work per token when a forward runs it as far as part.
func (f layerForward) upTo(part model.LayerPart) float64 {
	switch part {
	case model.MixerInputs:
		return f.mixer
	case model.FFNInput:
		return f.mixer + f.mixerOut + f.router
	case model.LinearInputs:
		if f.moe {
			return f.mixer + f.mixerOut + f.router
		}
		return f.mixer + f.mixerOut + f.up
	}
	return f.mixer + f.mixerOut + f.router + f.up + f.down
}

// layerForwardWork is the work of each decoder layer's forward per token.
func layerForwardWork(cfg *config.Config, p *plan.Plan) []layerForward {
	w := make([]layerForward, cfg.NumLayers)
	for l := range w {
		w[l].moe = cfg.IsMoE(l)
	}
	for _, e := range p.Entries {
		if e.Layer < 0 || e.Layer >= cfg.NumLayers || len(e.Shape) != 2 {
			continue
		}
		ops := 2 * float64(e.Shape[0]) * float64(e.Shape[1])
		if e.Class == plan.Experts && cfg.NumExperts > 0 {
			ops *= float64(cfg.NumExpertsPerTok) / float64(cfg.NumExperts)
		}
		f := &w[e.Layer]
		switch n := e.Name; {
		case strings.HasSuffix(n, "conv.out_proj.weight"), strings.HasSuffix(n, "self_attn.out_proj.weight"), strings.HasSuffix(n, "self_attn.o_proj.weight"):
			f.mixerOut += ops
		case strings.Contains(n, ".conv."), strings.Contains(n, ".self_attn."):
			f.mixer += ops
		case strings.HasSuffix(n, "feed_forward.gate.weight"):
			f.router += ops
		case strings.HasSuffix(n, "w2.weight"):
			f.down += ops
		default: // w1, w3
			f.up += ops
		}
	}
	return w
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

package quant

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/safetensors"
	"github.com/lfmq/lfmq/quant/calib"
	"github.com/lfmq/lfmq/quant/gptq"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
	"github.com/lfmq/lfmq/version"
)

// StageProgress may be implemented by a Progress to learn what a GPTQ run
// is doing between tensors: stage is "forward i/n", "statistics w1/w3",
// "solve w1/w3", "statistics w2", "solve w2", "done" or "resumed" for MoE
// layer layer.
type StageProgress interface {
	Stage(layer int, stage string)
}

// FallbackError refuses (with GPTQOptions.Strict) a matrix that GPTQ could
// not solve. Expert is -1 for a dense LFM2's FFN.
type FallbackError struct {
	Layer, Expert int
	Matrix        string
	Reason        string
	Err           error
}

func (e *FallbackError) Error() string {
	return fmt.Sprintf("quant: %s %s: GPTQ failed (%s) and --strict forbids the RTN fallback: %v", where(e.Layer, e.Expert), e.Matrix, e.Reason, e.Err)
}

// where names a solved matrix's place: "layer 3 expert 5", or "layer 3
// FFN" for a dense LFM2's (expert −1).
func where(layer, expert int) string {
	if expert < 0 {
		return fmt.Sprintf("layer %d FFN", layer)
	}
	return fmt.Sprintf("layer %d expert %d", layer, expert)
}

func (e *FallbackError) Unwrap() error { return e.Err }

// StatsError reports non-finite calibration statistics, naming where
// (Expert −1: a dense LFM2's FFN).
type StatsError struct {
	Layer  int
	Expert int
	Matrix string
	Err    error
}

func (e *StatsError) Error() string {
	return fmt.Sprintf("quant: %s %s input statistics: %v", where(e.Layer, e.Expert), e.Matrix, e.Err)
}

func (e *StatsError) Unwrap() error { return e.Err }

// gptqRun is the state of one GPTQ quantization.
type gptqRun struct {
	opts    Options
	g       GPTQOptions
	cfg     *config.Config
	src     *hf.Checkpoint
	plan    *plan.Plan
	m       *model.Model
	mapped  *mappedFiles
	windows [][]int
	// stream is the calibration windows' residual stream at the input of
	// the lowest layer whose weights may still change or that no stream
	// has passed yet; every MoE layer's statistics start from it.
	stream  hessian.Stream
	workers int
	// budget bounds the scratch of the expert solves in flight.
	budget *memBudget
	prog   Progress
	stage  StageProgress
	// work, when the Progress follows the work, gets each stage's work
	// by kind as it finishes (lw: an MoE layer's statistics and solves).
	work WorkProgress
	lw   layerWork
	// forwardWork is each solved layer's calibration forward, and
	// denseStatsWork each layer's (NumLayers: the head's) dense
	// statistics, reported as they end.
	forwardWork    map[int]float64
	denseStatsWork map[int]kindWork
	// denseProg reports the dense, head and kept tensors (with their work).
	denseProg Progress
	report    *GPTQReport
	mu        sync.Mutex // guards report.Warnings
}

// quantizeGPTQ is Quantize for Method GPTQ: RTN for every BFP8 tensor, then
// the routed experts layer by layer with GPTQ (gptq.md), resumable.
func quantizeGPTQ(ctx context.Context, opts Options, cfg *config.Config, src *hf.Checkpoint, p *plan.Plan, source lfmq1.Source) (res *Result, err error) {
	g := opts.GPTQ
	if err := g.validate(); err != nil {
		return nil, err
	}
	// Everything that can refuse the run is checked before any output
	// exists: calibration input, disjointness, the model itself.
	enc, err := calib.NewEncoder(opts.ModelDir, cfg.VocabSize, g.chatTime())
	if err != nil {
		return nil, err
	}
	set, err := calib.Load(g.Calib, enc, calib.Options{Seqs: g.CalibSeqs, Len: g.CalibLen, Seed: g.Seed})
	if err != nil {
		return nil, err
	}
	// The corpora are checked, and recorded, in name order: the order of
	// the flags that named them is no part of the checkpoint's identity.
	evals := slices.SortedFunc(slices.Values(g.EvalCorpora), func(a, b EvalCorpus) int { return strings.Compare(a.Name, b.Name) })
	var corpora []*calib.Corpus
	for _, c := range evals {
		cp, err := calib.LoadCorpus(c.Name, c.Path, enc)
		if err != nil {
			return nil, err
		}
		corpora = append(corpora, cp)
	}
	disj, err := calib.CheckDisjoint(set, corpora, enc.IsControl)
	if err != nil {
		return nil, err
	}
	settings := g.settings(set, disj)
	settings.ExponentRule, settings.DenseExponentRule = string(opts.ExponentRule.orMax()), string(opts.DenseExponentRule.orMax())
	if opts.DenseMethod == GPTQ {
		order := "sequential"
		if !g.Sequential {
			order = "parallel"
		}
		settings.DenseGPTQ = &DenseGPTQSettings{Damp: g.DampDense, HessianWeight: "1", Order: order}
	}
	settingsJSON, err := canonjson.Marshal(settings)
	if err != nil {
		return nil, err
	}
	fp, err := fingerprint(source, settings)
	if err != nil {
		return nil, err
	}
	fp["lfmq_version"], fp["method"] = version.Version, string(GPTQ)
	// The statistics come from the engine's float32 forward, so a binary
	// with other kernels may produce other bytes; a development build keeps
	// its version string across such changes, the executable's digest does
	// not.
	fp["binary_sha256"] = executableDigest()

	workers := opts.Workers
	if workers <= 0 {
		workers = max(1, runtimeProcs())
	}
	// Deferred before the model's Close, so it runs after it: the model
	// runs the installed tensors from these mappings until then.
	mapped := &mappedFiles{}
	defer mapped.close()
	m, err := load.Load(opts.ModelDir, load.Options{Threads: workers})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	for i, w := range set.Windows {
		if len(w) > m.MaxContext() {
			return nil, fmt.Errorf("quant: calibration window %d has %d tokens, more than the model's context of %d", i, len(w), m.MaxContext())
		}
	}

	w, resumed, err := lfmq1.CreateResumable(opts.OutDir, g.Resume)
	if err != nil {
		return nil, err
	}
	rs, err := openResume(w.Dir(), fp, resumed)
	if err != nil {
		// A partial run from other inputs is the user's to resume or
		// remove: leave it exactly as it is.
		w.Keep()
		return nil, err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if len(rs.prog.Layers) > 0 && resumable(err) {
			w.Keep()
			err = &PartialError{Partial: w.Dir(), Layers: len(rs.prog.Layers), Err: err}
			return
		}
		w.Abort()
	}()

	limit := g.SolveMemory
	if limit == 0 {
		limit = defaultSolveMemory(cfg.NumExperts, cfg.HiddenSize)
	}
	r := &gptqRun{opts: opts, g: g, cfg: cfg, src: src, plan: p, m: m, mapped: mapped, windows: set.Windows, workers: workers,
		budget: newMemBudget(limit, g.solveAccount), prog: opts.Progress, report: &GPTQReport{CalibTokens: set.Tokens, FFN: cfg.Dense()}}
	// The run's budget becomes the collector's soft limit, unless the user
	// set one (GOMEMLIMIT) or another run in the process has.
	r.report.MemoryBudget = runMemory(cfg, set.Tokens, set.MaxLen, limit)
	r.report.MappedBudget = runMappedMemory(cfg, p, src, set.Tokens, workers)
	if prev := debug.SetMemoryLimit(-1); prev == math.MaxInt64 {
		debug.SetMemoryLimit(runMemoryLimit(r.report.MemoryBudget))
		defer debug.SetMemoryLimit(prev)
	}
	if sp, ok := opts.Progress.(StageProgress); ok {
		r.stage = sp
	}
	if r.prog != nil {
		r.prog.Start(len(p.Entries))
	}
	var denseProg Progress = r.prog
	if wp, ok := opts.Progress.(WorkProgress); ok {
		r.work, r.lw = wp, estimateLayer(cfg, set.Tokens)
		denseProg = r.startWork(p, rs, set.Tokens)
	}
	r.denseProg = denseProg
	res = &Result{OutDir: opts.OutDir, Tensors: len(p.Entries), GPTQ: r.report}
	metrics := tensorMetrics{}

	// Dense, head and kept tensors: RTN, as in an RTN run. In sequential
	// mode the engine then runs with every BFP8 weight quantized.
	start := time.Now()
	packBudget := newMemBudget(packMemory(cfg, g.SolveMemory), nil)
	for _, file := range p.Files() {
		entries := p.ByFile(file)
		if solvedByGPTQ(entries[0]) || fileHasDenseSolve(opts, entries) {
			continue
		}
		out, err := produceAll(ctx, src, entries, opts.packRules(), workers, denseProg, packBudget)
		if err != nil {
			return nil, err
		}
		tensors := make([]lfmq1.Tensor, len(out))
		var run []lfmq1.Tensor
		for i, o := range out {
			tensors[i] = o.tensor
			if o.metric != nil {
				metrics[o.tensor.Name] = *o.metric
			}
			res.Bytes += int64(len(o.tensor.Data))
			if g.Sequential && entries[i].Class == plan.Dense {
				run = append(run, o.tensor)
			}
		}
		if err := w.WriteFile(file, tensors); err != nil {
			return nil, err
		}
		if err := r.install(w, file, run); err != nil {
			return nil, err
		}
	}
	r.report.Dense = time.Since(start)
	// The dense tensors' float32 copies are garbage now; the heap they
	// grew must not stay under the MoE layers' statistics.
	releaseMemory()
	r.releasePages()

	var layers []LayerMetrics
	dense := map[string]MatrixMetrics{}
	for l := range cfg.NumLayers {
		if lf := lfmq1.LayerFile(l, cfg.NumLayers); fileHasDenseSolve(opts, p.ByFile(lf)) {
			if err := r.denseLayer(ctx, w, rs, l, lf, p.ByFile(lf), metrics, dense, res); err != nil {
				return nil, err
			}
		}
		file := lfmq1.ExpertsFile(l, cfg.NumLayers)
		switch {
		case cfg.Dense():
			file = lfmq1.FFNFile(l, cfg.NumLayers)
		case !cfg.IsMoE(l) || opts.KeepExperts:
			continue
		}
		entries := p.ByFile(file)
		var lr *layerResult
		if d, ok := rs.done(l); ok {
			lr, err = r.resumeLayer(w, rs, d, entries)
			if err != nil {
				return nil, err
			}
		}
		resumed := lr != nil
		if !resumed {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			lr, err = r.layer(ctx, l, entries)
			if err != nil {
				return nil, err
			}
			if err := w.WriteFile(file, lr.tensors); err != nil {
				return nil, err
			}
			if err := rs.complete(l, file, &layerRecord{Metrics: lr.report.Metrics, Tensors: lr.tensorMetrics}); err != nil {
				return nil, err
			}
		}
		for _, t := range lr.tensors {
			res.Bytes += int64(len(t.Data))
			if resumed {
				r.done(t.Name) // a solved layer reported each tensor as its solve ended
			}
		}
		for name, tm := range lr.tensorMetrics {
			metrics[name] = tm
		}
		if g.Sequential {
			if err := r.install(w, file, lr.tensors); err != nil {
				return nil, err
			}
		}
		layers = append(layers, lr.report.Metrics)
		r.report.Layers = append(r.report.Layers, lr.report)
		r.report.Fallbacks += lr.report.Metrics.Fallbacks
		lr = nil
		releaseMemory()
		r.releasePages()
		r.setStage(l, "done")
	}
	if gf := lfmq1.GlobalFile; fileHasDenseSolve(opts, p.ByFile(gf)) {
		t0 := time.Now()
		st, err := r.denseFile(ctx, cfg.NumLayers, p.ByFile(gf))
		r.report.DenseGPTQ += time.Since(t0)
		r.report.HeadGPTQ = time.Since(t0)
		if err != nil {
			return nil, err
		}
		if err := w.WriteFile(gf, st.tensors); err != nil {
			return nil, err
		}
		st.record(metrics, dense, res)
	}
	q := quantizationSpec(p, opts)
	q.Settings = settingsJSON
	if layers == nil {
		layers = []LayerMetrics{}
	}
	if len(dense) == 0 {
		dense = nil
	}
	if err := finish(w, opts, cfg.ModelType, source, q, gptqMetrics{Tensors: metrics, Layers: layers, Dense: dense}, res); err != nil {
		return nil, err
	}
	committed = true
	return res, nil
}

// solvedByGPTQ reports whether a GPTQ run solves e (an MoE's routed
// experts, a dense LFM2's BFP4 FFN) rather than packing it by RTN.
func solvedByGPTQ(e plan.Entry) bool {
	return (e.Class == plan.Experts || e.Class == plan.FFN) && e.Format == lfmq1.BFP4
}

// gptqMetrics is the manifest's metrics block of a GPTQ checkpoint.
type gptqMetrics struct {
	Tensors tensorMetrics  `json:"tensors"`
	Layers  []LayerMetrics `json:"layers"`
	// Dense holds the GPTQ metrics of each BFP8 tensor solved with
	// DenseMethod GPTQ (absent otherwise).
	Dense map[string]MatrixMetrics `json:"dense,omitempty"`
}

// done reports a tensor's bytes in memory to the Progress, if any.
func (r *gptqRun) done(tensor string) {
	if r.prog != nil {
		r.prog.Done(tensor)
	}
}

// startWork tells the WorkProgress the run's work: every dense, head and
// kept tensor's packing or, with DenseMethod GPTQ, statistics and solve,
// and every MoE layer that --resume does not take over. It returns the
// Progress for the dense pass, which reports each tensor's work with the
// tensor (a dense file's statistics as they end).
//
// A forward's work is that of the layers it runs: the calibration stream
// (hessian.Stream) stays at a layer's input after its statistics in
// sequential mode, so the next statistics run that layer again, with its
// quantized weights, before their own; and a layer taken over by --resume
// leaves the stream where it was, for the next forward to run.
func (r *gptqRun) startWork(p *plan.Plan, rs *resumeState, tokens int) Progress {
	perTensor := map[string]kindWork{}
	r.forwardWork, r.denseStatsWork = map[int]float64{}, map[int]kindWork{}
	var total WorkTotals
	for _, e := range p.Entries {
		// The solved FFN tensors (an MoE's experts, a dense LFM2's BFP4
		// FFN) are the layers' work, below.
		if e.Class == plan.Experts || solvedByGPTQ(e) {
			continue
		}
		perTensor[e.Name] = kindWork{WorkPack, tensorWork(e)}
		// A dense solve weighs what it costs, unless --resume takes its
		// layer over (never the global file's head: it has no record).
		if _, resumed := rs.doneKind(e.Layer, "dense"); denseSolved(r.opts, e) && !resumed {
			solve := WorkDenseSolve
			if e.Class == plan.Head {
				solve = WorkHeadSolve
			}
			perTensor[e.Name] = kindWork{solve, denseSolveWork(e)}
		}
		total[perTensor[e.Name].kind] += perTensor[e.Name].work
	}
	perToken := layerForwardWork(r.cfg, p)
	stream := 0 // the calibration stream is at the input of this layer
	// forward is the work of a forward from the stream through layer to,
	// run as far as last (as hessian's collections run it).
	forward := func(to int, last model.LayerPart) float64 {
		var w float64
		for l := stream; l <= to && l < len(perToken); l++ {
			part := model.WholeLayer
			if l == to {
				part = last
			}
			w += perToken[l].upTo(part)
		}
		return w * float64(tokens)
	}
	denseStats := func(layer int, file string) {
		var inputs float64
		var names []string
		for _, e := range p.ByFile(file) {
			if denseSolved(r.opts, e) {
				names = append(names, e.Name)
				if !sharesInput(e.Name) {
					inputs += float64(tokens) * float64(e.Shape[1]) * float64(e.Shape[1])
				}
			}
		}
		kind := WorkDenseStats
		if layer == r.cfg.NumLayers {
			kind = WorkHeadStats
		}
		w := kindWork{kind, forward(layer, hessian.LinearPart(r.cfg, layer, names))*denseForwardPerStat + inputs}
		r.denseStatsWork[layer] = w
		total[kind] += w.work
		stream = min(layer, r.cfg.NumLayers-1)
	}
	for l := range r.cfg.NumLayers {
		if lf := lfmq1.LayerFile(l, r.cfg.NumLayers); fileHasDenseSolve(r.opts, p.ByFile(lf)) {
			if _, resumed := rs.doneKind(l, "dense"); !resumed {
				denseStats(l, lf)
			}
		}
		// The layers whose FFN the run solves: every routed-expert layer
		// (unless the experts are kept), or every layer of a dense LFM2.
		solves := r.cfg.Dense() || r.cfg.IsMoE(l) && !r.opts.KeepExperts
		if _, resumed := rs.done(l); solves && !resumed {
			r.forwardWork[l] = forward(l, hessian.CollectPart(hessian.CollectOptions{Stream: &r.stream, Past: !r.g.Sequential}))
			total[WorkForward] += r.forwardWork[l]
			r.lw.addTo(&total)
			stream = l
			if !r.g.Sequential {
				stream = l + 1
			}
		}
	}
	if fileHasDenseSolve(r.opts, p.ByFile(lfmq1.GlobalFile)) {
		denseStats(r.cfg.NumLayers, lfmq1.GlobalFile)
	}
	r.work.StartWork(total)
	return &tensorWorkProgress{Progress: r.prog, work: r.work, perTensor: perTensor}
}

// kindWork is an amount of work of one kind.
type kindWork struct {
	kind WorkKind
	work float64
}

// addWork reports finished work to a WorkProgress, if any.
func (r *gptqRun) addWork(kind WorkKind, w float64) {
	if r.work != nil && w > 0 {
		r.work.Work(kind, w)
	}
}

// tensorWorkProgress reports each packed tensor's work along with it.
type tensorWorkProgress struct {
	Progress
	work      WorkProgress
	perTensor map[string]kindWork
}

func (t *tensorWorkProgress) Done(tensor string) {
	t.Progress.Done(tensor)
	if w, ok := t.perTensor[tensor]; ok && w.work > 0 {
		t.work.Work(w.kind, w.work)
	}
}

func (r *gptqRun) setStage(layer int, s string) {
	if r.stage != nil {
		r.stage.Stage(layer, s)
	}
}

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

// layer quantizes MoE layer l (gptq.md §3–§4): calibration forward, w1/w3
// statistics and solves, w2 statistics with the quantized w1/w3, w2 solves.
func (r *gptqRun) layer(ctx context.Context, l int, entries []plan.Entry) (*layerResult, error) {
	cfg := r.cfg
	E, H, Fe := cfg.NumExperts, cfg.HiddenSize, cfg.MoEIntermediateSize
	if !cfg.IsMoE(l) {
		// A dense FFN is solved as the one expert of its layer, which
		// every token reaches with weight 1 (hessian.Collect).
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
	rep := LayerReport{Layer: l}

	t0 := time.Now()
	// In sequential mode layer l's experts are replaced after its
	// statistics, so the stream stays at l's input and the next layer's
	// forward runs l again with the stored experts; otherwise the engine
	// keeps running the source weights and l's output is the next stream.
	// Either way each window's rows enter every layer with the bits a
	// forward from the embedding would give them, so the statistics are
	// those of a full forward up to l.
	forwardDone := 0
	cache, err := hessian.Collect(ctx, r.m, l, r.windows, hessian.CollectOptions{Progress: func(done, total int) {
		r.setStage(l, fmt.Sprintf("forward %d/%d", done, total))
		r.addWork(WorkForward, r.forwardWork[l]*float64(done-forwardDone)/float64(max(total, 1)))
		forwardDone = done
	}, Stream: &r.stream, Past: !r.g.Sequential})
	if err != nil {
		return nil, err
	}
	rt, err := cache.Route(E)
	if err != nil {
		return nil, err
	}
	rep.Forward = time.Since(t0)
	r.releasePages() // the forward's weights: the statistics need only the cache

	r.setStage(l, "statistics w1/w3")
	t0 = time.Now()
	up, err := hessian.UpStats(ctx, cache, rt, r.workers, func(e int) {
		r.addWork(WorkUpStats, upStatsWork(float64(len(rt.Tokens[e])), float64(H)))
	})
	if err != nil {
		return nil, r.statsError(l, err, "w1/w3")
	}
	upPool, err := hessian.Pool(up)
	if err != nil {
		return nil, err
	}
	rep.UpStats = time.Since(t0)
	for _, st := range up {
		rep.UpHessianFLOP += float64(st.Tokens()) * float64(H*(H+1))
	}

	r.setStage(l, "solve w1/w3")
	t0 = time.Now()
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
		r.addWork(WorkUpSolve, r.lw.solveW13/float64(E))
		r.done(ex[e][0].Name)
		r.done(ex[e][1].Name)
		return nil
	}); err != nil {
		return nil, err
	}
	rep.SolveW13 = time.Since(t0)
	up, upPool = nil, nil // one input kind's statistics at a time (gptq.md §2)
	releaseMemory()
	r.releasePages()

	// The w2 inputs come from the w1/w3 the engine will run: the stored
	// quantized ones in sequential mode, the source ones otherwise.
	r.setStage(l, "statistics w2")
	t0 = time.Now()
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
				return nil, fmt.Errorf("quant: layer %d expert %d: %w", l, e, err)
			}
			*dst = mat
		}
	}
	down, err := hessian.DownStats(ctx, cache, rt, mats, r.g.W2Weight, r.workers, func(e int) {
		r.addWork(WorkDownStats, downStatsWork(float64(len(rt.Tokens[e])), float64(H), float64(Fe)))
	})
	if err != nil {
		return nil, r.statsError(l, err, "w2")
	}
	downPool, err := hessian.Pool(down)
	if err != nil {
		return nil, err
	}
	cache, mats = nil, nil // the layer's activations and w1/w3 are no longer needed
	rep.DownStats = time.Since(t0)
	for _, st := range down {
		rep.DownHessianFLOP += float64(st.Tokens()) * float64(Fe*(Fe+1))
		rep.DownInputFLOP += float64(st.Tokens()) * float64(4*H*Fe)
	}

	r.setStage(l, "solve w2")
	t0 = time.Now()
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
		r.addWork(WorkDownSolve, r.lw.solveW2/float64(E))
		r.done(ex[e][2].Name)
		down[e] = nil
		return nil
	}); err != nil {
		return nil, err
	}
	rep.SolveW2 = time.Since(t0)

	lr := &layerResult{tensorMetrics: map[string]TensorMetric{}}
	rep.Metrics = LayerMetrics{Layer: l}
	stored := map[string]*solved{}
	for e := range E {
		for k, s := range []*solved{&upRes[e][0], &upRes[e][1], &downRes[e]} {
			stored[ex[e][k].Name] = s
			rep.SolveFLOP += s.flop
		}
		rep.Metrics.Experts = append(rep.Metrics.Experts, ExpertMetrics{Expert: e, W1: upRes[e][0].metric, W3: upRes[e][1].metric, W2: downRes[e].metric})
	}
	rep.Metrics.summarise()
	for _, pe := range entries {
		s := stored[pe.Name]
		out, in := int(pe.Shape[0]), int(pe.Shape[1])
		lr.tensors = append(lr.tensors, lfmq1.Tensor{Name: pe.Name, Format: lfmq1.BFP4, Shape: pe.Shape, DType: dtype.U8,
			StoredShape: []int64{int64(bfp.NumTiles(out, in)), int64(bfp.BFP4.TileBytes())}, Data: s.packed})
		lr.tensorMetrics[pe.Name] = s.tensor
	}
	lr.report = rep
	return lr, nil
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

// solve quantizes the matrices ws (each [out, k], sharing one Hessian: an
// expert's w1 and w3, or its w2) against the expert statistics st shrunk
// toward the layer's pool, with relative damping alpha; it falls back to
// RTN when the Hessian cannot be factored (gptq.md §5). The factorization,
// the row loops and the losses run on threads goroutines.
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
// is canonical. It is by construction (bfp.md §9); checking costs little
// next to the solve.
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

func (r *gptqRun) warn(s string) {
	// Warnings come from expert goroutines.
	r.mu.Lock()
	r.report.Warnings = append(r.report.Warnings, s)
	r.mu.Unlock()
}

// install makes the engine run quantized tensors in place of their
// sources: a finished layer's experts (BFP4) or solved dense tensors
// (BFP8), which the run has just written to file in its output. The engine
// reads them from the file's read-only mapping, not from the heap copies
// the run made them in: the finished layers then sit in the page cache,
// which the kernel can drop and read again, and the run's heap does not
// grow with every layer done (runMemory).
func (r *gptqRun) install(w *lfmq1.Writer, file string, tensors []lfmq1.Tensor) error {
	if len(tensors) == 0 {
		return nil
	}
	f, err := r.mapped.open(filepath.Join(w.Dir(), file))
	if err != nil {
		return err
	}
	for _, t := range tensors {
		data, err := f.Bytes(t.Name)
		if err != nil {
			return err
		}
		if len(data) != len(t.Data) {
			return fmt.Errorf("quant: %s: %s holds %d bytes, %d were written", t.Name, file, len(data), len(t.Data))
		}
		fm := kernels.BFP4
		if t.Format == lfmq1.BFP8 {
			fm = kernels.BFP8
		}
		mat, err := kernels.NewBFP(fm, int(t.Shape[0]), int(t.Shape[1]), data)
		if err != nil {
			return fmt.Errorf("quant: %s: %w", t.Name, err)
		}
		if err := r.m.ReplaceLinear(t.Name, mat); err != nil {
			return err
		}
	}
	return nil
}

// mappedFiles are the output files whose mappings the engine runs; they
// are closed when the run ends, after the model.
type mappedFiles struct{ files []*safetensors.File }

func (m *mappedFiles) open(path string) (*safetensors.File, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	m.files = append(m.files, f)
	return f, nil
}

func (m *mappedFiles) close() {
	for _, f := range m.files {
		f.Close()
	}
	m.files = nil
}

// resumeLayer takes a completed layer from the partial directory: its
// experts file (checked against the progress record, then written again
// through the Writer, which gives the same bytes) and its metrics. It
// returns nil when the stored layer does not verify, which makes the run
// compute it again.
func (r *gptqRun) resumeLayer(w *lfmq1.Writer, rs *resumeState, d doneLayer, entries []plan.Entry) (*layerResult, error) {
	rec, problem := rs.load(d)
	if problem == "" && r.g.Strict && rec.Metrics.Fallbacks > 0 {
		// The interrupted run was not strict; this one is.
		for _, e := range rec.Metrics.Experts {
			for name, m := range map[string]MatrixMetrics{"w1": e.W1, "w3": e.W3, "w2": e.W2} {
				if m.Method != string(GPTQ) {
					return nil, &FallbackError{Layer: d.Layer, Expert: r.who(d.Layer, e.Expert), Matrix: name, Reason: m.Reason, Err: errors.New("stored by the interrupted run")}
				}
			}
		}
	}
	if problem != "" {
		r.warn(fmt.Sprintf("layer %d: the interrupted run's result is damaged: %s; computing it and every later layer again", d.Layer, problem))
		return nil, rs.save()
	}
	path := filepath.Join(w.Dir(), d.File)
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lr := &layerResult{tensorMetrics: rec.Tensors, report: LayerReport{Layer: d.Layer, Resumed: true, Metrics: rec.Metrics}}
	for _, pe := range entries {
		raw, err := f.Bytes(pe.Name)
		if err != nil {
			return nil, fmt.Errorf("quant: resuming layer %d: %w", d.Layer, err)
		}
		out, in := int(pe.Shape[0]), int(pe.Shape[1])
		if len(raw) != bfp.PackedSize(bfp.BFP4, out, in) {
			return nil, fmt.Errorf("quant: resuming layer %d: %s has %d bytes", d.Layer, pe.Name, len(raw))
		}
		lr.tensors = append(lr.tensors, lfmq1.Tensor{Name: pe.Name, Format: lfmq1.BFP4, Shape: pe.Shape, DType: dtype.U8,
			StoredShape: []int64{int64(bfp.NumTiles(out, in)), int64(bfp.BFP4.TileBytes())}, Data: append([]byte(nil), raw...)})
	}
	if err := w.WriteFile(d.File, lr.tensors); err != nil {
		return nil, err
	}
	if sum, _, err := lfmq1.HashFile(path); err != nil || sum != d.SHA256 {
		return nil, fmt.Errorf("quant: resuming layer %d: %s rewritten with sha256 %s, recorded %s", d.Layer, d.File, sum, d.SHA256)
	}
	r.setStage(d.Layer, "resumed")
	return lr, nil
}

// resumable reports whether a run stopped by err is worth resuming: an
// interruption or an I/O failure may not recur, while bad values in the
// weights or statistics, or a solver that cannot proceed, would stop the
// resumed run the same way; those keep no partial run and suggest no
// --resume.
func resumable(err error) bool {
	var nf *NonFiniteError
	var se *StatsError
	var fe *FallbackError
	var gi *gptq.InputError
	var gf *gptq.FactorError
	var hi *hessian.InputError
	var hn *hessian.NonFiniteError
	return !(errors.As(err, &nf) || errors.As(err, &se) || errors.As(err, &fe) || errors.As(err, &gi) ||
		errors.As(err, &gf) || errors.As(err, &hi) || errors.As(err, &hn))
}

// releaseMemory collects the garbage of a finished stage (a layer's
// statistics, its solve buffers, its packed results once written) and
// returns the freed pages to the OS. Without it the heap may grow to twice
// what is live before the collector runs, so the next stage's statistics
// could sit on top of the last stage's garbage: a GPTQ run's peak is set by
// the largest single stage only when each stage starts from a collected heap.
// The solver's recycled work buffers go too.
func releaseMemory() {
	gptq.ReleaseScratch()
	debug.FreeOSMemory()
}

// releasePages drops the pages of every mapped file the run has read (the
// source through src and through the engine, and the finished layers'
// files the engine runs) from the process's resident memory, between
// stages: a forward reads every weight of the layers it runs, and those
// pages would otherwise stay counted in the resident set for the rest of
// the run, so that it would grow with every layer (runMemory). The pages
// stay in the page cache, and whatever reads them again gets the same
// bytes. A failure (which would be a bug: the mappings are the run's own)
// costs memory, not correctness, so it is a warning.
func (r *gptqRun) releasePages() {
	errs := []error{r.src.ReleasePages(), r.m.ReleasePages()}
	for _, f := range r.mapped.files {
		errs = append(errs, f.ReleasePages())
	}
	if err := errors.Join(errs...); err != nil {
		r.warn(fmt.Sprintf("could not release mapped pages: %v", err))
	}
}

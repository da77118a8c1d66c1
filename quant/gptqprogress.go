package quant

import (
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant/hessian"
	"github.com/lfmq/lfmq/quant/plan"
)

// StageProgress may be implemented by a Progress to learn what a GPTQ run
// is doing between tensors: stage is "forward i/n", "statistics w1/w3",
// "solve w1/w3", "statistics w2", "solve w2", "done" or "resumed" for MoE
// layer layer, "statistics dense" and "solve dense" for a layer's dense
// tensors; layer is StageHead (−1) for the LM head.
type StageProgress interface {
	Stage(layer int, stage string)
}

// runProgress is how a GPTQ run reports to its Progress: tensors as they
// are done, and, where the Progress implements them, stages
// (StageProgress) and work (WorkProgress). Its zero value reports nothing.
type runProgress struct {
	tensors Progress
	stage   StageProgress
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
	// numLayers is the model's depth: a stage of layer numLayers is the
	// head's.
	numLayers int
}

// startProgress starts reporting to opts.Progress: it tells it the number
// of tensors and, when it follows the work, the run's work (startWork), of
// a run with the calibration set's tokens that rs does not take over.
func (r *gptqRun) startProgress(rs *resumeState, tokens int) {
	r.prog.tensors, r.prog.numLayers = r.opts.Progress, r.cfg.NumLayers
	if sp, ok := r.opts.Progress.(StageProgress); ok {
		r.prog.stage = sp
	}
	if r.prog.tensors != nil {
		r.prog.tensors.Start(len(r.plan.Entries))
	}
	var denseProg Progress = r.prog.tensors
	if wp, ok := r.opts.Progress.(WorkProgress); ok {
		r.prog.work, r.prog.lw = wp, estimateLayer(r.cfg, tokens)
		denseProg = r.startWork(r.plan, rs, tokens)
	}
	r.prog.denseProg = denseProg
}

// done reports a tensor's bytes in memory to the Progress, if any.
func (p *runProgress) done(tensor string) {
	if p.tensors != nil {
		p.tensors.Done(tensor)
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
	r.prog.forwardWork, r.prog.denseStatsWork = map[int]float64{}, map[int]kindWork{}
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
		r.prog.denseStatsWork[layer] = w
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
			r.prog.forwardWork[l] = forward(l, hessian.CollectPart(hessian.CollectOptions{Stream: &r.cal.stream, Past: !r.g.Sequential}))
			total[WorkForward] += r.prog.forwardWork[l]
			r.prog.lw.addTo(&total)
			stream = l
			if !r.g.Sequential {
				stream = l + 1
			}
		}
	}
	if fileHasDenseSolve(r.opts, p.ByFile(lfmq1.GlobalFile)) {
		denseStats(r.cfg.NumLayers, lfmq1.GlobalFile)
	}
	r.prog.work.StartWork(total)
	return &tensorWorkProgress{Progress: r.prog.tensors, work: r.prog.work, perTensor: perTensor}
}

// kindWork is an amount of work of one kind.
type kindWork struct {
	kind WorkKind
	work float64
}

// addWork reports finished work to a WorkProgress, if any.
func (p *runProgress) addWork(kind WorkKind, w float64) {
	if p.work != nil && w > 0 {
		p.work.Work(kind, w)
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

// setStage names what the run does; layer is a decoder layer, or the
// number of layers for the LM head, which the stage line calls the head
// (StageHead).
func (p *runProgress) setStage(layer int, s string) {
	if p.stage == nil {
		return
	}
	if layer >= p.numLayers {
		layer = StageHead
	}
	p.stage.Stage(layer, s)
}

// WarnProgress may be implemented by a Progress to be told each warning of
// a GPTQ run as it happens (Report.Warnings keeps them all for the end).
// It may be called from several goroutines at once.
type WarnProgress interface {
	Warn(msg string)
}

// StageHead is the layer a Stage call names for the LM head.
const StageHead = -1

// doneDense reports a solved dense tensor, with its work, to the Progress.
func (p *runProgress) doneDense(tensor string) {
	if p.denseProg != nil {
		p.denseProg.Done(tensor)
	}
}

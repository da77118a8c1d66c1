package quant

import (
	"context"
	"sync"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/quant/gptq"
	"github.com/lfmq/lfmq/quant/plan"
)

// Memory of GPTQ, one MoE layer at a time: what a run holds while it
// quantizes MoE layer l, and why. Sizes at LFM2-8B-A1B's shapes (E = 32
// experts, H = 2048, F = 1792) for T calibration tokens; "measured" is one
// MoE layer of the synthetic 8B-shape checkpoint with T = 8×512 and 16
// workers (scripts/bench-scaling.sh --layers 2 --gptq-seqs 8
// --gptq-threads 16, RSS split from /proc, live heap from GODEBUG=gctrace=1).
//
//   - The model the calibration forward runs (engine/model): the source
//     tensors memory-mapped, with the BFP8 dense weights and the finished
//     layers' BFP4 experts in their place, mapped from the run's files.
//     Mapped pages count in RSS once read, until released: kept, they
//     grew with every layer (2.2 GB of file RSS at the end of 2 layers of
//     the 8B shape, 32 windows). The run now releases them after each
//     forward and each read (runMappedMemory, which bounds what stays);
//     measured with 4 layers and T = 128×256: at most 0.93 GB of file RSS,
//     while a forward ran a quantized layer and the next source layer,
//     and 16 MB through the dense solves.
//   - The dense RTN pass before the first MoE layer: float32 copies of the
//     tensors being packed (measured up to 1.8 GB of heap), released
//     before the MoE layers start.
//   - The calibration activations (hessian.Cache, Stream): the layer's
//     expert input z and the residual stream, float32 [T, H] each, two
//     streams while one advances: 4·T·H bytes apiece, 34 MB each at
//     T = 4096, 134 MB at 16384 (measured 0.15–0.55 GB live with the
//     engine's forward buffers).
//   - The statistics: every expert's float64 S = Σ ω·x·xᵀ is needed before
//     the pooled Hessian exists, so all E are held at once: E·H²·8 bytes
//     for w1/w3 (1.07 GB), then E·F²·8 for w2 (0.82 GB), plus the pool,
//     whatever T. An expert's statistics go when its solve ends.
//     Accumulating them takes a 64-token chunk (2 MB) per expert being
//     accumulated: the worker count hardly shows.
//   - The solves' scratch (solveScratch): 215 MB per w1/w3 solve, 159 MB
//     per w2 solve. With every worker running a whole solve this grew with
//     the workers (16: 3.4 GB; measured up to 4.0 GB live during the
//     solves, statistics included); it is now at most
//     GPTQOptions.SolveMemory (solveSlots), by default one layer's w1/w3
//     statistics, 1.07 GB (measured up to 1.8 GB live, statistics
//     included).
//   - The results: the layer's packed BFP4 bytes (3·E·H·F/2 plus
//     exponents, 185 MB), kept until the layer's file is written.
//   - The collector's headroom: the heap grows past the live bytes by GOGC
//     percent before a collection. At the default 100 this doubles the
//     solves' live heap (measured heap peaks: 8.0 GB with 16 whole solves,
//     3.8 GB under the budget; 2.3 GB with GOGC=25 in the environment,
//     which cost up to 10 % more CPU time at 2 workers, so it is the
//     user's choice, not the default). The run's soft limit
//     (runMemoryLimit) caps it at the budget plus an eighth.
//
// The dense pass (DenseMethod GPTQ, the default), measured on the synthetic
// 8B-shape checkpoint (2 layers, T = 32×256, 2 workers; heap profiles at
// each new peak of the heap in use):
//
//   - A layer's dense file holds the statistics of its distinct inputs
//     while it solves them: at layer 0 (conv and the dense FFN) three of
//     H² and w2's of F_dense² (7168² float64, 0.41 GB), 0.49 GB in all;
//     each now goes once its last solve has formed its Hessian.
//   - The largest dense solve is that w2 (K = 7168): the Hessian, the
//     permuted copy NewFactor factors and U, 3·K²·8 = 1.23 GB, with the
//     source and results [2048, 7168] small beside them; with the
//     statistics, 1.4 GB of live heap, the layer-0 peak of the dense pass.
//     At T = 128×256 (4 layers, 2 workers; /proc samples every 2 s) the
//     run's RSS peaked at 2.40 GB in this solve (2.38 GB anonymous, 16 MB
//     of mapped pages), the live heap at 1.15 GB or more (2 layers, the
//     collector's own figure, sampled before the solve ended); the budget
//     for that shape is 3.48 GB, so the dense pass is not the run's peak.
//   - The head's solve ([V, H], V = 65,536) used to hold the source
//     weights in float32 and, at each step, two more copies of the matrix
//     (16·V·H bytes, 2.1 GB); bands of Quantize's and Losses' float64
//     copies brought that to the source and one decoded result in float32
//     (8·V·H bytes, 1.07 GB), still growing with the vocabulary. The head
//     is now read from the mapped source and solved band by band of
//     outputs (solveHead, headSolveMemory): a band of 2,048 rows in
//     float32 three times over, its float64 working sets, the factor and
//     the three losses' in×in sums, 0.33 GB at hidden 2048 whatever the
//     vocabulary, and the packed result, 1.0625 bytes a weight (0.14 GB at
//     65,536, 0.28 GB at 131,072), which the file needs whole. Measured
//     on the issue-32 run (4 layers, T = 128×256, 2 workers): the head's
//     stage peaked at 1.67 GB of anonymous RSS (live heap and the
//     collector's headroom under the soft limit), 0489044's at 6.77 GB.
//   - The finished layers the engine runs (BFP8 dense tensors, BFP4
//     experts) are mapped from the files the run wrote (gptqRun.install),
//     not held on the heap, which would grow by a layer's quantized bytes
//     (0.1–0.2 GB) with every layer done.
//
// runMemory adds these up into the run's budget, which the run gives the
// collector as its soft limit (runMemoryLimit) and reports in its summary;
// TestRunMemoryBudget holds a run's peak live heap under it.
//
// None of these depends on the number of layers, and beyond the budget none
// depends on the workers. The issue-32 run (4 layers, T = 128×256, 2
// workers; docs/bench-quantize.md) peaked at 3.71 GB of RSS with the pages
// released and this soft limit, in layer 1's w1/w3 solves (3.51 GB of it
// anonymous), under a budget of 3.48 GB of live heap and 1.76 GB of
// mapped pages; 2b1e80e peaked at 8.74 GB on the same command. Measured
// earlier, one MoE layer at 16 workers (T = 8×512): 10.26 GB with 16 whole
// solves (the code before the budget), 5.99 GB with the budget, 4.48 GB
// with the budget and GOGC=25, where the peak is the dense RTN pass and
// the solves reach 4.21 GB (of which 1.9–2.1 GB are the mapped files,
// which are now released).

// solveScratch is the most memory one expert solve (gptqRun.solve) holds at
// once, in bytes, for mats matrices [out, k] sharing one Hessian: the
// shrunk Hessian, the permuted copy NewFactor factors and U (three float64
// K×K); per matrix the source weights and their RTN result (decoded,
// float32, and packed) and the packed GPTQ result; and for the matrix being
// quantized W_tt in float64 with the decoded Q (Quantize), or Q with
// Losses' float64 ΔWᵀ, and the lazy block's errors. At 8B-A1B's shapes:
// 215 MB for w1/w3 (out = 1792, k = 2048, mats = 2), 159 MB for w2.
func solveScratch(out, k, mats, blockSize int) int64 {
	kk := int64(k) * int64(k) * 8
	w := int64(out) * int64(k) * 4
	packed := int64(bfp.PackedSize(bfp.BFP4, out, k))
	block := 2 * int64(min(blockSize, k)) * int64(out) * 8
	return 3*kk + int64(mats)*(2*w+2*packed) + 3*w + block
}

// defaultSolveMemory is the solve budget of a layer with experts experts of
// hidden size h when GPTQOptions.SolveMemory is 0: the size of the layer's
// w1/w3 statistics, E·H²·8 bytes (1.07 GB at 8B-A1B's shapes). The solves'
// scratch then never takes more than the statistics the layer holds anyway,
// so a layer's peak is bounded by a small multiple of what its statistics
// need, the same for 2 workers or 64: at 8B-A1B's shapes it admits 4 w1/w3
// solves (6 of w2) at a time, with 16 workers each on 4 (3) goroutines,
// which keeps the cores busy while holding at most 1.07 GB where 16 whole
// solves held 3.4 GB (live, before the collector's headroom).
func defaultSolveMemory(experts, h int) int64 {
	return int64(experts) * int64(h) * int64(h) * 8
}

// solveSlots splits workers for solves that need scratch bytes each under a
// budget of limit bytes: solves run at a time (at least one, however small
// the budget: a solve larger than the budget runs alone), each on threads
// goroutines, so that solves·threads covers the workers.
func solveSlots(workers int, limit, scratch int64) (solves, threads int) {
	workers = max(1, workers)
	solves = workers
	if scratch > 0 && limit/scratch < int64(workers) {
		solves = max(1, int(limit/scratch))
	}
	return solves, (workers + solves - 1) / solves
}

// memBudget admits work by the bytes it will hold: acquire blocks until the
// bytes fit under the limit with what is already admitted (or nothing is
// admitted, so that a request larger than the limit still runs, alone).
type memBudget struct {
	limit int64
	// account, if set, is called under the lock after every change with
	// the bytes admitted: the tests' window on the accounting.
	account func(used, limit int64)

	mu   sync.Mutex
	used int64
	wake chan struct{} // closed and replaced by every release
}

func newMemBudget(limit int64, account func(used, limit int64)) *memBudget {
	return &memBudget{limit: limit, account: account, wake: make(chan struct{})}
}

// acquire admits n bytes, waiting for releases as needed; it fails only when
// ctx ends first.
func (b *memBudget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.limit {
			b.used += n
			if b.account != nil {
				b.account(b.used, b.limit)
			}
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release returns n bytes admitted by acquire.
func (b *memBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.account != nil {
		b.account(b.used, b.limit)
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// runMemory is the run's memory budget: the most live heap a GPTQ run of
// cfg over tokens calibration tokens in windows of at most maxLen holds
// at once, with the expert solves under solveLimit bytes, in bytes (the
// memory-mapped source files come on top: they are the kernel's page
// cache, not heap). It is the largest of its stages, each the sum of what
// that stage holds (see the memory notes at the top of this file):
//
//   - always: the calibration activations, three float32 [T, H] arrays
//     (two streams while one advances, and the layer's cache or kept
//     output), and the engine's forward buffers for one batch of eight
//     windows, about 4·(8·H + F_dense) bytes per row;
//   - an MoE layer: every expert's w1/w3 statistics and their pool
//     ((E+1)·H²·8) with the solves' budget, or, while they accumulate,
//     the statistics with their pending rows (statBuffer), whichever is
//     larger, and the layer's packed results;
//   - a dense file: the statistics of its inputs (one per distinct
//     input, K² float64 each) and the largest of its solves (denseSolve);
//   - the head: its input's statistics and its solve (headSolveMemory),
//     of which only the packed result grows with the vocabulary.
//
// Nothing in it grows with the number of layers. quantizeGPTQ sets the
// Go runtime's soft memory limit from it (runMemoryLimit), so that the
// collector's headroom does not double the live heap.
func runMemory(cfg *config.Config, tokens, maxLen int, solveLimit int64) int64 {
	H, T := int64(cfg.HiddenSize), int64(tokens)
	Fd := int64(cfg.IntermediateSize)
	acts := 3*T*H*4 + 8*int64(maxLen)*(8*H+Fd)*4
	stage := int64(0)
	if cfg.NumExperts > 0 && !cfg.Dense() {
		E, F := int64(cfg.NumExperts), int64(cfg.MoEIntermediateSize)
		// While the w1/w3 statistics accumulate, every expert's S and
		// pending rows; then, solving, the finished S, the pool and the
		// solves' scratch. The first is the larger under a small
		// --solve-memory.
		stats := E * (H*H*8 + statBuffer(int(H)))
		solves := (E+1)*H*H*8 + solveLimit
		moe := max(stats, solves) + 3*int64(bfp.PackedSize(bfp.BFP4, int(F), int(H)))*E
		stage = max(stage, moe)
	}
	// A layer's dense file: the attention's or conv's inputs (H each, at
	// most two distinct), and for a dense FFN layer w1/w3's (H) and w2's
	// (F_dense); its largest solve is w2's (K = F_dense) or, without a
	// dense FFN, an H-wide one.
	layer := 2*H*H*8 + denseSolve(int(H), int(3*H))
	if Fd > 0 {
		layer = 3*H*H*8 + Fd*Fd*8 + max(denseSolve(int(H), int(Fd)), denseSolve(int(Fd), int(H)))
	}
	stage = max(stage, layer)
	head := H*H*8 + headSolveMemory(int(cfg.VocabSize), int(H))
	return acts + max(stage, head) + runFixedMemory
}

// statBuffer bounds the pending rows a hessian.Stat of inputs of dimension
// k holds besides its S while it accumulates (freed by Finish), modelled
// on hessian.NewStat: as many 64-row chunks of float32 rows (with a
// float64 weight each) as fit 16 MB, at least one, plus the packed panels
// of a flushing goroutine's tile (256 KB, two goroutines at most). At
// 8B-A1B's shapes that is 0.5 GB for a layer's 32 experts, on top of their
// 1.07 GB of S.
func statBuffer(k int) int64 {
	return max(16<<20+32*64*8, 64*(4*int64(k)+8)) + 512<<10
}

// runFixedMemory covers what every run holds whatever the shapes: the
// plan, the tokenizer, the calibration windows, the runtime's own.
const runFixedMemory = 96 << 20

// denseSolve is the live heap of one BFP8 solve (gptqRun.solveAs) of a
// matrix [out, k]: the shrunk Hessian, the copy NewFactor factors and U
// (three float64 k×k), the RTN and GPTQ packed bytes, and at its peak the
// source weights and one decoded result in float32 (the RTN result, then
// Quantize's, 8·out·k bytes) with the larger of Quantize's and Losses'
// float64 working sets, which are bands of the matrix when it is large.
func denseSolve(out, k int) int64 {
	kk := int64(k) * int64(k) * 8
	packed := int64(bfp.PackedSize(bfp.BFP8, out, k))
	work := max(gptq.QuantizeMemory(out, k, gptq.DefaultOptions(0).BlockSize), gptq.LossesMemory(out, k))
	return 3*kk + 2*packed + 8*int64(out)*int64(k) + work
}

// headSolveMemory is the live heap of solveHead for a head [out, k]: the
// shrunk Hessian, the copy NewFactor factors and U (three float64 k×k);
// the packed result, the only part that grows with out; and for one band
// (headBand) the source values, their RTN result and the solve's in
// float32, the RTN band packed (twice under an exponent rule whose
// fallback packs again), Quantize's float64 working set, and the three
// losses' in×in sums with one band of ΔWᵀ.
func headSolveMemory(out, k int) int64 {
	kk := int64(k) * int64(k) * 8
	band := headBand(out, k)
	values := 3*4*int64(band)*int64(k) + 2*int64(bfp.PackedSize(bfp.BFP8, band, k))
	work := gptq.QuantizeMemory(band, k, gptq.DefaultOptions(0).BlockSize) + gptq.LossStreamMemory(k, band) + 2*gptq.LossStreamMemory(k, 0)
	return 3*kk + int64(bfp.PackedSize(bfp.BFP8, out, k)) + values + work
}

// runMemoryLimit is the soft memory limit (runtime/debug.SetMemoryLimit) a
// GPTQ run sets from its budget: the budget with an eighth more for the
// collector, which then collects before the heap passes it rather than
// when it has doubled (GOGC's default). The run's live heap stays under
// the budget (TestRunMemoryBudget) and measured at about half of it at
// its peaks, so a collection still frees about half the limit each time
// near the peak and none is forced while the live heap is well under it;
// at 8B-A1B's shapes this keeps the heap's resident pages near the budget
// where half again as much (the limit before) let them reach 1.5× it.
func runMemoryLimit(budget int64) int64 { return budget + budget/8 }

// runMappedMemory bounds the pages of the mapped checkpoint files a GPTQ
// run of plan p over tokens calibration tokens with workers workers keeps
// resident at once, in bytes (src gives the source tensors' dtypes). Each
// page read from a mapping counts in the process's resident set until it
// is released, so the run releases them (gptqRun.releasePages,
// weightValues) and holds at most:
//
//   - the weights of the layers one calibration forward runs: the layer
//     being calibrated and, in sequential mode, the one below it again
//     (with its quantized weights, from the run's own files, which are no
//     larger than its source), released when the forward ends;
//   - the embedding rows of the calibration tokens: on a file system that
//     caches files in huge pages (2 MB folios), a row read maps the whole
//     huge page around it, so that a few thousand tokens map the whole
//     embedding (268 MB at 8B-A1B's shapes), which grows with the
//     vocabulary;
//   - the pieces of source weights being converted (weightValues), one
//     per worker, plus the rest of a huge page the kernel may map with one.
//
// Whole, the mapped source of 4 layers of 8B-A1B is 2.6 GB (and the
// engine and the reads each map it), where this bound is 1.8 GB. None of
// it grows with the number of layers; the embedding term grows with the
// vocabulary, up to the number of calibration tokens.
func runMappedMemory(cfg *config.Config, p *plan.Plan, src *hf.Checkpoint, tokens, workers int) int64 {
	layers := make([]int64, cfg.NumLayers)
	var embed, embedRow int64
	for _, e := range p.Entries {
		info, ok := src.Info(e.Source)
		if !ok {
			continue
		}
		n := int64(info.DType.Size())
		for _, d := range e.Shape {
			n *= d
		}
		switch {
		case e.Layer >= 0 && e.Layer < cfg.NumLayers:
			layers[e.Layer] += n
		case e.Name == "model.embed_tokens.weight" && len(e.Shape) == 2:
			embed, embedRow = n, n/max(e.Shape[0], 1)
		}
	}
	var forward int64
	for l, b := range layers {
		if l > 0 {
			b += layers[l-1]
		}
		forward = max(forward, b)
	}
	rows := min(embed, int64(tokens)*(embedRow+hugePage))
	reads := int64(max(1, workers)) * (weightReadValues*4 + hugePage)
	return forward + rows + reads
}

// hugePage is the size of the huge pages a kernel may map a file's pages
// with (2 MB on x86-64 and arm64 with 4 KB pages): releasing part of one
// may drop the rest of it, and reading part of one may map all of it.
const hugePage = 2 << 20

package quant

import (
	"context"
	"sync"

	"github.com/lfmq/lfmq/format/bfp"
)

// Memory of GPTQ, one MoE layer at a time: what a run holds while it
// quantizes MoE layer l, and why. Sizes at LFM2-8B-A1B's shapes (E = 32
// experts, H = 2048, F = 1792) for T calibration tokens; "measured" is one
// MoE layer of the synthetic 8B-shape checkpoint with T = 8×512 and 16
// workers (scripts/bench-scaling.sh --layers 2 --gptq-seqs 8
// --gptq-threads 16, RSS split from /proc, live heap from GODEBUG=gctrace=1).
//
//   - The model the calibration forward runs (engine/model): the source
//     tensors memory-mapped (file pages, counted in RSS once read: measured
//     1.4–2.1 GB of file RSS), with the BFP8 dense weights and the finished
//     layers' BFP4 experts in their place. The same for every layer.
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
//     user's choice, not the default).
//
// None of these depends on the number of layers, and beyond the budget none
// depends on the workers. Measured peak RSS at 16 workers: 10.26 GB with 16
// whole solves (the code before the budget), 5.99 GB with the budget, 4.48
// GB with the budget and GOGC=25, where the peak is the dense RTN pass and
// the solves reach 4.21 GB (of which 1.9–2.1 GB are the mapped files).

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

package quant

import (
	"context"
	"sync"

	"github.com/lfmq/lfmq/format/bfp"
)

// Memory of GPTQ, one MoE layer at a time (measured at LFM2-8B-A1B's
// shapes, see solveScratch and defaultSolveMemory): what a run holds while
// it quantizes MoE layer l, and why.
//
//   - The model the calibration forward runs (engine/model): the source
//     checkpoint's tensors, memory-mapped (file pages, counted in RSS once
//     read), with the BFP8 dense weights and the finished layers' BFP4
//     experts replacing them. The same for every layer.
//   - The calibration activations (hessian.Cache and Stream): the layer's
//     expert input z and the residual stream, float32 [T, H] each (two
//     streams while one advances): 4·T·H bytes apiece, 32 MB each for
//     T = 4096 tokens, 134 MB for 16384.
//   - The statistics: every expert's float64 S = Σ ω·x·xᵀ is needed before
//     the pooled Hessian exists, so all E are held at once: E·H²·8 bytes
//     for w1/w3 (1.07 GB), then E·F²·8 for w2 (0.82 GB), plus the pool,
//     whatever the token count. An expert's statistics are dropped when
//     its solve ends. Accumulating them needs only a 64-token chunk per
//     expert being accumulated (2 MB), so the worker count hardly shows.
//   - The solves' scratch (solveScratch): per expert solve about 215 MB for
//     w1/w3 and 159 MB for w2. This is the part that grew with the number
//     of workers when each worker ran a whole solve; it is now bounded by
//     GPTQOptions.SolveMemory (see solveSlots).
//   - The results: the packed BFP4 bytes of the layer (E·3·H·F/2 bytes plus
//     exponents, 185 MB), kept until the layer's file is written.
//
// So a layer's peak is the model, the activations, one input kind's
// statistics, the solve budget and the packed results, none of which
// depends on the number of layers, and only the budget on the workers.

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

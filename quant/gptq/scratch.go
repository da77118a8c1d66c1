package gptq

import "sync"

// A solve's large float64 work buffers (Losses' ΔWᵀ, Quantize's band of
// W_tt and its deferred updates' errors, NewFactor's permuted Hessian)
// have the same few sizes solve after solve: an expert's w1, w3 and w2 all
// need K·out values. Taken from the heap each time they are often fresh
// pages, which the kernel must map and zero on first touch, or reused ones
// the allocator zeroes; recycled here they are neither. Every user
// overwrites or clears what it reads, so a recycled buffer changes no bit.
var scratch struct {
	mu    sync.Mutex
	pools map[int]*sync.Pool // by length
}

// maxScratch bounds the buffers kept for reuse (in values): those of the
// expert solves, which repeat, and not a dense layer's or the head's,
// which come once per file and would only hold memory between stages.
const maxScratch = 8 << 20

// scratchPool returns the pool of buffers of length n.
func scratchPool(n int) *sync.Pool {
	scratch.mu.Lock()
	defer scratch.mu.Unlock()
	if scratch.pools == nil {
		scratch.pools = map[int]*sync.Pool{}
	}
	p := scratch.pools[n]
	if p == nil {
		p = &sync.Pool{}
		scratch.pools[n] = p
	}
	return p
}

// getScratch returns a float64 slice of length n with unspecified
// contents: a recycled one when one of that length is free.
func getScratch(n int) []float64 {
	if n > 0 && n <= maxScratch {
		if s, ok := scratchPool(n).Get().(*[]float64); ok {
			return *s
		}
	}
	return make([]float64, n)
}

// putScratch hands s, a slice from getScratch, back for reuse; s must not
// be used after.
func putScratch(s []float64) {
	if n := len(s); n > 0 && n <= maxScratch && cap(s) == n {
		scratchPool(n).Put(&s)
	}
}

// ReleaseScratch drops the buffers kept for reuse, so that the collector
// can return them: a caller whose next stage solves other shapes (or none)
// calls it at the stage's end.
func ReleaseScratch() {
	scratch.mu.Lock()
	scratch.pools = nil
	scratch.mu.Unlock()
}

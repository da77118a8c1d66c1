package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a fixed set of worker goroutines over which the parallel products
// split their work. Work is always split by output (rows of W, or BFP tile
// columns), never inside a sum, so results are bit-identical for every thread
// count, including a nil Pool, which runs everything on the calling
// goroutine.
//
// A Pool may be used by several goroutines at once, and a function run by
// the Pool may itself use the Pool: the calling goroutine always works on its
// own job, so no call waits for a worker that is not already running for it.
type Pool struct {
	threads int
	mu      sync.RWMutex // guards closed against sends on a closed channel
	closed  bool
	tickets chan *job // a worker that receives a job helps finish it
}

// NewPool returns a Pool of threads goroutines in all, counting the caller of
// each product: it starts threads−1 workers. threads < 1 means
// runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{threads: threads}
	if threads > 1 {
		p.tickets = make(chan *job, threads)
		for range threads - 1 {
			go func() {
				for j := range p.tickets {
					j.work()
				}
			}()
		}
	}
	return p
}

// Threads returns the number of goroutines a product may use, 1 for a nil
// Pool.
func (p *Pool) Threads() int {
	if p == nil {
		return 1
	}
	return p.threads
}

// Close stops the workers once they finish the jobs they hold. A closed
// Pool still works, on the calling goroutine only. Close is idempotent.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		if p.tickets != nil {
			close(p.tickets)
		}
	}
}

// chunksPerThread is how many ranges Run cuts per goroutine. With more
// ranges than goroutines, the goroutines claim them in turn, so one that
// runs ahead (or that the operating system did not preempt, on a shared
// machine) takes over work from one that lags; a range costs one atomic
// add and one call of fn.
const chunksPerThread = 4

// Run calls fn on contiguous ranges [lo, hi) that partition [0, n), at most
// 4·Threads() of them and each non-empty, concurrently (one range at a time
// per goroutine), and returns when every call has returned. The ranges
// depend only on n and Threads(). A panic in fn is re-raised on the
// caller's goroutine after the other ranges finish.
func (p *Pool) Run(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	threads := p.Threads()
	if threads == 1 || n == 1 {
		fn(0, n)
		return
	}
	chunks := min(threads*chunksPerThread, n)
	j := &job{fn: fn, n: n, chunks: chunks}
	j.wg.Add(chunks)
	p.mu.RLock()
	if !p.closed {
	post:
		for range min(chunks, threads) - 1 {
			select {
			case p.tickets <- j:
			default: // every worker is busy: the caller does the rest
				break post
			}
		}
	}
	p.mu.RUnlock()
	j.work()
	j.wg.Wait()
	if j.panicked.Load() {
		panic(j.panicValue)
	}
}

// job is one Run call: its chunks are claimed by an atomic counter, so the
// caller and any number of workers can share it.
type job struct {
	fn         func(lo, hi int)
	n, chunks  int
	next       atomic.Int64
	wg         sync.WaitGroup
	panicked   atomic.Bool
	panicValue any
}

func (j *job) work() {
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.chunks {
			return
		}
		j.run(c*j.n/j.chunks, (c+1)*j.n/j.chunks)
	}
}

func (j *job) run(lo, hi int) {
	defer func() {
		if r := recover(); r != nil {
			if j.panicked.CompareAndSwap(false, true) {
				j.panicValue = r
			}
		}
		j.wg.Done()
	}()
	j.fn(lo, hi)
}

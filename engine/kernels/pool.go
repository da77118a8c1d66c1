package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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
	// spin is how long an idle worker polls for the next job before it
	// parks (spinWait; 0 parks at once).
	spin    time.Duration
	mu      sync.RWMutex // guards closed against sends on a closed channel
	closed  bool
	tickets chan *job // a worker that receives a job helps finish it
}

// spinWait is how long a worker that finished a job keeps polling for the
// next one before it parks on the channel. A forward pass runs a few dozen
// parallel products a token, with a little serial work between them; a
// parked worker must be woken by the scheduler, and on a virtual machine
// whose idle processor halted that takes long: on the 2-core development
// VM the worker started its share of a decode product 115–140 µs after the
// product began, on average, where a 2-thread product takes 50–500 µs
// (BenchmarkPoolDispatch shows the same on synthetic regions). Polling
// for 100 µs brought that to 15–50 µs, but the serial work between two
// products is longer than that in places (a convolution layer's is about
// 150 µs at LFM3-1.7B's width): in LFM3-1.7B's decode the worker still
// found 43 % of a step's 108 products parked, starting 152 µs late on
// average, and the caller then waited for it (counters added to the Pool
// for that measurement; BenchmarkPoolDispatch's gap150us case shows the
// same on synthetic regions). Polling for 1 ms found 36 of 6,479 parked
// and started the worker 4–8 µs after the product began, and the step ran
// 9 % nearer the sum of its products' own bounds (prodroof_frac, median
// of six alternating pairs; docs/lfm3.md). The cost is at most spinWait
// of processor time per worker after each product when no other follows:
// after the last product of a step.
const spinWait = 1000 * time.Microsecond

// NewPool returns a Pool of threads goroutines in all, counting the caller of
// each product: it starts threads−1 workers. threads < 1 means
// runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	spin := spinWait
	if threads > runtime.GOMAXPROCS(0) {
		// More goroutines than processors: a polling worker would hold a
		// processor that a worker with a ticket is waiting for.
		spin = 0
	}
	return newPoolSpin(threads, spin)
}

// newPoolSpin is NewPool with the workers' polling time (the benchmarks
// compare it with parking at once).
func newPoolSpin(threads int, spin time.Duration) *Pool {
	p := &Pool{threads: threads, spin: spin}
	if threads > 1 {
		p.tickets = make(chan *job, threads)
		for range threads - 1 {
			go p.worker()
		}
	}
	return p
}

// worker runs the jobs it receives until the Pool closes, polling for the
// next one for p.spin before it parks.
func (p *Pool) worker() {
	for {
		j, ok := p.poll()
		if !ok {
			j, ok = <-p.tickets
		}
		if !ok {
			return
		}
		j.work()
	}
}

// poll returns the next ticket if one arrives within p.spin; ok is false
// when none did (or the Pool closed, which the blocking receive then
// reports). It keeps its processor while it polls: runtime.Gosched would
// put the worker on the global run queue, from where it starts later than
// a parked one.
func (p *Pool) poll() (j *job, ok bool) {
	got := spinUntil(p.spin, func() bool {
		select {
		case j, ok = <-p.tickets:
			return true
		default:
			return false
		}
	})
	return j, got && ok
}

// spinUntil calls done until it reports true or d has passed, and reports
// whether it did; d ≤ 0 never calls it. The clock is read every 64 calls:
// reading it every time would cost more than a poll.
func spinUntil(d time.Duration, done func() bool) bool {
	if d <= 0 {
		return false
	}
	var deadline time.Time
	for i := 0; !done(); i++ {
		if i%64 == 0 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(d)
			} else if now.After(deadline) {
				return false
			}
		}
	}
	return true
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
func (p *Pool) Run(n int, fn func(lo, hi int)) { p.runGrain(n, 1, fn) }

// runGrain is Run with ranges of at least grain units where that leaves
// a whole number of ranges a goroutine; the ranges depend only on n, grain
// and Threads().
func (p *Pool) runGrain(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	threads := p.Threads()
	if threads == 1 || n == 1 {
		fn(0, n)
		return
	}
	// At most chunksPerThread ranges a goroutine, each of at least grain
	// units where that leaves a whole number of ranges a goroutine (a
	// last odd range would keep one goroutine working while the others
	// wait), and at least one range a goroutine while n has the units.
	chunks := min(threads*chunksPerThread, n)
	if grain > 1 {
		whole := n / grain / threads * threads // ranges of ≥ grain units, a whole number a goroutine
		chunks = min(chunks, max(whole, min(threads, n)))
	}
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
	p.await(j)
	if j.panicked.Load() {
		panic(j.panicValue)
	}
}

// await returns once every chunk of j has finished. The caller polls for
// p.spin before it parks: the workers are usually a moment from done, and
// a parked caller is woken onto the last worker's processor while its own
// goes idle, which is what spinWait's polling avoids for the workers.
func (p *Pool) await(j *job) {
	spinUntil(p.spin, func() bool { return j.done.Load() == int64(j.chunks) })
	j.wg.Wait()
}

// job is one Run call: its chunks are claimed by an atomic counter, so the
// caller and any number of workers can share it.
type job struct {
	fn         func(lo, hi int)
	n, chunks  int
	next       atomic.Int64
	done       atomic.Int64 // chunks finished, for await's polling
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
		j.done.Add(1)
		j.wg.Done()
	}()
	j.fn(lo, hi)
}

package gptq

import (
	"sync"
	"sync/atomic"
)

// parallel runs fn(worker, t) for every t in [0, n) on up to threads
// goroutines and returns when all are done. Tasks are handed out in
// ascending order from a shared counter; worker (in [0, min(threads, n)))
// names the goroutine, for per-goroutine scratch. With threads ≤ 1 or
// n ≤ 1 every task runs in order on the caller's goroutine.
//
// The solver splits only work whose results are independent (rows of the
// deferred update, columns of the inverse, groups of rows of Losses), each
// result computed by one task with the operations of the serial loop, so
// the bits never depend on threads or on which goroutine ran a task.
func parallel(threads, n int, fn func(worker, t int)) {
	if threads <= 1 || n <= 1 {
		for t := range n {
			fn(0, t)
		}
		return
	}
	g := min(threads, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(g)
	for w := range g {
		go func() {
			defer wg.Done()
			for {
				t := int(next.Add(1) - 1)
				if t >= n {
					return
				}
				fn(w, t)
			}
		}()
	}
	wg.Wait()
}

// minParallelWork is the number of multiply-adds below which a kernel runs
// on one goroutine: starting goroutines for less costs more than it saves.
// It changes no bit; tests set it to 0 so that small shapes take the
// parallel paths too.
var minParallelWork = 1 << 18

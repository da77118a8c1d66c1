package spec

import (
	"slices"
	"sync"
)

// Guard keeps a drafter from costing time (docs/drafting.md §4): per
// batch width (the sequences decoding in a step, in classes 1, 2–3, 4–7,
// 8–15, … so that a server whose width wanders decides for each class
// once) it compares the tokens per second of drafted steps, the drafter's
// pass included, with plain steps', and turns drafting off where it does
// not pay. It tries again after an interval of steps that doubles each
// time drafting is found not to pay there, and resets once it pays. It is
// safe for concurrent use.
type Guard struct {
	mu sync.Mutex
	w  map[int]*guardWidth
}

// Guard settings.
const (
	// GuardSamples is how many drafted steps of a width are timed before
	// a decision; GuardEarly decides after GuardEarlySamples when drafting
	// reaches less than that share of the plain rate.
	GuardSamples      = 8
	GuardEarlySamples = 3
	GuardEarly        = 0.75
	// GuardFirstPause is the plain steps after a first decision that
	// drafting does not pay; later pauses double, up to GuardMaxPause.
	GuardFirstPause = 64
	GuardMaxPause   = 4096
	// GuardPlainEvery: one step in this many at a width runs plain even
	// while drafting pays, so that the plain rate it is held against
	// stays measured on this machine and load.
	GuardPlainEvery = 32
)

type guardWidth struct {
	dTok, dSec float64 // drafted steps since the last decision
	dN         int
	pTok, pSec []float64 // recent plain steps
	pause      int       // plain steps left before drafting again
	next       int       // the pause after the next failure
	offs       int       // times drafting was found not to pay
	calls      int       // Allow calls, for the plain probes
}

// State is a width class's guard state, for metrics.
type State struct {
	// Width is the class's narrowest width (1, 2, 4, 8, …).
	Width int
	// Drafting is false while drafting is paused at this width.
	Drafting bool
	// Offs counts the times drafting was found not to pay.
	Offs int
}

// NewGuard returns a guard with drafting on at every width.
func NewGuard() *Guard { return &Guard{w: map[int]*guardWidth{}} }

// widthClass is the class of n sequences: ⌊log2 n⌋ + 1 as a representative
// width 2^⌊log2 n⌋.
func widthClass(n int) int {
	c := 1
	for c*2 <= n {
		c *= 2
	}
	return c
}

func (g *Guard) width(n int) *guardWidth {
	n = widthClass(max(n, 1))
	w, ok := g.w[n]
	if !ok {
		w = &guardWidth{next: GuardFirstPause}
		g.w[n] = w
	}
	return w
}

// Allow reports whether a step of n decoding sequences may draft.
func (g *Guard) Allow(n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.width(n)
	w.calls++
	return w.pause == 0 && w.calls%GuardPlainEvery != 0
}

// Drafted records a drafted step of n sequences that emitted tokens in
// sec seconds (the drafter's pass included); plainSec is the expected
// seconds of a plain step of the same sequences (the cost table's), used
// when no plain step of the width was timed yet.
func (g *Guard) Drafted(n, tokens int, sec, plainSec float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.width(n)
	w.dTok += float64(tokens)
	w.dSec += sec
	w.dN++
	if w.dN < GuardEarlySamples {
		return
	}
	plain := 0.0 // plain tokens per second
	if len(w.pSec) > 0 {
		var t, s float64
		for i := range w.pSec {
			t, s = t+w.pTok[i], s+w.pSec[i]
		}
		plain = t / s
	} else if plainSec > 0 {
		plain = float64(n) / plainSec
	}
	drafted := w.dTok / w.dSec
	if w.dN < GuardSamples && !(plain > 0 && drafted < GuardEarly*plain) {
		return
	}
	if plain > 0 && drafted < plain {
		w.pause, w.offs = w.next, w.offs+1
		w.next = min(2*w.next, GuardMaxPause)
	} else {
		w.next = GuardFirstPause
	}
	w.dTok, w.dSec, w.dN = 0, 0, 0
}

// Plain records a plain step of n sequences that emitted tokens in sec.
func (g *Guard) Plain(n, tokens int, sec float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.width(n)
	w.pTok = push(w.pTok, float64(tokens))
	w.pSec = push(w.pSec, sec)
	if w.pause > 0 {
		w.pause--
	}
}

// States returns every width's state, narrowest first.
func (g *Guard) States() []State {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []State
	for n, w := range g.w {
		out = append(out, State{Width: n, Drafting: w.pause == 0, Offs: w.offs})
	}
	slices.SortFunc(out, func(a, b State) int { return a.Width - b.Width })
	return out
}

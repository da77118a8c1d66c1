package spec

import "sync"

// Guard keeps a drafter from costing time (docs/drafting.md §4): per
// batch width (the sequences decoding in a step) it compares the tokens
// per second of drafted steps, the drafter's pass included, with plain
// steps', and turns drafting off at a width where it does not pay. It
// tries again after an interval of steps that doubles each time drafting
// is found not to pay there, and resets once it pays. It is safe for
// concurrent use.
type Guard struct {
	mu sync.Mutex
	w  map[int]*guardWidth
}

// Guard settings.
const (
	// GuardSamples is how many drafted steps of a width are timed before
	// a decision.
	GuardSamples = 8
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

// State is a width's guard state, for metrics.
type State struct {
	Width int
	// Drafting is false while drafting is paused at this width.
	Drafting bool
	// Offs counts the times drafting was found not to pay.
	Offs int
}

// NewGuard returns a guard with drafting on at every width.
func NewGuard() *Guard { return &Guard{w: map[int]*guardWidth{}} }

func (g *Guard) width(n int) *guardWidth {
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
	if w.dN < GuardSamples {
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
	if drafted := w.dTok / w.dSec; plain > 0 && drafted < plain {
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
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Width < out[j-1].Width; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

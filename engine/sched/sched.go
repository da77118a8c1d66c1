package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/sample"
)

// Defaults of Config's zero fields (serving.md §8).
const (
	DefaultMaxNumSeqs   = 16
	DefaultMaxQueue     = 64
	DefaultPrefillChunk = 512
)

// Config bounds what the scheduler runs at once. Zero fields take the
// defaults.
type Config struct {
	// MaxNumSeqs is the most sequences active (prefilling or decoding) at
	// once.
	MaxNumSeqs int
	// MaxQueue is the most requests waiting for admission; Submit refuses
	// more with ErrQueueFull.
	MaxQueue int
	// PrefillChunk is the most prompt tokens one step processes.
	PrefillChunk int
	// MaxModelLen is the longest sequence (prompt plus generated tokens)
	// a request may reach; 0 means the model's MaxContext.
	MaxModelLen int
	// KVPoolTokens bounds the tokens of state held by all active sequences
	// together. A request reserves its prompt plus its maximum new tokens
	// at admission, so admitted requests never run out; 0 means
	// MaxNumSeqs × MaxModelLen (the bound never binds).
	KVPoolTokens int
	// Logger receives per-request debug lines; nil means slog.Default().
	Logger *slog.Logger
}

// FinishReason says why a request ended.
type FinishReason int

const (
	// FinishStop: a stop id was sampled or the Sink ended the generation
	// (a stop string).
	FinishStop FinishReason = iota + 1
	// FinishLength: MaxTokens were generated (or, for a prefill-only
	// request, the prompt was processed).
	FinishLength
	// FinishCancelled: the request's context ended (client disconnect,
	// shutdown).
	FinishCancelled
	// FinishError: the engine failed; Done receives the error.
	FinishError
)

func (r FinishReason) String() string {
	switch r {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishCancelled:
		return "cancelled"
	case FinishError:
		return "error"
	}
	return fmt.Sprintf("FinishReason(%d)", int(r))
}

// Sink receives a request's results. Its methods are called from the
// scheduler's goroutine, one at a time, and must not block: a slow client
// must not stall everyone else's step.
type Sink interface {
	// PromptLogits receives, for a request with PromptLogits set, the
	// logits of prompt positions from, from+1, … (row-major, vocab_size
	// floats per position) as each prefill chunk completes, in order. The
	// slice is the sink's to keep.
	PromptLogits(from int, logits []float32)
	// Token receives each sampled token with the logits it was sampled
	// from (before any sampling stage; the sink's to keep). stopID reports
	// that the token is a stop id, which ends the generation. Token
	// returns true to end the generation after this token (a stop string
	// completed).
	Token(id int, logits []float32, stopID bool) (end bool)
	// Done is called exactly once, last, with the reason the request
	// ended; err is set for FinishError.
	Done(reason FinishReason, err error)
}

// Request is one generation (or prompt-scoring) job.
type Request struct {
	// ID names the request in logs.
	ID string
	// Prompt is the token ids to prefill; at least one.
	Prompt []int
	// MaxTokens is the most tokens to generate; 0 asks for a prefill only
	// (then PromptLogits must be set).
	MaxTokens int
	// Params are the sampling parameters, stop ids included; Seed must
	// already be drawn for unseeded requests. Unused when MaxTokens is 0.
	Params sample.Params
	// PromptLogits asks for the logits of every prompt position.
	PromptLogits bool
	// Sink receives the results.
	Sink Sink
}

// Errors of Submit.
var (
	// ErrQueueFull: the wait queue holds MaxQueue requests.
	ErrQueueFull = errors.New("sched: the wait queue is full")
	// ErrClosed: the scheduler is shutting down.
	ErrClosed = errors.New("sched: shutting down")
)

// LimitError reports a request that can never run: its prompt plus its
// maximum new tokens exceed the longest sequence or the KV pool.
type LimitError struct {
	// What is "context" (MaxModelLen) or "kv_pool" (KVPoolTokens).
	What      string
	Prompt    int
	MaxTokens int
	Limit     int
}

func (e *LimitError) Error() string {
	what := "the maximum context length"
	if e.What == "kv_pool" {
		what = "the KV pool (--kv-pool-tokens)"
	}
	return fmt.Sprintf("this request needs %d tokens (%d in the prompt + %d to generate) but %s is %d tokens",
		e.Prompt+e.MaxTokens, e.Prompt, e.MaxTokens, what, e.Limit)
}

// InputError reports a malformed Request (a caller's bug, not a client's).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return "sched: " + e.Msg }

// Stats is a snapshot of the scheduler's load.
type Stats struct {
	Running, Waiting int
	// KVPoolTokens is the pool's size; KVReservedTokens what admitted
	// requests reserved; KVUsedTokens the tokens of state they hold now.
	KVPoolTokens, KVReservedTokens, KVUsedTokens int
	// Steps counts the engine steps run.
	Steps int64
}

// Scheduler runs requests over one model. Create it with New, start Run in
// a goroutine, then Submit from any goroutine.
type Scheduler struct {
	m     *model.Model
	cfg   Config
	log   *slog.Logger
	vocab int

	mu       sync.Mutex
	queue    []*state // waiting, FIFO
	active   []*state // admitted, in admission order
	reserved int      // KV tokens reserved by active
	closed   bool
	wake     chan struct{}
	steps    atomic.Int64
	used     atomic.Int64 // KV tokens held by active sequences
}

// phase is where a request is.
type phase int

const (
	queued phase = iota
	running
	ended
)

// state is a request's bookkeeping inside the scheduler.
type state struct {
	req       *Request
	ctx       context.Context
	stopAfter func() bool
	phase     phase // guarded by Scheduler.mu
	cancelled atomic.Bool
	seq       *model.Sequence
	fed       int   // prompt tokens processed
	output    []int // generated tokens
	next      int   // the token to feed at the next decode; -1 while prefilling
	stops     map[int]bool
	sampler   sample.Sampler
}

// New returns a scheduler over m.
func New(m *model.Model, cfg Config) (*Scheduler, error) {
	if cfg.MaxNumSeqs == 0 {
		cfg.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.PrefillChunk == 0 {
		cfg.PrefillChunk = DefaultPrefillChunk
	}
	if cfg.MaxModelLen == 0 {
		cfg.MaxModelLen = m.MaxContext()
	}
	switch {
	case cfg.MaxNumSeqs < 1:
		return nil, &InputError{fmt.Sprintf("MaxNumSeqs %d must be at least 1", cfg.MaxNumSeqs)}
	case cfg.MaxQueue < 0:
		return nil, &InputError{fmt.Sprintf("MaxQueue %d must not be negative", cfg.MaxQueue)}
	case cfg.PrefillChunk < 1:
		return nil, &InputError{fmt.Sprintf("PrefillChunk %d must be at least 1", cfg.PrefillChunk)}
	case cfg.MaxModelLen < 1 || cfg.MaxModelLen > m.MaxContext():
		return nil, &InputError{fmt.Sprintf("MaxModelLen %d is outside [1, %d] (the model's context)", cfg.MaxModelLen, m.MaxContext())}
	}
	if cfg.KVPoolTokens == 0 {
		cfg.KVPoolTokens = cfg.MaxNumSeqs * cfg.MaxModelLen
	}
	if cfg.KVPoolTokens < 1 {
		return nil, &InputError{fmt.Sprintf("KVPoolTokens %d must be at least 1", cfg.KVPoolTokens)}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Scheduler{m: m, cfg: cfg, log: log, vocab: m.Config.VocabSize, wake: make(chan struct{}, 1)}, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// Stats returns a snapshot of the load.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Running: len(s.active), Waiting: len(s.queue),
		KVPoolTokens: s.cfg.KVPoolTokens, KVReservedTokens: s.reserved, KVUsedTokens: int(s.used.Load()),
		Steps: s.steps.Load(),
	}
}

// Submit queues r. It returns at once: the results reach r.Sink. A request
// whose ctx ends is cancelled: while waiting it leaves the queue at once,
// while running at the next step boundary, and its state is freed.
//
// Errors (nothing reaches the Sink then): *LimitError for a request that
// can never fit, ErrQueueFull, ErrClosed, *InputError for a malformed
// request.
func (s *Scheduler) Submit(ctx context.Context, r *Request) error {
	switch {
	case len(r.Prompt) == 0:
		return &InputError{"empty prompt"}
	case r.MaxTokens < 0:
		return &InputError{fmt.Sprintf("MaxTokens %d is negative", r.MaxTokens)}
	case r.MaxTokens == 0 && !r.PromptLogits:
		return &InputError{"MaxTokens 0 without PromptLogits asks for nothing"}
	case r.Sink == nil:
		return &InputError{"nil Sink"}
	}
	for i, id := range r.Prompt {
		if id < 0 || id >= s.vocab {
			return &InputError{fmt.Sprintf("prompt token %d: id %d is outside the vocabulary [0, %d)", i, id, s.vocab)}
		}
	}
	if r.MaxTokens > 0 {
		if err := r.Params.Validate(s.vocab); err != nil {
			return &InputError{err.Error()}
		}
	}
	need := len(r.Prompt) + r.MaxTokens
	if need > s.cfg.MaxModelLen {
		return &LimitError{What: "context", Prompt: len(r.Prompt), MaxTokens: r.MaxTokens, Limit: s.cfg.MaxModelLen}
	}
	if need > s.cfg.KVPoolTokens {
		return &LimitError{What: "kv_pool", Prompt: len(r.Prompt), MaxTokens: r.MaxTokens, Limit: s.cfg.KVPoolTokens}
	}
	st := &state{req: r, ctx: ctx, next: -1, stops: make(map[int]bool, len(r.Params.StopIDs))}
	for _, id := range r.Params.StopIDs {
		st.stops[id] = true
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrClosed
	case len(s.queue) >= s.cfg.MaxQueue && !s.admissibleNow(need):
		s.mu.Unlock()
		return ErrQueueFull
	}
	s.queue = append(s.queue, st)
	// Registered under the lock, so that the loop (which frees st only
	// after taking the lock) sees stopAfter, and cancel (which takes the
	// lock) sees st in the queue.
	st.stopAfter = context.AfterFunc(ctx, func() { s.cancel(st) })
	s.mu.Unlock()
	s.signal()
	return nil
}

// admissibleNow reports whether a new request needing need tokens would be
// admitted at the next step (the queue being empty): such a request is not
// refused for a full queue, so MaxQueue 0 means "no waiting", not "nothing".
func (s *Scheduler) admissibleNow(need int) bool {
	return len(s.queue) == 0 && len(s.active) < s.cfg.MaxNumSeqs && s.reserved+need <= s.cfg.KVPoolTokens
}

func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// cancel ends a request whose context ended: a waiting one leaves the
// queue now; a running one is freed at the next step boundary.
func (s *Scheduler) cancel(st *state) {
	st.cancelled.Store(true)
	s.mu.Lock()
	if st.phase != queued {
		s.mu.Unlock()
		s.signal()
		return
	}
	for i, q := range s.queue {
		if q == st {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	st.phase = ended
	s.mu.Unlock()
	st.req.Sink.Done(FinishCancelled, nil)
}

// Close stops accepting requests: Submit returns ErrClosed from now on,
// and Run returns once every waiting and running request has ended.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

// Run is the scheduler loop. It returns nil after Close once every request
// has ended, or ctx.Err() when ctx ends, after cancelling every request.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		if ctx.Err() != nil {
			s.abortAll()
			return ctx.Err()
		}
		s.mu.Lock()
		s.admit()
		if len(s.active) == 0 {
			done := s.closed && len(s.queue) == 0
			s.mu.Unlock()
			if done {
				return nil
			}
			select {
			case <-s.wake:
			case <-ctx.Done():
			}
			continue
		}
		active := append([]*state(nil), s.active...)
		s.mu.Unlock()
		s.step(ctx, active)
	}
}

// admit moves waiting requests to the active set, first in first out, while
// a sequence slot and their KV reservation are free. Called with s.mu held.
func (s *Scheduler) admit() {
	for len(s.queue) > 0 && len(s.active) < s.cfg.MaxNumSeqs {
		st := s.queue[0]
		need := len(st.req.Prompt) + st.req.MaxTokens
		if s.reserved+need > s.cfg.KVPoolTokens {
			return // the head waits; admission stays FIFO
		}
		s.queue = s.queue[1:]
		st.phase = running
		st.seq = s.m.NewSequence()
		// The sequence is limited to what the request reserved, so the
		// engine itself refuses to grow it further.
		_ = st.seq.SetMaxContext(need)
		s.reserved += need
		s.active = append(s.active, st)
	}
}

// abortAll cancels every waiting and running request (Run's ctx ended).
func (s *Scheduler) abortAll() {
	s.mu.Lock()
	all := append(s.queue, s.active...)
	s.queue, s.active, s.reserved = nil, nil, 0
	for _, st := range all {
		st.phase = ended
	}
	s.used.Store(0)
	s.mu.Unlock()
	for _, st := range all {
		s.release(st)
		st.req.Sink.Done(FinishCancelled, nil)
	}
}

// finish ends an active request and frees its state at once.
func (s *Scheduler) finish(st *state, reason FinishReason, err error) {
	s.mu.Lock()
	for i, a := range s.active {
		if a == st {
			s.active = append(s.active[:i], s.active[i+1:]...)
			break
		}
	}
	s.reserved -= len(st.req.Prompt) + st.req.MaxTokens
	st.phase = ended
	s.used.Add(-int64(st.seq.Len()))
	s.mu.Unlock()
	s.release(st)
	if err != nil {
		s.log.Debug("request failed", "id", st.req.ID, "err", err)
	}
	st.req.Sink.Done(reason, err)
}

func (s *Scheduler) release(st *state) {
	if st.stopAfter != nil {
		st.stopAfter()
	}
	st.seq = nil // the KV and conv state go to the garbage collector now
}

// work is one sequence's part of a step.
type work struct {
	st      *state
	toks    []int
	mode    model.LogitsMode
	prefill bool
	// sample: the step ends the prompt or is a decode, and a token is to
	// be drawn from logits.
	sample bool
	logits []float32
	token  int
}

// step runs one engine step over the active requests: every decode, then
// at most one prefill chunk (the earliest admitted request still
// prefilling).
func (s *Scheduler) step(ctx context.Context, active []*state) {
	var ws []*work
	var pre *work
	for _, st := range active {
		if st.cancelled.Load() || st.ctx.Err() != nil {
			s.finish(st, FinishCancelled, nil)
			continue
		}
		if st.next >= 0 {
			ws = append(ws, &work{st: st, toks: []int{st.next}, mode: model.LastLogits, sample: true})
			continue
		}
		if pre == nil {
			n := min(s.cfg.PrefillChunk, len(st.req.Prompt)-st.fed)
			end := st.fed+n == len(st.req.Prompt)
			w := &work{st: st, toks: st.req.Prompt[st.fed : st.fed+n], prefill: true, sample: end && st.req.MaxTokens > 0}
			switch {
			case st.req.PromptLogits:
				w.mode = model.AllLogits
			case end:
				w.mode = model.LastLogits
			default:
				w.mode = model.NoLogits
			}
			pre = w
		}
	}
	if pre != nil {
		ws = append(ws, pre)
	}
	if len(ws) == 0 {
		return
	}
	seqs := make([]*model.Sequence, len(ws))
	toks := make([][]int, len(ws))
	modes := make([]model.LogitsMode, len(ws))
	rows := 0
	for i, w := range ws {
		seqs[i], toks[i], modes[i] = w.st.seq, w.toks, w.mode
		rows += len(w.toks)
	}
	// The step is not cancelled by ctx: it is short, and every sequence
	// in it must stay consistent with what its request was told.
	out, err := s.m.Forward(context.WithoutCancel(ctx), seqs, toks, model.ForwardOptions{SeqLogits: modes, ChunkSize: rows})
	s.steps.Add(1)
	if err != nil {
		for _, w := range ws {
			s.finish(w.st, FinishError, err)
		}
		return
	}
	s.used.Add(int64(rows))
	for i, w := range ws {
		w.logits = out[i]
		if w.mode == model.AllLogits {
			n := len(w.toks)
			w.logits = out[i][(n-1)*s.vocab:]
		}
	}
	s.sampleAll(ws)
	for i, w := range ws {
		st := w.st
		if w.prefill {
			if st.req.PromptLogits {
				st.req.Sink.PromptLogits(st.fed, out[i])
			}
			st.fed += len(w.toks)
			if st.fed == len(st.req.Prompt) && st.req.MaxTokens == 0 {
				s.finish(st, FinishLength, nil)
				continue
			}
		}
		if !w.sample {
			continue
		}
		isStop := st.stops[w.token]
		st.output = append(st.output, w.token)
		end := st.req.Sink.Token(w.token, w.logits, isStop)
		switch {
		case isStop || end:
			s.finish(st, FinishStop, nil)
		case len(st.output) >= st.req.MaxTokens:
			s.finish(st, FinishLength, nil)
		default:
			st.next = w.token
		}
	}
}

// sampleAll draws the next token of every work item that needs one, in
// parallel: each sequence's draw depends only on its own logits, history
// and seed, so the fan-out cannot change a token.
func (s *Scheduler) sampleAll(ws []*work) {
	var todo []*work
	for _, w := range ws {
		if w.sample {
			todo = append(todo, w)
		}
	}
	one := func(w *work) {
		st := w.st
		pos := len(st.req.Prompt) + len(st.output)
		w.token = st.sampler.Next(st.req.Params, w.logits, sample.History{Prompt: st.req.Prompt, Output: st.output}, pos)
	}
	workers := min(len(todo), runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for _, w := range todo {
			one(w)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return
				}
				one(todo[i])
			}
		})
	}
	wg.Wait()
}

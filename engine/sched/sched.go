package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/prefix"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/spec"
)

// Defaults of Config's zero fields (docs/serving.md §8).
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
	// KVPoolTokens sizes the KV pool (model.KVPool) that active sequences
	// and the prefix cache take their pages from: KVPoolTokens rounded up
	// to whole pages of kv.PageTokens. A request reserves the pages
	// of its prompt plus its maximum new tokens at admission, and the
	// cache gives back its pages when a sequence needs them, so admitted
	// requests never run out; 0 means MaxNumSeqs × MaxModelLen (the bound
	// never binds).
	KVPoolTokens int
	// Speculation configures prompt-lookup speculation
	// (docs/serving.md §6); the zero value turns it on with its defaults.
	Speculation SpecConfig
	// Drafter, if set, is a DSpark drafter attached to the model
	// (draft.Load): every decoding sequence may carry its drafts in a
	// verify step, at the depths its confidence and DraftCosts say pay
	// (docs/drafting.md §4).
	Drafter *draft.Drafter
	// DraftCosts is the verify cost table the drafts are scheduled by,
	// measured at start-up (MeasureDraftCosts) or read from a file; nil
	// starts an empty one, filled as steps run.
	DraftCosts *spec.Table
	// DraftDepth, if positive, verifies that many drafts (at most the
	// block) of every decoding sequence at every step, with no guard:
	// a fixed schedule for measuring acceptance and for tests.
	DraftDepth int
	// PrefixCache configures the prefix cache (docs/serving.md §7); the
	// zero value turns it on.
	PrefixCache PrefixConfig
	// Logger receives per-request debug lines; nil means slog.Default().
	Logger *slog.Logger
}

// SpecConfig configures speculation, which runs while exactly one sequence
// is active. Zero fields take docs/serving.md §6's defaults.
type SpecConfig struct {
	Off bool
	// Tokens is the most draft tokens per verify step (1 to 7).
	Tokens int
	// LookupMin and LookupMax bound the n-gram lengths matched.
	LookupMin, LookupMax int
}

// PrefixConfig configures the prefix cache. Its blocks are KV pages
// shared with the sequences they came from; it holds what the running
// requests leave of the pool, and gives pages back, least recently used
// first, when a sequence needs them.
type PrefixConfig struct {
	Off bool
	// Identity names the model's weights in every block key (the
	// checkpoint identity), so blocks can never be mixed across models.
	Identity string
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
	// Started is called once the request is admitted, with the prompt
	// tokens resumed from the prefix cache.
	Started(cachedTokens int)
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
	// PromptLogits asks for the logits of every prompt position (the
	// prompt is then computed in full, never resumed from the cache).
	PromptLogits bool
	// CacheSalt enters the key of the request's first prefix-cache block:
	// requests with different salts never share cached state.
	CacheSalt string
	// Sink receives the results.
	Sink Sink
	// Candidates are the request's further answers (OpenAI's n − 1;
	// the request itself is candidate 0). The prompt is prefilled once;
	// each candidate is then a Clone of the request's sequence (its pages
	// shared by reference, copied on write) that samples with Params but
	// its own Seed, decodes as a sequence of its own in the batch, and
	// reports to its own Sink (docs/serving.md §5). Unused with
	// PromptLogits or MaxTokens 0.
	Candidates []Candidate
}

// Candidate is one further answer of a Request.
type Candidate struct {
	// Seed replaces the request's Params.Seed (CandidateSeed gives
	// OpenAI's n its seeds).
	Seed uint64
	// Sink receives the candidate's results: Started when it is cloned
	// from the prefilled prompt, its tokens, and Done.
	Sink Sink
}

// CandidateSeed is the seed of candidate i of a request seeded with seed:
// seed + i, wrapping (vLLM's rule for n > 1). Candidate 0 keeps the
// request's seed, so it answers as the request with n = 1 does, and
// candidate i as a request with n = 1 and seed + i.
func CandidateSeed(seed uint64, i int) uint64 { return seed + uint64(i) }

// Errors of Submit.
var (
	// ErrQueueFull: the wait queue holds MaxQueue requests.
	ErrQueueFull = errors.New("sched: the wait queue is full")
	// ErrClosed: the scheduler is shutting down.
	ErrClosed = errors.New("sched: shutting down")
)

// LimitError reports a request that can never run: its prompt plus its
// maximum new tokens exceed the longest sequence or the KV pool, or its
// candidates outnumber the sequences that may run at once.
type LimitError struct {
	// What is "context" (MaxModelLen), "kv_pool" (KVPoolTokens) or
	// "max_num_seqs" (MaxNumSeqs, for Candidates).
	What      string
	Prompt    int
	MaxTokens int
	// N is the request's candidates, itself included (1 without
	// Candidates).
	N     int
	Limit int
	// Pages and PoolPages are, for "kv_pool", the KV pages the request
	// reserves and the pool's pages (kv.PageTokens tokens each).
	Pages, PoolPages int
}

func (e *LimitError) Error() string {
	n := max(e.N, 1)
	switch {
	case e.What == "kv_pool" && e.MaxTokens == 0 && e.Pages > 0:
		return fmt.Sprintf("this request's scoring needs %d tokens of state in %d KV pages of %d tokens but the KV pool (--kv-pool-tokens %d) holds %d pages",
			e.Prompt, e.Pages, kv.PageTokens, e.Limit, e.PoolPages)
	case e.What == "max_num_seqs":
		return fmt.Sprintf("this request asks for %d candidates, each a sequence of its own, but at most %d sequences run at once (--max-num-seqs)", n, e.Limit)
	case e.What == "kv_pool":
		if n > 1 {
			return fmt.Sprintf("this request's %d candidates need %d KV pages of %d tokens (the prompt's %d tokens shared, and for each candidate its copy of the prompt's last page and %d tokens to generate) but the KV pool (--kv-pool-tokens %d) holds %d pages",
				n, e.Pages, kv.PageTokens, e.Prompt, e.MaxTokens, e.Limit, e.PoolPages)
		}
		return fmt.Sprintf("this request needs %d tokens (%d in the prompt + %d to generate) but the KV pool (--kv-pool-tokens) is %d tokens",
			e.Prompt+e.MaxTokens, e.Prompt, e.MaxTokens, e.Limit)
	}
	return fmt.Sprintf("this request needs %d tokens (%d in the prompt + %d to generate) but the maximum context length is %d tokens",
		e.Prompt+e.MaxTokens, e.Prompt, e.MaxTokens, e.Limit)
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
	// KVPages is the pool's size in pages (KVPoolTokens rounded up to
	// kv.PageTokens); KVPagesUsed the pages held by sequences or the
	// prefix cache, KVPagesFree the rest, KVPagesShared those held by
	// more than one (a cached block a sequence resumed is held once);
	// KVPageBytes one page's memory. For a model with sliding layers
	// these are full pages (kv.PoolStats), and KVWindowPagesUsed,
	// KVWindowPagesShared and KVWindowPageBytes count its window pages
	// (a sliding layer's, a constant number per sequence; never more
	// than the full pages used); all three are 0 for a model without.
	KVPages, KVPagesUsed, KVPagesFree, KVPagesShared, KVPageBytes int
	KVWindowPagesUsed, KVWindowPagesShared, KVWindowPageBytes     int
	// Steps counts the engine steps run.
	Steps int64
	// Speculation: verify steps, draft tokens they carried, draft tokens
	// accepted, and tokens emitted by verify steps.
	SpecSteps, SpecDraftTokens, SpecAcceptedTokens, SpecEmittedTokens int64
	// Prefix cache: prompt tokens looked up and found, and what it holds.
	PrefixQueryTokens, PrefixHitTokens int64
	PrefixCachedTokens, PrefixBlocks   int
	// PrefixCachedBytes is the state the cached blocks' positions take
	// in the KV format (pages shared with running sequences included).
	PrefixCachedBytes int
	// Drafter: its passes, the verify steps that carried its drafts, the
	// drafts verified, accepted, and the tokens those steps emitted
	// (docs/drafting.md §6); DraftGuard the guard's state per width.
	DraftPasses, DraftSteps, DraftTokens, DraftAccepted, DraftEmitted int64
	DraftGuard                                                        []spec.State
	// DraftHopelessSteps counts the steps at widths where no pass could
	// pay by the cost table, whose rows' drafter context was given up
	// (docs/drafting.md §3).
	DraftHopelessSteps int64
	// DraftPassSeconds is the time the drafter's passes took, and
	// DraftContextSeconds the time the model spent computing the
	// drafter's context (model.Model.DraftContextTime): what the drafter
	// itself cost, beside the verify rows its drafts added to steps.
	DraftPassSeconds, DraftContextSeconds float64
}

// Scheduler runs requests over one model. Create it with New, start Run in
// a goroutine, then Submit from any goroutine.
type Scheduler struct {
	m     *model.Model
	cfg   Config
	log   *slog.Logger
	vocab int

	mu            sync.Mutex
	queue         []*state // waiting, FIFO
	active        []*state // admitted, in admission order
	reserved      int      // KV tokens reserved by active
	reservedPages int      // KV pages reserved by active
	seqs          int      // sequence slots held by active (candidates not yet cloned included)
	leased        []*state // admitted Leases not yet released
	closed        bool
	wake          chan struct{}
	steps         atomic.Int64
	used          atomic.Int64 // KV tokens held by active sequences

	pool                                            *model.KVPool // every active sequence's pages and the cache's
	costs                                           spec.Costs    // the loop's
	cache                                           *prefix.Cache // the loop's (and reclaim's, under cacheMu); nil when off
	cacheMu                                         sync.Mutex    // guards cache
	specSteps, specDraft, specAccepted, specEmitted atomic.Int64
	prefixQuery, prefixHit                          atomic.Int64
	cachedTokens, cachedBlocks, cachedBytes         atomic.Int64 // mirrors of the cache for Stats
	drafting                                                     // the drafter's scheduling, when Config.Drafter is set
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
	cached    int          // prompt tokens resumed from the prefix cache
	keys      []prefix.Key // chain keys of the blocks of the sequence seen so far
	lookup    *spec.Lookup // nil without speculation
	policy    *spec.Policy //
	// What st holds of the scheduler's bounds, given back by finish: a
	// request with candidates holds theirs until they are cloned.
	resTokens, resPages, slots int
	// forked: the request's candidates were cloned (or have ended);
	// until then they end with it.
	forked bool
	// fam holds the reservation of the prompt a request's candidates
	// share: it is given back when the last of them ends.
	fam *family
	// lease is set for a Lease waiting in the queue: admission reserves
	// its pages and hands them to its holder; the loop never runs it.
	lease *leaseSink
}

// family is the shared part of a forked request's reservation.
type family struct{ tokens, pages, left int }

// reservation is the KV tokens, KV pages and sequences a request needs:
// its prompt plus MaxTokens, and for every further candidate MaxTokens
// more tokens and the pages of its own. A candidate shares the prompt's
// whole pages and holds its own copy of the prompt's last, partial page
// (copy on write) and the pages of its output.
func reservation(r *Request) (tokens, pages, slots int) {
	n := 1 + len(r.Candidates)
	one := pagesFor(len(r.Prompt) + r.MaxTokens)
	shared := len(r.Prompt) / kv.PageTokens
	return len(r.Prompt) + n*r.MaxTokens, one + (n-1)*(one-shared), n
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
	sp := &cfg.Speculation
	if sp.Tokens == 0 {
		sp.Tokens = spec.DefaultTokens
	}
	if sp.LookupMin == 0 {
		sp.LookupMin = spec.DefaultLookupMin
	}
	if sp.LookupMax == 0 {
		sp.LookupMax = max(spec.DefaultLookupMax, sp.LookupMin)
	}
	switch {
	case sp.Tokens < 1 || sp.Tokens > spec.MaxTokens:
		return nil, &InputError{fmt.Sprintf("speculation tokens %d is outside [1, %d]", sp.Tokens, spec.MaxTokens)}
	case sp.LookupMin < 1 || sp.LookupMax < sp.LookupMin:
		return nil, &InputError{fmt.Sprintf("lookup n-gram lengths [%d, %d]: want 1 ≤ min ≤ max", sp.LookupMin, sp.LookupMax)}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.DraftDepth < 0 || (cfg.DraftDepth > 0 && cfg.Drafter == nil) {
		return nil, &InputError{fmt.Sprintf("DraftDepth %d needs a drafter and must not be negative", cfg.DraftDepth)}
	}
	if cfg.Drafter != nil && m.Drafter() != model.Drafter(cfg.Drafter) {
		return nil, &InputError{"the drafter is not attached to the model (draft.Load attaches it)"}
	}
	s := &Scheduler{m: m, cfg: cfg, log: log, vocab: m.Config.VocabSize, wake: make(chan struct{}, 1)}
	s.initDrafting()
	s.pool = m.NewKVPool(cfg.KVPoolTokens)
	if !cfg.PrefixCache.Off {
		s.cache = prefix.New()
		// The loop's goroutine takes pages (Forward) and so does a
		// Lease's holder: the cache is reclaimed under cacheMu, which the
		// loop holds around its own uses of the cache (none of which
		// takes a page).
		s.pool.SetReclaim(func() bool {
			s.cacheMu.Lock()
			defer s.cacheMu.Unlock()
			ok := s.cache.Reclaim()
			s.mirrorCache()
			return ok
		})
	}
	return s, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// Stats returns a snapshot of the load.
func (s *Scheduler) Stats() Stats {
	ps := s.pool.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Running: len(s.active), Waiting: len(s.queue),
		KVPoolTokens: s.cfg.KVPoolTokens, KVReservedTokens: s.reserved, KVUsedTokens: int(s.used.Load()),
		KVPages: ps.Pages, KVPagesUsed: ps.Used, KVPagesFree: ps.Free, KVPagesShared: ps.Shared, KVPageBytes: ps.PageBytes,
		KVWindowPagesUsed: ps.WindowUsed, KVWindowPagesShared: ps.WindowShared, KVWindowPageBytes: ps.WindowPageBytes,
		Steps:     s.steps.Load(),
		SpecSteps: s.specSteps.Load(), SpecDraftTokens: s.specDraft.Load(), SpecAcceptedTokens: s.specAccepted.Load(), SpecEmittedTokens: s.specEmitted.Load(),
		PrefixQueryTokens: s.prefixQuery.Load(), PrefixHitTokens: s.prefixHit.Load(),
		PrefixCachedTokens: int(s.cachedTokens.Load()), PrefixBlocks: int(s.cachedBlocks.Load()),
		PrefixCachedBytes: int(s.cachedBytes.Load()),
		DraftPasses:       s.dPasses.Load(), DraftSteps: s.dSteps.Load(), DraftTokens: s.dTokens.Load(),
		DraftAccepted: s.dAccepted.Load(), DraftEmitted: s.dEmitted.Load(), DraftGuard: s.guardStates(),
		DraftHopelessSteps: s.dDropSteps.Load(),
	}
	if s.cfg.Drafter != nil {
		st.DraftPassSeconds = time.Duration(s.dPassNanos.Load()).Seconds()
		st.DraftContextSeconds = s.m.DraftContextTime().Seconds()
	}
	return st
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
	case len(r.Candidates) > 0 && (r.MaxTokens == 0 || r.PromptLogits):
		return &InputError{"Candidates need MaxTokens > 0 and no PromptLogits"}
	}
	for i, c := range r.Candidates {
		if c.Sink == nil {
			return &InputError{fmt.Sprintf("candidate %d: nil Sink", i+1)}
		}
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
	n := 1 + len(r.Candidates)
	if len(r.Prompt)+r.MaxTokens > s.cfg.MaxModelLen {
		return &LimitError{What: "context", Prompt: len(r.Prompt), MaxTokens: r.MaxTokens, N: n, Limit: s.cfg.MaxModelLen}
	}
	if n > s.cfg.MaxNumSeqs {
		return &LimitError{What: "max_num_seqs", Prompt: len(r.Prompt), MaxTokens: r.MaxTokens, N: n, Limit: s.cfg.MaxNumSeqs}
	}
	st := &state{req: r, ctx: ctx, next: -1, stops: make(map[int]bool, len(r.Params.StopIDs)), forked: n == 1}
	st.resTokens, st.resPages, st.slots = reservation(r)
	if st.resTokens > s.cfg.KVPoolTokens || st.resPages > s.pool.Stats().Pages {
		return &LimitError{What: "kv_pool", Prompt: len(r.Prompt), MaxTokens: r.MaxTokens, N: n, Limit: s.cfg.KVPoolTokens,
			Pages: st.resPages, PoolPages: s.pool.Stats().Pages}
	}
	for _, id := range r.Params.StopIDs {
		st.stops[id] = true
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrClosed
	case len(s.queue) >= s.cfg.MaxQueue && !s.admissibleNow(st):
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

// admissibleNow reports whether st would be admitted at the next step (the
// queue being empty): such a request is not refused for a full queue, so
// MaxQueue 0 means "no waiting", not "nothing".
func (s *Scheduler) admissibleNow(st *state) bool {
	return len(s.queue) == 0 && s.fits(st)
}

// fits reports whether st's sequences and pages fit beside the active
// requests' reservations. Called with s.mu held.
//
// Reserving pages makes running out impossible: a sequence's page table
// never holds more than the pages of its reservation (it is limited to
// that many tokens), the pages it shares are whole cached blocks it never
// writes into (so it never needs a page for a copy on write: speculation
// rewinds only past the blocks it registered), and every page no table
// holds is a cached block the cache gives back on demand. A candidate's
// clone shares the request's pages; the pages it writes into, the
// prompt's last one included, are its own and in its reservation.
func (s *Scheduler) fits(st *state) bool {
	return s.seqs+st.slots <= s.cfg.MaxNumSeqs && s.reservedPages+st.resPages <= s.pool.Stats().Pages
}

// pagesFor is the KV pages of n tokens.
func pagesFor(n int) int { return (n + kv.PageTokens - 1) / kv.PageTokens }

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
	s.done(st, FinishCancelled, nil)
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
		admitted := s.admit()
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
		for _, st := range admitted {
			s.start(st)
		}
		s.step(ctx, active)
	}
}

// admit moves waiting requests to the active set, first in first out, while
// a sequence slot and their KV reservation are free, and returns them.
// Called with s.mu held.
func (s *Scheduler) admit() []*state {
	var admitted []*state
	for len(s.queue) > 0 {
		st := s.queue[0]
		need := len(st.req.Prompt) + st.req.MaxTokens
		if !s.fits(st) {
			break // the head waits; admission stays FIFO
		}
		s.queue = s.queue[1:]
		st.phase = running
		if st.lease != nil {
			s.reserved += st.resTokens
			s.reservedPages += st.resPages
			s.leased = append(s.leased, st)
			close(st.lease.admitted)
			continue
		}
		st.seq = s.pool.NewSequence()
		// The sequence is limited to what the request reserved, so the
		// engine itself refuses to grow it further.
		_ = st.seq.SetMaxContext(need)
		s.reserved += st.resTokens
		s.reservedPages += st.resPages
		s.seqs += st.slots
		s.active = append(s.active, st)
		admitted = append(admitted, st)
	}
	return admitted
}

// start prepares an admitted request, in the loop's goroutine: the prefix
// cache yields room to it and may resume its prompt; speculation gets the
// prompt as context.
func (s *Scheduler) start(st *state) {
	r := st.req
	if s.cache != nil {
		s.cacheMu.Lock()
		if !r.PromptLogits {
			// The last prompt token is always computed: its logits start
			// the generation.
			n := (len(r.Prompt) - 1) / prefix.BlockSize
			keys := prefix.Keys(s.cfg.PrefixCache.Identity, r.CacheSalt, r.Prompt, n)
			// Extend shares the cached pages: no copy, no new page.
			for _, sp := range s.cache.Lookup(keys) {
				if err := st.seq.Extend(sp); err != nil {
					break
				}
				st.keys = append(st.keys, keys[len(st.keys)])
			}
			st.fed = st.seq.Len()
			st.cached = st.fed
			s.used.Add(int64(st.fed))
			s.prefixQuery.Add(int64(len(r.Prompt)))
			s.prefixHit.Add(int64(st.cached))
		}
		s.mirrorCache()
		s.cacheMu.Unlock()
	}
	s.startSpec(st)
	r.Sink.Started(st.cached)
}

// startSpec gives st prompt-lookup speculation over its prompt.
func (s *Scheduler) startSpec(st *state) {
	if r := st.req; !s.cfg.Speculation.Off && r.MaxTokens > 1 {
		sp := s.cfg.Speculation
		st.lookup, _ = spec.NewLookup(sp.LookupMin, sp.LookupMax)
		st.lookup.Append(r.Prompt...)
		st.policy = spec.NewPolicy(sp.Tokens, &s.costs)
	}
}

// fork clones the sequence of a request whose prompt a step just
// prefilled into one sequence per further candidate, and returns their
// work for the step: each samples from the prompt's last logits with its
// own seed. Each candidate takes its share of the request's reservation.
func (s *Scheduler) fork(w *work) []*work {
	st := w.st
	st.forked = true
	r := st.req
	var ws []*work
	s.mu.Lock()
	// The prompt's whole pages are held by every candidate until the
	// last one ends; the rest of each reservation is a candidate's own.
	fam := &family{tokens: len(r.Prompt), pages: len(r.Prompt) / kv.PageTokens, left: 1 + len(r.Candidates)}
	st.fam = fam
	st.resTokens -= fam.tokens
	st.resPages -= fam.pages
	for i, c := range r.Candidates {
		cr := *r
		cr.ID = fmt.Sprintf("%s/%d", r.ID, i+1)
		cr.Params.Seed, cr.Sink, cr.Candidates = c.Seed, c.Sink, nil
		ct := &state{req: &cr, ctx: st.ctx, phase: running, next: -1, stops: st.stops, forked: true, cached: st.cached,
			keys: append([]prefix.Key(nil), st.keys...), fam: fam}
		ct.resTokens, ct.resPages, ct.slots = reservation(&cr)
		ct.resTokens -= fam.tokens
		ct.resPages -= fam.pages
		st.resTokens -= ct.resTokens
		st.resPages -= ct.resPages
		st.slots--
		ct.seq = st.seq.Clone()
		s.used.Add(int64(ct.seq.Len()))
		s.startSpec(ct)
		s.active = append(s.active, ct)
		// The logits are each sink's to keep.
		ws = append(ws, &work{st: ct, mode: w.mode, sample: true, logits: append([]float32(nil), w.logits...), l0: ct.seq.Len()})
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.st.req.Sink.Started(w.st.cached)
	}
	return ws
}

// mirrorCache copies the cache's figures for Stats; called with cacheMu
// held (or before Run).
func (s *Scheduler) mirrorCache() {
	s.cachedTokens.Store(int64(s.cache.Tokens()))
	s.cachedBlocks.Store(int64(s.cache.Blocks()))
	s.cachedBytes.Store(int64(s.cache.Bytes()))
}

// abortAll cancels every waiting and running request (Run's ctx ended).
func (s *Scheduler) abortAll() {
	s.mu.Lock()
	all := append(s.queue, s.active...)
	for _, st := range s.leased {
		st.phase = ended
	}
	s.queue, s.active, s.reserved, s.reservedPages, s.seqs, s.leased = nil, nil, 0, 0, 0, nil
	for _, st := range all {
		st.phase = ended
	}
	s.used.Store(0)
	s.mu.Unlock()
	for _, st := range all {
		s.release(st)
		s.done(st, FinishCancelled, nil)
	}
}

// done tells st's Sink, and those of its candidates not yet cloned, that
// it ended.
func (s *Scheduler) done(st *state, reason FinishReason, err error) {
	st.req.Sink.Done(reason, err)
	if !st.forked {
		st.forked = true
		for _, c := range st.req.Candidates {
			c.Sink.Done(reason, err)
		}
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
	s.reserved -= st.resTokens
	s.reservedPages -= st.resPages
	s.seqs -= st.slots
	if f := st.fam; f != nil {
		if f.left--; f.left == 0 {
			s.reserved -= f.tokens
			s.reservedPages -= f.pages
		}
	}
	st.phase = ended
	s.used.Add(-int64(st.seq.Len()))
	s.mu.Unlock()
	s.release(st)
	if err != nil {
		s.log.Debug("request failed", "id", st.req.ID, "err", err)
	}
	s.done(st, reason, err)
}

func (s *Scheduler) release(st *state) {
	if st.stopAfter != nil {
		st.stopAfter()
	}
	// Its pages go back to the pool now (those the prefix cache also
	// holds stay cached); the conv state goes to the garbage collector.
	if st.seq != nil {
		st.seq.Free()
		st.seq = nil
	}
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
	// draft holds a verify step's draft tokens (toks is the token to
	// feed followed by them).
	draft []int
	// drafted: the draft is the drafter's (not prompt lookup's); conf its
	// drafts' survival probabilities.
	drafted bool
	conf    []float64
	emitted int   // tokens the step emitted
	l0      int   // the sequence's length before the step
	snaps   []int // conv-state snapshot lengths
	logits  []float32
	token   int
}

// fedID returns the i-th token the sequence was fed: the prompt, then the
// output.
func (st *state) fedID(i int) int {
	if i < len(st.req.Prompt) {
		return st.req.Prompt[i]
	}
	return st.output[i-len(st.req.Prompt)]
}

// step runs one engine step over the active requests: every decode, then
// at most one prefill chunk (the earliest admitted request still
// prefilling). While exactly one request is active and decoding, its
// decode may be a verify step carrying a prompt-lookup draft.
func (s *Scheduler) step(ctx context.Context, active []*state) {
	var ws, cands []*work
	var pre *work
	for _, st := range active {
		if st.cancelled.Load() || st.ctx.Err() != nil {
			s.finish(st, FinishCancelled, nil)
			continue
		}
		if st.next >= 0 {
			w := &work{st: st, toks: []int{st.next}, mode: model.LastLogits, sample: true}
			if len(active) == 1 && st.policy != nil {
				// The step emits up to k+1 tokens, within MaxTokens.
				if k := min(st.policy.K(), st.req.MaxTokens-len(st.output)-1); k > 0 {
					if d := st.lookup.Propose(k); len(d) > 0 {
						w.draft, w.toks, w.mode = d, append([]int{st.next}, d...), model.AllLogits
					}
				}
				if w.draft == nil {
					st.policy.Plain()
				}
			}
			if w.draft == nil && s.cfg.Drafter != nil && st.req.MaxTokens-len(st.output) > 1 && st.seq.DraftWhole() {
				cands = append(cands, w)
			}
			ws = append(ws, w)
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
	decodes := len(ws)
	// A step that carries a prefill chunk does not draft: its time is the
	// chunk's, which neither the cost table nor the guard can weigh a
	// pass against.
	draftSec, drafterRan := 0.0, false
	if len(cands) > 0 && (pre == nil || s.cfg.DraftDepth > 0) {
		draftSec, drafterRan = s.draftFor(cands, decodes, ws)
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
	var snaps [][]int
	rows := 0
	for i, w := range ws {
		seqs[i], toks[i], modes[i] = w.st.seq, w.toks, w.mode
		rows += len(w.toks)
		w.l0 = w.st.seq.Len()
		end := w.l0 + len(w.toks)
		switch {
		case w.draft != nil:
			// Every length the step may be rewound to.
			for L := w.l0 + 1; L <= end; L++ {
				w.snaps = append(w.snaps, L)
			}
		case s.cache != nil:
			for L := (w.l0/prefix.BlockSize + 1) * prefix.BlockSize; L <= end; L += prefix.BlockSize {
				w.snaps = append(w.snaps, L)
			}
		}
		if len(w.snaps) > 0 && snaps == nil {
			snaps = make([][]int, len(ws))
		}
	}
	if snaps != nil {
		for i, w := range ws {
			snaps[i] = w.snaps
		}
	}
	// The step is not cancelled by ctx: it is short, and every sequence
	// in it must stay consistent with what its request was told.
	t0 := time.Now()
	// Where no pass could pay at this width, the step's sequences give up
	// the drafter's context of their rows rather than compute it.
	width := decodes
	if pre != nil {
		width++
	}
	drop := s.draftHopeless(width)
	if drop {
		s.dDropSteps.Add(1)
	}
	c0 := s.m.DraftContextTime()
	out, err := s.m.Forward(context.WithoutCancel(ctx), seqs, toks, model.ForwardOptions{SeqLogits: modes, ChunkSize: rows, ConvSnapshots: snaps, DropDraft: drop})
	// The drafter's context that the step computed (its sequences' 64
	// pending rows) is not the step's cost: counted in, it made plain
	// steps look slow, and so drafting look paying where its context was
	// being computed, which kept it computed.
	elapsed := time.Since(t0) - (s.m.DraftContextTime() - c0)
	s.steps.Add(1)
	if err != nil {
		for _, w := range ws {
			s.finish(w.st, FinishError, err)
		}
		return
	}
	s.used.Add(int64(rows))
	if len(ws) == 1 && !ws[0].prefill {
		s.costs.Observe(len(ws[0].toks), elapsed.Seconds())
	}
	if pre == nil && s.cfg.Drafter != nil {
		s.dTable.Observe(decodes, rows, elapsed.Seconds())
	}
	for i, w := range ws {
		w.logits = out[i]
		if w.mode == model.AllLogits && w.draft == nil {
			n := len(w.toks)
			w.logits = out[i][(n-1)*s.vocab:]
		}
	}
	if pre != nil && pre.sample && !pre.st.forked {
		// The prompt is prefilled: the candidates start from it.
		ws = append(ws, s.fork(pre)...)
	}
	s.sampleAll(ws)
	for i, w := range ws {
		st := w.st
		if w.draft != nil {
			s.verify(w)
			continue
		}
		w.emitted = 1
		if w.prefill {
			if st.req.PromptLogits {
				st.req.Sink.PromptLogits(st.fed, out[i])
			}
			st.fed += len(w.toks)
			s.register(st, st.seq.Len())
			if st.fed == len(st.req.Prompt) && st.req.MaxTokens == 0 {
				s.finish(st, FinishLength, nil)
				continue
			}
		}
		if !w.sample {
			continue
		}
		reason := s.emit(st, w.token, w.logits)
		if !w.prefill {
			s.register(st, st.seq.Len())
		}
		if reason != 0 {
			s.end(st, reason)
		} else {
			st.next = w.token
		}
	}
	if pre == nil && len(cands) > 0 {
		s.guardStep(ws, drafterRan, elapsed.Seconds()+draftSec)
	}
}

// emit hands a sampled token to the request and returns why the request
// ends with it (0: it goes on).
func (s *Scheduler) emit(st *state, token int, logits []float32) FinishReason {
	isStop := st.stops[token]
	st.output = append(st.output, token)
	if st.lookup != nil {
		st.lookup.Append(token)
	}
	end := st.req.Sink.Token(token, logits, isStop)
	switch {
	case isStop || end:
		return FinishStop
	case len(st.output) >= st.req.MaxTokens:
		return FinishLength
	}
	return 0
}

// verify accepts a verify step's tokens (docs/serving.md §6): position
// i is sampled with the full pipeline, keyed by its absolute position,
// after the tokens accepted before it; equal to draft token i, it is
// accepted and the next position is sampled; different, it is emitted
// and the step ends. If every draft token is accepted, the last row
// gives one more. The sequence is then rewound to the tokens that
// stand, so what follows is exactly what plain decoding would have produced.
func (s *Scheduler) verify(w *work) {
	st, k, V := w.st, len(w.draft), s.vocab
	emitted, accepted := 0, 0
	var reason FinishReason
	for i := 0; i <= k; i++ {
		row := w.logits[i*V : (i+1)*V]
		pos := len(st.req.Prompt) + len(st.output)
		tok := st.sampler.Next(st.req.Params, row, sample.History{Prompt: st.req.Prompt, Output: st.output}, pos)
		emitted++
		if reason = s.emit(st, tok, row); reason != 0 {
			break
		}
		if i == k || tok != w.draft[i] {
			break
		}
		accepted++
	}
	w.emitted = emitted
	if w.drafted {
		s.draftVerified(w, accepted)
	} else {
		st.policy.Verified(k, accepted)
		s.specSteps.Add(1)
		s.specDraft.Add(int64(k))
		s.specAccepted.Add(int64(accepted))
		s.specEmitted.Add(int64(emitted))
	}
	// Standing: the token fed first and the accepted drafts before the
	// last emitted token (which is fed by the next step).
	keep := w.l0 + emitted
	s.register(st, keep)
	if n := st.seq.Len(); keep < n {
		conv, _ := st.seq.ConvAt(keep)
		if err := st.seq.Rewind(keep, conv); err != nil {
			s.finish(st, FinishError, err)
			return
		}
		s.used.Add(-int64(n - keep))
	}
	if reason != 0 {
		s.end(st, reason)
		return
	}
	st.next = st.output[len(st.output)-1]
}

// end finishes a request whose generation ended (a stop or its length).
// The last token it sampled was never fed, so the block that token
// completes, if any, was never computed; an agent's next turn re-sends
// this prompt, this answer and more, and would recompute that block. So
// when the token completes a block the cache lacks, it is fed first: one
// decode step without logits, 1 request in 64 on average.
func (s *Scheduler) end(st *state, reason FinishReason) {
	if err := s.feedLast(st); err != nil {
		// The answer stands; only the block goes uncached.
		s.log.Debug("caching the answer's last block failed", "id", st.req.ID, "err", err)
	}
	s.finish(st, reason, nil)
}

// feedLast feeds st's last sampled token and caches the block it
// completes, when it completes one that the cache lacks.
func (s *Scheduler) feedLast(st *state) error {
	B := prefix.BlockSize
	L := st.seq.Len()
	b := L / B // the block the token completes
	if s.cache == nil || len(st.output) == 0 || (L+1)%B != 0 ||
		L+1 != len(st.req.Prompt)+len(st.output) || len(st.keys) != b {
		return nil
	}
	s.cacheMu.Lock()
	has := s.cache.Has(s.blockKey(st, b))
	s.cacheMu.Unlock()
	if has {
		return nil
	}
	// The token's position is the last of a page the sequence already
	// holds (its earlier positions opened it), within its reservation.
	last := st.output[len(st.output)-1]
	_, err := s.m.Forward(context.Background(), []*model.Sequence{st.seq}, [][]int{{last}}, model.ForwardOptions{
		SeqLogits: []model.LogitsMode{model.NoLogits}, ChunkSize: 1, ConvSnapshots: [][]int{{L + 1}},
	})
	s.steps.Add(1)
	if err != nil {
		return err
	}
	s.used.Add(1)
	s.register(st, L+1)
	return nil
}

// blockKey is the prefix cache's key of block b of st's sequence: the
// chain key over its token ids after st.keys[b−1], which must be known.
func (s *Scheduler) blockKey(st *state, b int) prefix.Key {
	B := prefix.BlockSize
	ids := make([]int, B)
	for i := range ids {
		ids[i] = st.fedID(b*B + i)
	}
	var parent *prefix.Key
	if b > 0 {
		parent = &st.keys[b-1]
	}
	return prefix.Next(parent, s.cfg.PrefixCache.Identity, st.req.CacheSalt, ids)
}

// register caches the blocks of st's sequence that its first upTo tokens
// complete (docs/serving.md §7), output tokens included (the last one
// through end). A block is the sequence's own page, shared: caching it
// takes no memory, and the pool reclaims it when a sequence needs the
// page and nobody else holds it.
func (s *Scheduler) register(st *state, upTo int) {
	if s.cache == nil {
		return
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	B := prefix.BlockSize
	for b := len(st.keys); (b+1)*B <= upTo; b++ {
		key := s.blockKey(st, b)
		st.keys = append(st.keys, key)
		// A block cached without its drafter context is cached again
		// by a sequence that has it (prefix.Cache.Wants).
		if !s.cache.Wants(key, st.seq.DraftWhole()) {
			continue
		}
		conv, ok := st.seq.ConvAt((b + 1) * B)
		if !ok {
			continue
		}
		if sp, err := st.seq.CopySpan(b*B, (b+1)*B, conv); err == nil {
			s.cache.Insert(key, sp)
		}
	}
	s.mirrorCache()
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

// SaveCache writes the prefix cache to path (prefix.Cache.Save). Call it
// only while Run is not running (after it returned). Without a cache it
// does nothing.
func (s *Scheduler) SaveCache(path string, h prefix.Header) error {
	if s.cache == nil {
		return nil
	}
	return s.cache.Save(path, h)
}

// LoadCache reads a prefix cache saved by SaveCache, within the KV pool,
// and returns the blocks loaded. Call it before Run. A stale or corrupt
// file loads nothing (the error says why; serving can go on cold).
func (s *Scheduler) LoadCache(path string, h prefix.Header) (int, error) {
	if s.cache == nil {
		return 0, nil
	}
	n, err := s.cache.Load(path, h, s.pool, s.cfg.KVPoolTokens)
	s.mirrorCache()
	return n, err
}

// Lease is pages of the scheduler's KV pool reserved for work that runs
// beside the loop on the same model, such as a closed-schema answer's
// branches (engine/api): its sequences take their pages from the pool, so
// that --kv-pool-tokens bounds them and Stats (/metrics) counts them, and
// the reservation keeps them from ever starving an admitted request.
type Lease struct {
	s    *Scheduler
	st   *state
	seqs []*model.Sequence
}

// leaseSink is a waiting Lease's end of the queue.
type leaseSink struct {
	admitted chan struct{} // closed when the pages are reserved
	ended    chan struct{} // closed when it left the queue unadmitted
}

func (*leaseSink) Started(int)                         {}
func (*leaseSink) PromptLogits(int, []float32)         {}
func (*leaseSink) Token(int, []float32, bool) bool     { return true }
func (l *leaseSink) Done(reason FinishReason, _ error) { close(l.ended) }

// Lease reserves pages of the KV pool (kv.PageTokens tokens each) for
// sequences of at most tokens tokens in all, waiting in the queue with the
// requests, first in first out, until they fit. The holder makes its
// sequences with NewSequence (clones of them share the pool) and must
// call Release. Errors: *LimitError ("kv_pool") for more pages than the
// pool holds, ErrQueueFull, ErrClosed, and ctx's error if it ends first.
func (s *Scheduler) Lease(ctx context.Context, tokens, pages int) (*Lease, error) {
	if pages > s.pool.Stats().Pages {
		return nil, &LimitError{What: "kv_pool", Prompt: tokens, N: 1, Limit: s.cfg.KVPoolTokens, Pages: pages, PoolPages: s.pool.Stats().Pages}
	}
	ls := &leaseSink{admitted: make(chan struct{}), ended: make(chan struct{})}
	st := &state{req: &Request{ID: "lease", Sink: ls}, ctx: ctx, next: -1, forked: true, resTokens: tokens, resPages: pages, lease: ls}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, ErrClosed
	case len(s.queue) >= s.cfg.MaxQueue && !s.admissibleNow(st):
		s.mu.Unlock()
		return nil, ErrQueueFull
	}
	s.queue = append(s.queue, st)
	st.stopAfter = context.AfterFunc(ctx, func() { s.cancel(st) })
	s.mu.Unlock()
	s.signal()
	select {
	case <-ls.admitted:
		return &Lease{s: s, st: st}, nil
	case <-ls.ended:
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
}

// NewSequence returns an empty sequence whose pages come from the pool,
// limited to the lease's tokens; Release frees it.
func (l *Lease) NewSequence() *model.Sequence {
	seq := l.s.pool.NewSequence()
	_ = seq.SetMaxContext(min(l.st.resTokens, l.s.m.MaxContext()))
	l.seqs = append(l.seqs, seq)
	return seq
}

// Release frees the lease's sequences and gives its reservation back.
// Clones of them must have been freed (Sequence.Free) first.
func (l *Lease) Release() {
	for _, seq := range l.seqs {
		seq.Free()
	}
	l.seqs = nil
	s := l.s
	s.mu.Lock()
	// After abortAll zeroed the reservations (phase ended), nothing is
	// given back.
	if l.st.phase == running {
		s.reserved -= l.st.resTokens
		s.reservedPages -= l.st.resPages
		s.leased = slices.DeleteFunc(s.leased, func(x *state) bool { return x == l.st })
	}
	l.st.phase = ended
	s.mu.Unlock()
	l.st.stopAfter()
	s.signal()
}

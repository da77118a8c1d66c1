package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/engine/api/client"
)

// Routes the bench sends prompts to.
const (
	routeCompletions = "/v1/completions"
	routeChat        = "/v1/chat/completions"
)

// Run measures the server at o.URL: for each prompt length (or the
// dataset) and each concurrency, one cell of closed-loop streams (each
// stream sends its next request when its last one ended) for o.Warmup
// unmeasured and o.Duration measured, then waits for the requests in
// flight. A cell stops starting requests at its end or after
// o.MaxRequests; every attempt is bounded by o.RequestTimeout.
//
// When ctx is cancelled (Ctrl-C), the requests in flight are cancelled
// and Run returns what it measured, the last cell partial, with
// Interrupted set and ctx's error.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	srv, err := o.models(ctx)
	if err != nil {
		return nil, err
	}
	if err := o.fits(srv.MaxModelLen); err != nil {
		return nil, err
	}
	res := &Result{Server: srv, Settings: Settings{
		Concurrency: o.Concurrency, PromptTokens: o.PromptTokens, Dataset: len(o.Dataset),
		OutputTokens: o.OutputTokens, WarmupSeconds: o.Warmup.Seconds(), DurationSeconds: o.Duration.Seconds(),
		MaxRequests: o.MaxRequests, Seed: o.Seed, Turns: o.Turns, TurnTokens: o.TurnTokens, TurnBaseline: o.TurnBaseline, Exact: o.Exact, Logprobs: o.Logprobs, TopLogprobs: o.TopLogprobs,
		Temperature: o.Temperature, ExtraBody: o.ExtraBody, Routes: o.routes(),
	}}
	if len(o.Dataset) > 0 {
		res.Settings.PromptTokens = nil
	}
	if _, err := o.scrape(ctx); err != nil {
		res.Server.MetricsNote = err.Error()
	} else {
		res.Server.Metrics = true
	}
	prompts := o.PromptTokens
	if len(o.Dataset) > 0 {
		prompts = []int{0}
	}
	cells := len(prompts) * len(o.Concurrency)
	for pi, p := range prompts {
		for ci, c := range o.Concurrency {
			cr := &cellRun{o: &o, srv: &res.Server, index: pi*len(o.Concurrency) + ci, cells: cells, concurrency: c, promptTokens: p}
			cell := cr.run(ctx)
			res.Cells = append(res.Cells, cell)
			if ctx.Err() != nil {
				res.Interrupted = true
				return res, ctx.Err()
			}
		}
	}
	return res, nil
}

// routes lists the routes the run sends to.
func (o *Options) routes() []string {
	if len(o.Dataset) == 0 {
		return []string{routeCompletions}
	}
	seen := map[string]bool{}
	for _, r := range o.Dataset {
		seen[r.route()] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func (r Record) route() string {
	if len(r.Messages) > 0 {
		return routeChat
	}
	return routeCompletions
}

// cellRun is one cell while it runs.
type cellRun struct {
	o            *Options
	srv          *Server
	index, cells int
	concurrency  int
	promptTokens int

	start, measureAt, endAt time.Time

	convs atomic.Int64 // conversations started (multi-turn)

	mu       sync.Mutex
	records  []*record
	sent     Sent
	finished int
	failed   int
	tokens   int64
	phase    string
}

// record is one request of a cell.
type record struct {
	first    time.Time // the first attempt was sent
	answered time.Time // the attempt that was answered was sent
	measured bool
	kind     string // "" for success, "cancelled", or a failure kind
	msg      string
	retries  int
	wait     time.Duration
	// resent counts the times the request was sent again on another
	// connection because the kept-alive one it went out on had been
	// closed by the server (staleConnection).
	resent int
	stream *streamResult
	tokens int // completion tokens (usage, else the stream's events)
	prompt int // prompt tokens (usage)
	cached int // prompt tokens the prefix cache supplied (usage)
	// turn is the request's turn in its conversation (1-based; 0 for a
	// single request), standIn whether the answer before it was re-sent
	// as stand-in ids, promptIDs a turn's prompt, which the next turn
	// re-sends. fresh marks the baseline request sent after turn (a
	// fresh prompt of the turn's new tokens alone; Options.TurnBaseline),
	// which counts only in its turn's FreshTTFT and in Sent.
	turn      int
	standIn   bool
	promptIDs []int
	fresh     bool
}

// conversation is a stream's multi-turn conversation: its number in the
// cell, the turn its next request is, and the ids of its last prompt and
// answer, which the next request re-sends.
type conversation struct {
	n, turn int
	context []int
	standIn bool
}

func (cr *cellRun) run(ctx context.Context) Cell {
	o := cr.o
	cell := Cell{Concurrency: cr.concurrency, PromptTokens: cr.promptTokens, Failures: map[string]int{}}
	cr.sent.ByStatus = map[string]int{}
	var before samples
	if cr.srv.Metrics {
		before, _ = o.settled(ctx)
	}
	cr.start = o.now()
	cr.measureAt = cr.start.Add(o.Warmup)
	cr.endAt = cr.measureAt.Add(o.Duration)
	cr.setPhase("warm-up")
	if o.Warmup == 0 {
		cr.setPhase("measuring")
	}
	var next atomic.Int64
	var stopMu sync.Mutex
	stopAt := cr.endAt // when the count bound or an interrupt stopped new requests
	stop := func(t time.Time) {
		stopMu.Lock()
		if t.Before(stopAt) {
			stopAt = t
		}
		stopMu.Unlock()
	}
	p := pool.New().WithMaxGoroutines(cr.concurrency)
	for range cr.concurrency {
		p.Go(func() {
			var conv *conversation
			for {
				t := o.now()
				if ctx.Err() != nil {
					stop(t)
					return
				}
				if !t.Before(cr.endAt) {
					return
				}
				i := int(next.Add(1) - 1)
				if i >= o.MaxRequests {
					stop(t)
					return
				}
				if !t.Before(cr.measureAt) {
					cr.setPhase("measuring")
				}
				if o.Turns > 1 && conv == nil {
					conv = &conversation{n: int(cr.convs.Add(1) - 1), turn: 1}
				}
				r := cr.request(ctx, i, t, conv, false)
				cr.finish(r)
				if o.TurnBaseline && conv != nil && conv.turn > 1 && r.kind == "" && ctx.Err() == nil {
					cr.finish(cr.request(ctx, i, o.now(), conv, true))
				}
				conv = cr.next(conv, r)
			}
		})
	}
	drain := time.AfterFunc(max(time.Until(cr.endAt), 0), func() { cr.setPhase("draining") })
	p.Wait()
	drain.Stop()
	end := o.now()
	cell.Complete = ctx.Err() == nil
	windowEnd := stopAt
	if !cell.Complete && end.Before(windowEnd) {
		windowEnd = end
	}
	cell.WindowSeconds = max(windowEnd.Sub(cr.measureAt).Seconds(), 0)
	cell.ElapsedSeconds = end.Sub(cr.start).Seconds()
	cr.summarize(&cell, windowEnd)
	if cr.srv.Metrics && cell.Complete {
		if after, err := o.settled(ctx); err == nil && before != nil {
			cell.ServerMetrics = delta(before, after)
			cell.ServerCounts = serverView(cell.ServerMetrics)
		}
	}
	return cell
}

func (cr *cellRun) setPhase(ph string) {
	cr.mu.Lock()
	changed := cr.phase != ph
	cr.phase = ph
	cr.mu.Unlock()
	if changed {
		cr.progress()
	}
}

// finish files a request's record.
func (cr *cellRun) finish(r *record) {
	cr.mu.Lock()
	cr.records = append(cr.records, r)
	if r.kind != "cancelled" {
		cr.finished++
		if r.kind != "" {
			cr.failed++
		} else {
			cr.tokens += int64(r.tokens)
		}
	}
	cr.mu.Unlock()
	cr.progress()
}

func (cr *cellRun) progress() {
	if cr.o.Progress == nil {
		return
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.o.Progress(Progress{Cell: cr.index + 1, Cells: cr.cells, Concurrency: cr.concurrency, PromptTokens: cr.promptTokens,
		Phase: cr.phase, Elapsed: cr.o.now().Sub(cr.start), Requests: cr.finished, Failed: cr.failed, Tokens: cr.tokens})
}

// body builds request i's JSON body and route. Random prompts depend on
// the seed, the cell and i only, so a rerun sends the same ids, and no
// two requests of a run share a prompt (a prefix cache would otherwise
// answer a repeated one faster than a new one).
func (cr *cellRun) body(i int, turnIDs []int) ([]byte, string) {
	o := cr.o
	m := map[string]any{"model": cr.srv.Model, "max_tokens": o.OutputTokens, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "temperature": o.Temperature}
	switch o.Exact {
	case ExactBoth:
		m["min_tokens"], m["ignore_eos"] = o.OutputTokens, true
	case ExactMinTokens:
		m["min_tokens"] = o.OutputTokens
	case ExactIgnoreEOS:
		m["ignore_eos"] = true
	}
	route := routeCompletions
	if len(o.Dataset) > 0 {
		rec := o.Dataset[(cr.index*o.MaxRequests+i)%len(o.Dataset)]
		route = rec.route()
		if route == routeChat {
			m["messages"] = rec.Messages
		} else {
			m["prompt"] = rec.Prompt
		}
	} else if turnIDs != nil {
		// A turn of a conversation; its answer's ids make the next
		// turn's context.
		m["prompt"] = turnIDs
		m["return_token_ids"] = true
	} else {
		rng := rand.New(rand.NewPCG(o.Seed, uint64(cr.index)<<40|uint64(i)))
		m["prompt"] = randomIDs(rng, cr.promptTokens, cr.srv.Vocab)
	}
	if o.Logprobs {
		if route == routeChat {
			m["logprobs"] = true
			if o.TopLogprobs > 0 {
				m["top_logprobs"] = o.TopLogprobs
			}
		} else {
			// The legacy completions field is the number of
			// alternatives; 0 still returns the sampled token's.
			m["logprobs"] = o.TopLogprobs
		}
	}
	for k, v := range o.ExtraBody {
		m[k] = v
	}
	data, _ := json.Marshal(m) // maps of plain values and raw JSON always marshal
	return data, route
}

func randomIDs(rng *rand.Rand, n, vocab int) []int {
	ids := make([]int, n)
	for j := range ids {
		ids[j] = rng.IntN(vocab)
	}
	return ids
}

// turnPrompt is the prompt of conv's next request: a first turn's
// PromptTokens random ids, or the conversation so far and TurnTokens new
// ones. The new ids depend on the seed, the cell, the conversation and
// the turn only.
func (cr *cellRun) turnPrompt(conv *conversation) []int {
	o := cr.o
	rng := rand.New(rand.NewPCG(o.Seed^turnSeed, uint64(cr.index)<<40|uint64(conv.n)<<12|uint64(conv.turn)))
	if conv.turn == 1 {
		return randomIDs(rng, cr.promptTokens, cr.srv.Vocab)
	}
	return append(slices.Clip(conv.context), randomIDs(rng, o.TurnTokens, cr.srv.Vocab)...)
}

// freshPrompt is the baseline prompt sent after conv's current turn:
// TurnTokens random ids of their own (no conversation shares them, so no
// prefix cache holds them), depending on the seed, the cell, the
// conversation and the turn only.
func (cr *cellRun) freshPrompt(conv *conversation) []int {
	o := cr.o
	rng := rand.New(rand.NewPCG(o.Seed^turnSeed^2, uint64(cr.index)<<40|uint64(conv.n)<<12|uint64(conv.turn)))
	return randomIDs(rng, o.TurnTokens, cr.srv.Vocab)
}

// turnSeed sets multi-turn prompts' generator apart from single ones'.
const turnSeed = 0x7475726e

// next is the conversation a stream goes on with after request r of
// conv: its next turn, carrying r's prompt and answer, or nil (a new one)
// after its last turn or a request that failed.
func (cr *cellRun) next(conv *conversation, r *record) *conversation {
	if conv == nil || r.kind != "" || conv.turn >= cr.o.Turns {
		return nil
	}
	answer := r.stream.IDs
	standIn := len(answer) != r.tokens
	if standIn {
		// The server did not return the answer's ids: seeded ids of its
		// length keep the context growing as the conversation's would.
		rng := rand.New(rand.NewPCG(cr.o.Seed^turnSeed^1, uint64(cr.index)<<40|uint64(conv.n)<<12|uint64(conv.turn)))
		answer = randomIDs(rng, r.tokens, cr.srv.Vocab)
	}
	return &conversation{n: conv.n, turn: conv.turn + 1, context: append(r.promptIDs, answer...), standIn: standIn}
}

// request sends request i, retrying after 429 (and 503 other than a
// shutdown) while the server's Retry-After ends before the cell does, and
// sending it again at once when it went out on a kept-alive connection
// the server had closed (a stale connection: the bench's own connection
// reuse, not the server's failure).
//
// With fresh, it is the baseline request after conv's current turn
// (freshPrompt) instead of the turn itself.
func (cr *cellRun) request(ctx context.Context, i int, first time.Time, conv *conversation, fresh bool) *record {
	o := cr.o
	r := &record{first: first, measured: !first.Before(cr.measureAt)}
	switch {
	case fresh:
		r.turn, r.fresh = conv.turn, true
		r.promptIDs = cr.freshPrompt(conv)
	case conv != nil:
		r.turn, r.standIn = conv.turn, conv.standIn
		r.promptIDs = cr.turnPrompt(conv)
	}
	body, route := cr.body(i, r.promptIDs)
	for attempt := 0; ; attempt++ {
		r.answered = o.now()
		status, ra, retry, stale := cr.attempt(ctx, route, body, r)
		if stale && r.resent < cr.maxResend() {
			// Not an attempt the server saw: Sent counts it apart, and
			// the request is timed from the attempt that was answered.
			r.resent++
			cr.mu.Lock()
			cr.sent.Resent++
			cr.mu.Unlock()
			attempt--
			continue
		}
		cr.mu.Lock()
		cr.sent.Attempts++
		key := "none"
		if status > 0 {
			key = strconv.Itoa(status)
		}
		cr.sent.ByStatus[key]++
		if r.stream != nil && status == http.StatusOK {
			cr.sent.TokenEvents += int64(r.stream.tokens())
			if u := r.stream.Usage; u != nil {
				cr.sent.PromptTokens += int64(u.PromptTokens)
				cr.sent.CompletionTokens += int64(u.CompletionTokens)
				cr.sent.CachedPromptTokens += int64(cached(u))
			} else {
				cr.sent.NoUsage++
			}
		}
		cr.mu.Unlock()
		if !retry {
			return r
		}
		now := o.now()
		// At least 10 ms, so that "Retry-After: 0" is not a busy loop.
		wait := max(client.RetryAfter(ra, now), 10*time.Millisecond)
		switch {
		case attempt >= o.MaxRetries:
			r.msg += fmt.Sprintf(" (after %d retries)", attempt)
			return r
		case now.Add(wait).After(cr.endAt):
			r.msg += fmt.Sprintf(" (Retry-After %s ends after the cell)", wait)
			return r
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			r.kind = "cancelled"
			return r
		case <-t.C:
		}
		r.retries++
		r.wait += wait
	}
}

// maxResend bounds the times one request is sent again after a stale
// connection. Each such failure takes one dead connection out of the
// client's pool, which keeps at most concurrency+2 idle ones per host
// (check sets it so), so a request that fails more often than that fails
// on connections the pool did not keep: the server's failure.
func (cr *cellRun) maxResend() int { return cr.concurrency + 2 }

// connTrace watches one attempt's connections: how many it took (the
// transport itself sends a request again, on a new connection, when it
// failed before a byte of it was written to a reused one), whether the
// last was reused from the idle pool, and whether any byte of an answer
// came back.
type connTrace struct {
	conns, reused, answered atomic.Int32
}

func (ct *connTrace) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			ct.conns.Add(1)
			r := int32(0)
			if info.Reused {
				r = 1
			}
			ct.reused.Store(r)
		},
		GotFirstResponseByte: func() { ct.answered.Store(1) },
	}
}

// attempt sends one HTTP request and fills r from its answer. It returns
// the status (0 for none), the Retry-After header, whether the answer
// asks to retry, and whether the request failed on a stale connection:
// one reused from the idle pool that broke before any byte of an answer
// came back, which is what a server that closes idle kept-alive
// connections does to a request sent just as it closed one.
func (cr *cellRun) attempt(ctx context.Context, route string, body []byte, r *record) (status int, ra string, retry, stale bool) {
	o := cr.o
	r.kind, r.msg, r.stream = "", "", nil
	actx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	defer cancel()
	var ct connTrace
	actx = httptrace.WithClientTrace(actx, ct.trace())
	defer func() {
		// Connections the transport replaced on its own, before writing
		// anything on them, are stale connections too.
		if n := int(ct.conns.Load()) - 1; n > 0 {
			r.resent += n
			cr.mu.Lock()
			cr.sent.Resent += n
			cr.mu.Unlock()
		}
	}()
	fail := func(kind, msg string) { r.kind, r.msg = kind, clip(msg) }
	ended := func(err error) bool {
		switch {
		case ctx.Err() != nil:
			r.kind = "cancelled"
		case errors.Is(actx.Err(), context.DeadlineExceeded):
			fail("timeout", fmt.Sprintf("no end of the answer within %s", o.RequestTimeout))
		default:
			return false
		}
		return true
	}
	sent := r.answered
	resp, err := o.api().Send(actx, client.Request{Method: http.MethodPost, Path: route, Body: body, Accept: "text/event-stream"})
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && ce.Status == 0:
		if ended(err) {
			return 0, "", false, false
		}
		fail("connect", ce.Err.Error())
		return 0, "", false, ct.reused.Load() == 1 && ct.answered.Load() == 0
	case errors.As(err, &ce):
		fail("http_"+strconv.Itoa(ce.Status), answerMessage(ce))
		return ce.Status, ce.RetryAfter, ce.Busy(), false
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		fail("not_streamed", fmt.Sprintf("answered %q, not an event stream", ct))
		return resp.StatusCode, "", false, false
	}
	st, err := readStream(resp.Body, func() time.Duration { return o.now().Sub(sent) })
	r.stream = st
	var se *StreamError
	switch {
	case err != nil && ended(err):
	case errors.As(err, &se):
		fail("bad_stream", se.Error())
	case err != nil:
		fail("disconnect", "the stream broke: "+err.Error())
	case st.ServerError != "":
		fail("stream_error", st.ServerError)
	case !st.Done && st.Finish == "":
		fail("disconnect", "the stream ended without a finish_reason or data: [DONE]")
	}
	if r.kind != "" {
		return resp.StatusCode, "", false, false
	}
	r.tokens = st.tokens()
	if st.Usage != nil {
		r.tokens, r.prompt, r.cached = st.Usage.CompletionTokens, st.Usage.PromptTokens, cached(st.Usage)
	}
	switch {
	case r.tokens < o.OutputTokens:
		fail("short", fmt.Sprintf("%d tokens of the %d asked for (finish_reason %q)", r.tokens, o.OutputTokens, st.Finish))
	case r.tokens > o.OutputTokens:
		fail("long", fmt.Sprintf("%d tokens, %d asked for", r.tokens, o.OutputTokens))
	}
	return resp.StatusCode, "", false, false
}

// summarize computes the cell's figures from its records; windowEnd is
// when the measured window closed.
func (cr *cellRun) summarize(cell *Cell, windowEnd time.Time) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cell.Sent = cr.sent
	var ttft, itl, lat, speed []float64
	var windowTokens int64
	promptSum := 0
	for _, r := range cr.records {
		if r.kind == "" {
			// Every successful request's tokens that arrived in the
			// window count, warm-up requests' too: the window's
			// throughput is what the server delivered in it. Tokens the
			// usage counts beyond the events arrived with the last one.
			extra := r.tokens - r.stream.tokens()
			for k, e := range r.stream.Events {
				at := r.answered.Add(e.At)
				n := e.Tokens
				if k == len(r.stream.Events)-1 {
					n += extra
				}
				if !at.Before(cr.measureAt) && at.Before(windowEnd) {
					windowTokens += int64(n)
				}
			}
		}
		if !r.measured || r.kind == "cancelled" {
			continue
		}
		cell.Retries += r.retries
		cell.RetryWaitSeconds += r.wait.Seconds()
		cell.Resent += r.resent
		if r.fresh && r.kind == "" {
			continue // counted in its turn's FreshTTFT only
		}
		if r.kind != "" {
			cell.Failures[r.kind]++
			if cell.FailureSamples == nil {
				cell.FailureSamples = map[string]string{}
			}
			if _, ok := cell.FailureSamples[r.kind]; !ok {
				cell.FailureSamples[r.kind] = r.msg
			}
			continue
		}
		cell.Requests++
		promptSum += r.prompt
		ev := r.stream.Events
		lat = append(lat, r.stream.End.Seconds())
		if len(ev) == 0 {
			continue
		}
		ttft = append(ttft, ev[0].At.Seconds())
		for k := 1; k < len(ev); k++ {
			gap := (ev[k].At - ev[k-1].At).Seconds() / float64(ev[k].Tokens)
			for range ev[k].Tokens {
				itl = append(itl, gap)
			}
		}
		if span := (ev[len(ev)-1].At - ev[0].At).Seconds(); r.tokens > 1 && span > 0 {
			speed = append(speed, float64(r.tokens-1)/span)
		}
	}
	if cell.Requests > 0 {
		cell.PromptTokensMean = float64(promptSum) / float64(cell.Requests)
	}
	if cell.WindowSeconds > 0 {
		cell.OutputTokensPerSecond = float64(windowTokens) / cell.WindowSeconds
	}
	cell.TTFT, cell.ITL, cell.Latency, cell.StreamTokensPerSecond = Summarize(ttft), Summarize(itl), Summarize(lat), Summarize(speed)
	if cr.o.Turns > 1 {
		cell.Turns = cr.turns()
	}
}

// turns breaks the successful measured requests down by turn: one Turn
// for each turn 1..Turns, empty ones included (a window too short for a
// conversation to reach it). Called with cr.mu held.
func (cr *cellRun) turns() []Turn {
	out := make([]Turn, cr.o.Turns)
	ttft, fresh := make([][]float64, cr.o.Turns), make([][]float64, cr.o.Turns)
	prompt, cached := make([]int, cr.o.Turns), make([]int, cr.o.Turns)
	for _, r := range cr.records {
		if !r.measured || r.kind != "" || r.turn < 1 || r.turn > cr.o.Turns {
			continue
		}
		k := r.turn - 1
		if r.fresh {
			out[k].FreshRequests++
			if ev := r.stream.Events; len(ev) > 0 {
				fresh[k] = append(fresh[k], ev[0].At.Seconds())
			}
			continue
		}
		out[k].Requests++
		prompt[k] += r.prompt
		cached[k] += r.cached
		if r.standIn {
			out[k].StandIn++
		}
		if ev := r.stream.Events; len(ev) > 0 {
			ttft[k] = append(ttft[k], ev[0].At.Seconds())
		}
	}
	for k := range out {
		out[k].Turn = k + 1
		if n := out[k].Requests; n > 0 {
			out[k].PromptTokensMean = float64(prompt[k]) / float64(n)
			out[k].CachedTokensMean = float64(cached[k]) / float64(n)
		}
		out[k].TTFT = Summarize(ttft[k])
		if cr.o.TurnBaseline && k > 0 {
			d := Summarize(fresh[k])
			out[k].FreshTTFT = &d
		}
	}
	return out
}

// fits refuses, before anything is sent, a run whose requests the server
// would refuse for its context (max_model_len, 0: unknown): a prompt plus
// --output-tokens, or a conversation's last turn (the first prompt, then
// each earlier turn's answer and --turn-tokens new ids, plus its answer).
func (o *Options) fits(maxLen int) error {
	if maxLen <= 0 {
		return nil
	}
	if len(o.Dataset) > 0 {
		return nil // text or messages: their tokens are the server's to count
	}
	for _, p := range o.PromptTokens {
		need := p + o.OutputTokens
		if o.Turns > 1 {
			need += (o.Turns - 1) * (o.OutputTokens + o.TurnTokens)
			if need > maxLen {
				return &OptionsError{"turns", fmt.Sprintf("%d turns of --prompt-tokens %d, then --output-tokens %d and --turn-tokens %d a turn, reach %d tokens by the last answer, beyond the server's max_model_len %d: give fewer turns or tokens",
					o.Turns, p, o.OutputTokens, o.TurnTokens, need, maxLen)}
			}
			continue
		}
		if need > maxLen {
			return &OptionsError{"prompt-tokens", fmt.Sprintf("%d + --output-tokens %d = %d tokens, beyond the server's max_model_len %d", p, o.OutputTokens, need, maxLen)}
		}
	}
	return nil
}

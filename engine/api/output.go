package api

import (
	"strings"
	"sync"
	"time"

	"github.com/lfmq/lfmq/engine/parser"
	"github.com/lfmq/lfmq/engine/sched"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

// piece is what one sampled token turned into, in order: text released by
// it (after UTF-8 and stop-string hold-back), then a marker recognised by
// its id.
type piece struct {
	id     int
	text   string
	marker parser.Marker // 0: none
	stopID bool          // a stop id: counted, never shown
	logits []float32     // kept only when log-probs are asked for
}

// vocabInfo is what the output side needs to know of the vocabulary.
type vocabInfo struct {
	tok     *tokenizer.Tokenizer
	markers map[int]parser.Marker // marker token ids
	special map[int]bool          // other special ids, dropped from text by default
	// reasoning: the vocabulary has <think> and </think> as tokens.
	reasoning bool
	thinkID   int
}

func newVocabInfo(tok *tokenizer.Tokenizer) *vocabInfo {
	v := &vocabInfo{tok: tok, markers: map[int]parser.Marker{}, special: map[int]bool{}, thinkID: -1}
	for _, m := range []parser.Marker{parser.ThinkStart, parser.ThinkEnd, parser.ToolCallStart, parser.ToolCallEnd} {
		if id, ok := tok.TokenID(m.String()); ok {
			v.markers[id] = m
		}
	}
	for _, t := range tok.SpecialTokens() {
		if _, ok := v.markers[t.ID]; !ok {
			v.special[t.ID] = true
		}
	}
	start, ok1 := tok.TokenID(parser.ThinkStart.String())
	_, ok2 := tok.TokenID(parser.ThinkEnd.String())
	v.reasoning = ok1 && ok2
	if ok1 {
		v.thinkID = start
	}
	return v
}

// output is a request's sched.Sink: it runs in the scheduler's goroutine
// and does only the cheap, order-dependent part of the output pipeline of
// docs/serving.md §9 (stop ids, marker ids, UTF-8 decoding, stop
// strings); the handler's goroutine takes the pieces and runs the parser,
// log-probs and the wire format, so a slow client never slows a step.
type output struct {
	v           *vocabInfo
	dec         *tokenizer.StreamDecoder
	stop        *parser.StopMatcher // nil without stop strings
	skipSpecial bool
	minTokens   int
	keepLogits  bool
	obs         *requestObserver

	n       int  // tokens received, stop ids included
	stopped bool // a stop string completed

	mu         sync.Mutex
	cached     int // prompt tokens resumed from the prefix cache
	pieces     []piece
	promptRows [][]float32 // prompt logits per chunk, in order
	done       bool
	reason     sched.FinishReason
	err        error
	notify     chan struct{}
}

func newOutput(v *vocabInfo, stops []string, skipSpecial bool, minTokens int, keepLogits bool, obs *requestObserver) *output {
	o := &output{v: v, dec: v.tok.NewStreamDecoder(), skipSpecial: skipSpecial, minTokens: minTokens, keepLogits: keepLogits, obs: obs, notify: make(chan struct{}, 1)}
	if len(stops) > 0 {
		o.stop = parser.NewStopMatcher(stops)
	}
	return o
}

func (o *output) wake() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

func (o *output) push(p piece) {
	o.mu.Lock()
	o.pieces = append(o.pieces, p)
	o.mu.Unlock()
	o.wake()
}

// Started implements sched.Sink.
func (o *output) Started(cached int) {
	o.mu.Lock()
	o.cached = cached
	o.mu.Unlock()
}

// PromptLogits implements sched.Sink.
func (o *output) PromptLogits(from int, logits []float32) {
	o.mu.Lock()
	o.promptRows = append(o.promptRows, logits)
	o.mu.Unlock()
	o.wake()
}

// Token implements sched.Sink.
func (o *output) Token(id int, logits []float32, stopID bool) bool {
	o.n++
	o.obs.token()
	p := piece{id: id, stopID: stopID}
	if o.keepLogits {
		// A stop id's distribution is kept too: it was sampled, and
		// /v1/completions lists it among the generated tokens' log-probs
		// as OpenAI and vLLM do (lm-evaluation-harness drops the last
		// entry as the generated token's).
		p.logits = logits
	}
	if stopID {
		o.push(p)
		return false
	}
	if m, ok := o.v.markers[id]; ok {
		// A stop string cannot span a marker: what is held back is
		// released before it.
		p.text = o.text(o.dec.Flush())
		if !o.stopped && o.stop != nil {
			p.text += o.stop.Flush()
		}
		if !o.stopped {
			p.marker = m
		}
	} else {
		var s string
		if o.v.special[id] {
			s = o.dec.Flush()
			if !o.skipSpecial {
				raw, _ := o.v.tok.TokenBytes(id)
				s += raw
			}
		} else {
			s, _ = o.dec.Add(id) // ids come from the model's vocabulary
		}
		p.text = o.text(s)
	}
	o.push(p)
	return o.stopped
}

// text passes decoded text through the stop-string matcher. Before
// min_tokens nothing but max tokens may end generation, so the matcher
// only sees text from then on (a stop string straddling that boundary is
// not matched, as in vLLM).
func (o *output) text(s string) string {
	if s == "" || o.stopped {
		return ""
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if o.stop == nil || o.n < o.minTokens {
		return s
	}
	emit, stopped := o.stop.Add(s)
	o.stopped = stopped
	return emit
}

// Done implements sched.Sink.
func (o *output) Done(reason sched.FinishReason, err error) {
	var tail string
	if !o.stopped {
		tail = o.text(o.dec.Flush())
		if !o.stopped && o.stop != nil {
			tail += o.stop.Flush()
		}
	}
	o.mu.Lock()
	if tail != "" {
		o.pieces = append(o.pieces, piece{id: -1, text: tail})
	}
	o.done, o.reason, o.err = true, reason, err
	o.mu.Unlock()
	o.obs.done(reason)
	o.wake()
}

// batch is what the handler takes from an output at once.
type batch struct {
	pieces     []piece
	promptRows [][]float32
	done       bool
	reason     sched.FinishReason
	err        error
	cached     int
}

func (o *output) take() batch {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := batch{pieces: o.pieces, promptRows: o.promptRows, done: o.done, reason: o.reason, err: o.err, cached: o.cached}
	o.pieces, o.promptRows = nil, nil
	return b
}

// requestObserver measures one request for /metrics: time to first token
// and the gaps between tokens.
type requestObserver struct {
	m     *metrics
	start time.Time
	last  time.Time
}

func (r *requestObserver) token() {
	if r == nil {
		return
	}
	now := time.Now()
	if r.last.IsZero() {
		r.m.ttft.Observe(now.Sub(r.start).Seconds())
	} else {
		r.m.itl.Observe(now.Sub(r.last).Seconds())
	}
	r.last = now
	r.m.generationTokens.Inc()
}

func (r *requestObserver) done(reason sched.FinishReason) {
	if r == nil {
		return
	}
	if reason == sched.FinishCancelled {
		r.m.cancellations.Inc()
	}
}

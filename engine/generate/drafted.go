package generate

import (
	"context"
	"time"

	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

// DraftStats is what a drafter did for one generation (lfmq generate
// --stats).
type DraftStats struct {
	// Passes are the drafter's passes; Steps the verify steps that carried
	// its drafts, Tokens the drafts verified, Accepted those kept, Emitted
	// the tokens those steps emitted.
	Passes, Steps, Tokens, Accepted, Emitted int64
	// PassSeconds is the time the passes took, ContextSeconds the time
	// spent computing the drafter's context.
	PassSeconds, ContextSeconds float64
}

// runDrafted generates through the server's scheduler (engine/sched),
// which verifies the drafter's drafts exactly: the tokens are those of
// Run's own loop, fewer steps apart.
func (s *Session) runDrafted(ctx context.Context, prompt []int, opts Options, p sample.Params) (*Result, error) {
	maxTok := min(opts.MaxTokens, s.Model.MaxContext()-len(prompt))
	if opts.DraftCosts == nil && opts.DraftDepth == 0 {
		// One sequence's verify steps, timed before the prompt runs.
		t, err := sched.MeasureDraftCosts(ctx, s.Model, opts.Drafter, 1)
		if err != nil {
			return nil, err
		}
		opts.DraftCosts = t
	}
	sc, err := sched.New(s.Model, sched.Config{MaxNumSeqs: 1, Drafter: opts.Drafter, DraftCosts: opts.DraftCosts,
		DraftDepth: opts.DraftDepth, Speculation: sched.SpecConfig{Off: true}, PrefixCache: sched.PrefixConfig{Off: true},
		MaxModelLen: len(prompt) + maxTok})
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { sc.Run(runCtx); close(ran) }()
	defer func() { stop(); <-ran }()
	res := &Result{PromptTokens: len(prompt)}
	sink := &streamSink{dec: s.Tokenizer.NewStreamDecoder(), onText: opts.OnText, res: res, start: time.Now(), done: make(chan struct{})}
	if err := sc.Submit(ctx, &sched.Request{Prompt: prompt, MaxTokens: maxTok, Params: p, Sink: sink}); err != nil {
		return nil, err
	}
	<-sink.done
	if sink.err != nil {
		return nil, sink.err
	}
	if sink.reason == sched.FinishCancelled {
		return nil, ctx.Err()
	}
	if rest := sink.dec.Flush(); rest != "" && opts.OnText != nil {
		opts.OnText(rest)
	}
	res.DecodeTime = time.Since(sink.first)
	res.ContextFilled = !res.Stopped && len(res.Tokens) < opts.MaxTokens
	st := sc.Stats()
	res.Draft = &DraftStats{Passes: st.DraftPasses, Steps: st.DraftSteps, Tokens: st.DraftTokens, Accepted: st.DraftAccepted, Emitted: st.DraftEmitted,
		PassSeconds: st.DraftPassSeconds, ContextSeconds: st.DraftContextSeconds}
	return res, nil
}

// streamSink is a sched.Sink that streams the text as Run does.
type streamSink struct {
	dec          *tokenizer.StreamDecoder
	onText       func(string)
	res          *Result
	start, first time.Time
	reason       sched.FinishReason
	err          error
	done         chan struct{}
}

func (k *streamSink) Started(int)                 {}
func (k *streamSink) PromptLogits(int, []float32) {}

func (k *streamSink) Token(id int, _ []float32, stopID bool) bool {
	if k.first.IsZero() {
		k.first = time.Now()
		k.res.PrefillTime = k.first.Sub(k.start)
	}
	if stopID {
		k.res.Stopped = true
		return true
	}
	k.res.Tokens = append(k.res.Tokens, id)
	if text, err := k.dec.Add(id); err == nil && text != "" && k.onText != nil {
		k.onText(text)
	}
	return false
}

func (k *streamSink) Done(reason sched.FinishReason, err error) {
	k.reason, k.err = reason, err
	close(k.done)
}

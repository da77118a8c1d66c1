package api

import (
	"context"
	"math"
	"net/http"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
)

// job is one validated request, ready for the scheduler.
type job struct {
	id           string
	created      int64
	prompt       []int
	params       sample.Params
	maxTokens    int
	logprobs     bool // per-token log-probs of the output
	topLogprobs  int
	promptLogits bool
	cacheSalt    string
	out          *output
	// outs are the request's candidates' outputs (OpenAI's n): outs[0]
	// is out; all share out's notify channel, so one handler waits on
	// them together. Candidate i samples with seed
	// sched.CandidateSeed(params.Seed, i) (docs/serving.md §5).
	outs []*output
}

func newUsage(prompt, completion, cached int) *wire.Usage {
	return &wire.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion, PromptTokensDetails: &wire.PromptTokensDetails{CachedTokens: cached}}
}

// wait delivers the output's batches to each until the request ends or
// ctx (the client's connection) does.
func wait(ctx context.Context, o *output, each func(b batch) error) error {
	return waitAll(ctx, []*output{o}, func(_ int, b batch) error { return each(b) })
}

// waitAll delivers the batches of a request's candidates' outputs, which
// share outs[0]'s notify channel, to each with the candidate's index,
// until every candidate has ended or ctx (the client's connection) does.
// A candidate's batches arrive in order; after its last (done) batch it
// gets no more.
func waitAll(ctx context.Context, outs []*output, each func(i int, b batch) error) error {
	ended := make([]bool, len(outs))
	left := len(outs)
	for {
		select {
		case <-outs[0].notify:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i, o := range outs {
			if ended[i] {
				continue
			}
			b := o.take()
			if b.done && b.reason == sched.FinishCancelled && ctx.Err() != nil {
				// The scheduler cancelled the request because the client
				// went away (Submit ties it to ctx), and its end can
				// arrive before ctx.Done is seen: that is not the
				// shutdown a cancelled end otherwise means, and there is
				// no one to answer.
				return ctx.Err()
			}
			if err := each(i, b); err != nil {
				return err
			}
			if b.done {
				ended[i] = true
				left--
			}
		}
		if left == 0 {
			return nil
		}
	}
}

// endError is the API error for a request that ended without finishing:
// the scheduler was aborted (shutdown) or the engine failed.
func endError(reason sched.FinishReason, err error) *Error {
	switch reason {
	case sched.FinishCancelled:
		return &Error{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "shutting_down", Message: "the request was cancelled: the server is shutting down"}
	case sched.FinishError:
		msg := "the engine failed"
		if err != nil {
			msg += ": " + err.Error()
		}
		return &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: msg}
	}
	return nil
}

// logprobValue writes −∞ as −9999.0 (docs/serving.md §5).
func logprobValue(x float32) float64 {
	if math.IsInf(float64(x), -1) || x < -9999 {
		return -9999.0
	}
	return float64(x)
}

// topN returns the n ids of lp with the highest values, highest first,
// ties to the lower id.
func topN(lp []float32, n int) []int {
	if n <= 0 {
		return nil
	}
	top := make([]int, 0, n+1)
	for id, x := range lp {
		if len(top) == n && x <= lp[top[n-1]] {
			continue
		}
		i := len(top)
		for i > 0 && x > lp[top[i-1]] {
			i--
		}
		top = append(top, 0)
		copy(top[i+1:], top[i:])
		top[i] = id
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}

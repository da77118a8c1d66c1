package task

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/evidence"
)

// Options configure Evaluate.
type Options struct {
	Kind  Kind
	Items []Item
	// Client asks the server (GSM8K; a choice task scored over HTTP
	// through Scorer uses its own).
	Client *Client
	// Scorer scores choice items (Choice).
	Scorer Scorer
	// MaxTokens bounds each answer's new tokens (0: the server's bound).
	MaxTokens int
	Sampling  Sampling
	// Seed is sent with every request when set.
	Seed *uint64
	// Concurrency is the number of items in flight (at least 1).
	Concurrency int
	// Progress, when set, is called after each item with the items done
	// (one call at a time).
	Progress func(done, total int)
}

// ItemError is an item that got no answer.
type ItemError struct {
	Item string
	Err  error
}

func (e *ItemError) Error() string { return fmt.Sprintf("item %s: %v", e.Item, e.Err) }
func (e *ItemError) Unwrap() error { return e.Err }

// Evaluate asks every item, at most Concurrency at a time, and returns the run:
// items in dataset order whatever order they finished in, and the summary.
// The first item that fails stops the run.
func Evaluate(ctx context.Context, o Options) (*Run, error) {
	start := time.Now()
	results := make([]ItemResult, len(o.Items))
	p := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(max(o.Concurrency, 1))
	done := make(chan struct{}, len(o.Items))
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		for n := 1; n <= len(o.Items); n++ {
			if _, ok := <-done; !ok {
				return
			}
			if o.Progress != nil {
				o.Progress(n, len(o.Items))
			}
		}
	}()
	for i, it := range o.Items {
		p.Go(func(ctx context.Context) error {
			r, err := o.item(ctx, it)
			if err != nil {
				return &ItemError{Item: it.ID, Err: err}
			}
			results[i] = r
			done <- struct{}{}
			return nil
		})
	}
	err := p.Wait()
	close(done)
	<-progressDone
	if err != nil {
		return nil, err
	}
	return &Run{Seed: o.Seed, Items: results, Summary: Summarize(results, time.Since(start).Seconds())}, nil
}

// item asks one item.
func (o Options) item(ctx context.Context, it Item) (ItemResult, error) {
	switch o.Kind {
	case GSM8K:
		reasoning, text, finish, pt, gen, err := o.Client.Chat(ctx, it.Question, o.MaxTokens, o.Sampling, o.Seed)
		if err != nil {
			return ItemResult{}, err
		}
		r := ItemResult{ID: it.ID, Prompt: it.Question, Reasoning: reasoning, Text: text, Gold: it.Gold,
			PromptTokens: pt, GeneratedTokens: gen, FinishReason: finish, Truncated: finish == "length"}
		if a, rule, ok := Extract(text); ok {
			r.Answer, r.Rule, r.Correct = a, rule, a == it.Gold
		}
		return r, nil
	case Choice:
		if o.Scorer == nil {
			return ItemResult{}, fmt.Errorf("task: no scorer for the choice task")
		}
		sc, err := o.Scorer.Score(ctx, it.Context, it.Choices)
		if err != nil {
			return ItemResult{}, err
		}
		best := 0
		for j, x := range sc.Scores {
			if x > sc.Scores[best] {
				best = j
			}
		}
		r := ItemResult{ID: it.ID, Prompt: it.Context, Text: it.Choices[best], Answer: strconv.Itoa(best),
			Gold: strconv.Itoa(it.Label), Correct: best == it.Label, PromptTokens: sc.ContextTokens, GeneratedTokens: 0}
		for _, x := range sc.Scores {
			r.Scores = append(r.Scores, evidence.Float(x))
		}
		return r, nil
	}
	return ItemResult{}, fmt.Errorf("task: unknown task %q", o.Kind)
}

// LongestPrompt asks the server for the prompt tokens of every GSM8K item,
// at most concurrency at a time, before any item runs, and returns the
// longest: its item's id and its tokens. A prompt the server refuses
// is an ItemError.
func LongestPrompt(ctx context.Context, c *Client, items []Item, concurrency int) (id string, tokens int, err error) {
	counts := make([]int, len(items))
	p := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(max(concurrency, 1))
	for i, it := range items {
		p.Go(func(ctx context.Context) error {
			n, err := c.PromptTokens(ctx, it.Question)
			if err != nil {
				return &ItemError{Item: it.ID, Err: err}
			}
			counts[i] = n
			return nil
		})
	}
	if err := p.Wait(); err != nil {
		return "", 0, err
	}
	for i, n := range counts {
		if i == 0 || n > tokens {
			id, tokens = items[i].ID, n
		}
	}
	return id, tokens, nil
}

package task

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/lfmq/lfmq/engine/choice"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

// ChoiceScores are a choice item's scores.
type ChoiceScores struct {
	// Scores[j] is the log-likelihood of choice j after the context.
	Scores []float64
	// ContextTokens is the context's length in tokens.
	ContextTokens int
}

// Scorer scores the choices of an item by likelihood.
type Scorer interface {
	Score(ctx context.Context, context string, choices []string) (ChoiceScores, error)
}

// EncodeChoice returns the token ids of an item's context and of one of
// its choices, as lm-evaluation-harness splits them: whitespace at the
// end of the context moves to the start of the choice (so "Answer: " +
// "B" scores the token " B"), the context is encoded with BOS and the
// choice on its own, both as ordinary text.
func EncodeChoice(tok *tokenizer.Tokenizer, context, choice string) (ctx, cont []int) {
	trimmed := strings.TrimRightFunc(context, unicode.IsSpace)
	ctx = tok.Encode(trimmed, tokenizer.EncodeOptions{AddBOS: true})
	cont = tok.EncodeOrdinary(context[len(trimmed):] + choice)
	return ctx, cont
}

// errEmptyContext: a context with no tokens (no BOS either) has no
// position to score the first choice token from.
var errEmptyContext = errors.New("task: the context encodes to no tokens")

// EngineScorer scores in process: the context is prefilled once and each
// choice runs from its own fork of that state (engine/choice), as
// closed-schema answers are scored.
type EngineScorer struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
}

// Score implements Scorer.
func (e *EngineScorer) Score(ctx context.Context, context string, choices []string) (ChoiceScores, error) {
	var prompt []int
	conts := make([][]int, len(choices))
	for j, c := range choices {
		prompt, conts[j] = EncodeChoice(e.Tokenizer, context, c)
		if len(conts[j]) == 0 {
			return ChoiceScores{}, fmt.Errorf("task: choice %d encodes to no tokens", j)
		}
	}
	if len(prompt) == 0 {
		return ChoiceScores{}, errEmptyContext
	}
	shared := e.Model.NewSequence()
	out, err := e.Model.Forward(ctx, []*model.Sequence{shared}, [][]int{prompt}, model.ForwardOptions{})
	if err != nil {
		return ChoiceScores{}, err
	}
	scores, err := choice.Continuations(ctx, e.Model, shared, out[0], conts)
	if err != nil {
		return ChoiceScores{}, err
	}
	return ChoiceScores{Scores: scores, ContextTokens: len(prompt)}, nil
}

// CompletionsScorer scores over HTTP: each choice is one /v1/completions
// request of context and choice token ids with echo and logprobs, the
// request lm-evaluation-harness's local-completions sends, and the
// choice's score is the sum of its tokens' log-probs.
type CompletionsScorer struct {
	Client    *Client
	Tokenizer *tokenizer.Tokenizer
}

// Score implements Scorer.
func (c *CompletionsScorer) Score(ctx context.Context, context string, choices []string) (ChoiceScores, error) {
	if c.Tokenizer == nil {
		return ChoiceScores{}, errNoTokenizer
	}
	out := ChoiceScores{Scores: make([]float64, len(choices))}
	for j, ch := range choices {
		prompt, cont := EncodeChoice(c.Tokenizer, context, ch)
		if len(prompt) == 0 {
			return ChoiceScores{}, errEmptyContext
		}
		if len(cont) == 0 {
			return ChoiceScores{}, fmt.Errorf("task: choice %d encodes to no tokens", j)
		}
		lp, err := c.Client.PromptLogprobs(ctx, append(prompt, cont...))
		if err != nil {
			return ChoiceScores{}, err
		}
		// lp[k] is the log-prob of token k+1; the choice's tokens are
		// len(prompt) … len(prompt)+len(cont)−1.
		score := 0.0
		for _, x := range lp[len(prompt)-1:] {
			score += x
		}
		out.Scores[j], out.ContextTokens = score, len(prompt)
	}
	return out, nil
}

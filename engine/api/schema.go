package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/choice"
	"github.com/lfmq/lfmq/engine/sched"
)

// schemaPlan is a closed-schema chat request (docs/serving.md §10): the
// shared prompt, which ends with the opening brace, and every candidate's branch.
type schemaPlan struct {
	schema   *choice.Schema
	prompt   []int
	branches [][][]int
}

// schemaJob completes a closed-schema request's plan: the rendered prompt
// plus the opening brace, and the branches.
func (s *Server) schemaJob(e *engineState, req *wire.ChatRequest, sch *choice.Schema, rendered []int) (*chatJob, *Error) {
	// The answer is scored, not sampled, so the sampling fields do not
	// shape it; they are still checked as for any chat request, so that
	// n > 1 is never answered with one choice and a value refused with
	// another response_format is refused here too.
	if _, aerr := samplingParams(&req.Sampling, s.opts.Defaults, e.vocabSize, e.Session.StopIDs); aerr != nil {
		return nil, aerr
	}
	if _, aerr := stopStrings(req.Stop); aerr != nil {
		return nil, aerr
	}
	if req.N != nil && *req.N != 1 {
		return nil, unsupported("n", "n = %d: a closed-schema answer is scored, not sampled, so every candidate would be the same; send n = 1", *req.N)
	}
	field, given := "max_tokens", req.MaxTokens
	if req.MaxCompletionTokens != nil {
		field, given = "max_completion_tokens", req.MaxCompletionTokens
	}
	if given != nil && *given < 1 {
		return nil, badRequest(field, "%s = %d; must be at least 1", field, *given)
	}
	tok := e.Session.Tokenizer
	prompt := append(append([]int(nil), rendered...), tok.EncodeOrdinary(choice.Open)...)
	branches := sch.Encode(tok)
	longest := 0
	for _, f := range branches {
		for _, b := range f {
			longest = max(longest, len(b))
		}
	}
	if n := len(prompt) + longest; n > e.maxLen {
		return nil, contextExceeded("this model's maximum context length is %d tokens; the prompt (%d tokens) and the longest field (%d) need %d", e.maxLen, len(prompt), longest, n)
	}
	cj := &chatJob{job: &job{id: newID("chatcmpl-"), created: time.Now().Unix(), prompt: prompt}, stream: req.Stream,
		returnTokenIDs: req.ReturnTokenIDs, schema: &schemaPlan{schema: sch, prompt: prompt, branches: branches}}
	if req.StreamOptions != nil {
		cj.includeUsage = req.StreamOptions.IncludeUsage
	}
	return cj, nil
}

// answerSchema scores a closed-schema plan and writes the answer. It runs
// beside the scheduler, on the same model (Forward is safe on distinct
// sequences), at most --max-num-seqs at a time, on pages of the server's
// KV pool that it leases from the scheduler (waiting in its queue), so
// that --kv-pool-tokens bounds them and /metrics counts them.
func (s *Server) answerSchema(ctx context.Context, w http.ResponseWriter, e *engineState, cj *chatJob) {
	select {
	case e.scoring <- struct{}{}:
		defer func() { <-e.scoring }()
	case <-ctx.Done():
		return
	}
	p := cj.schema
	tokens, pages := choice.Reservation(len(p.prompt), p.branches)
	lease, err := e.Sched.Lease(ctx, tokens, pages)
	if err != nil {
		if ctx.Err() == nil {
			aerr := s.submitError(err)
			if le := (*sched.LimitError)(nil); errors.As(err, &le) {
				aerr.Param = "response_format" // the schema's branches are what does not fit
			}
			aerr.write(w)
		}
		return
	}
	defer lease.Release()
	s.metrics.promptTokens.Add(float64(len(p.prompt)))
	a, err := p.schema.ScoreOn(ctx, e.Session.Model, lease.NewSequence(), p.prompt, p.branches)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		(&Error{Status: http.StatusInternalServerError, Type: typeServer, Message: err.Error()}).write(w)
		return
	}
	s.metrics.generationTokens.Add(float64(a.BranchTokens))
	lp := &wire.ChatLogprobs{Content: []wire.Logprob{}}
	for i, f := range p.schema.Fields {
		fs := wire.FieldScores{Field: f.Name, Value: f.Values[a.Chosen[i]], Logprob: a.Scores[i][a.Chosen[i]]}
		for j, v := range f.Values {
			fs.Candidates = append(fs.Candidates, wire.CandidateScore{Value: v, Logprob: a.Scores[i][j]})
		}
		lp.Fields = append(lp.Fields, fs)
	}
	u := newUsage(len(p.prompt), a.BranchTokens, 0)
	text := a.Text
	if !cj.stream {
		resp := wire.ChatResponse{ID: cj.id, Object: "chat.completion", Created: cj.created, Model: s.opts.ServedModelName,
			Choices: []wire.ChatChoice{{Message: wire.ChatMessage{Role: "assistant", Content: &text}, Logprobs: lp, FinishReason: "stop"}}, Usage: u}
		if cj.returnTokenIDs {
			resp.PromptTokenIDs = p.prompt
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	out := &sse{w: w}
	chunk := func(d wire.Delta, finish *string, lp *wire.ChatLogprobs) wire.ChatChunk {
		ch := wire.ChatChunk{ID: cj.id, Object: "chat.completion.chunk", Created: cj.created, Model: s.opts.ServedModelName,
			Choices: []wire.ChunkChoice{{Delta: d, FinishReason: finish, Logprobs: lp}}}
		if cj.includeUsage {
			ch.Usage = jsonNull
		}
		return ch
	}
	empty, stop := "", "stop"
	role := chunk(wire.Delta{Role: "assistant", Content: &empty}, nil, nil)
	if cj.returnTokenIDs {
		role.PromptTokenIDs = p.prompt // as the non-streamed answer has them
	}
	for _, ch := range []wire.ChatChunk{role, chunk(wire.Delta{Content: &text}, nil, lp), chunk(wire.Delta{}, &stop, nil)} {
		if out.send(marshal(ch)) != nil {
			return
		}
	}
	if cj.includeUsage {
		if out.send(marshal(wire.ChatChunk{ID: cj.id, Object: "chat.completion.chunk", Created: cj.created, Model: s.opts.ServedModelName, Choices: []wire.ChunkChoice{}, Usage: u})) != nil {
			return
		}
	}
	out.done()
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/choice"
	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/parser"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
)

// chatJob is a validated chat request.
type chatJob struct {
	*job
	parser           parser.Options
	stream           bool
	includeUsage     bool
	includeReasoning bool
	parallelCalls    bool
	returnTokenIDs   bool
	// schema is set for a closed-schema answer, which is scored, not
	// generated (job is then nil).
	schema *schemaPlan
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	handle(s, w, r, "/v1/chat/completions", chatFields, func(e *engineState, req *wire.ChatRequest, start time.Time) (*chatJob, *job, *Error) {
		cj, aerr := s.chatJob(e, req, start)
		if aerr != nil {
			return nil, nil, aerr
		}
		if cj.schema != nil {
			return cj, nil, nil // scored, not queued for generation
		}
		return cj, cj.job, nil
	}, func(ctx context.Context, w http.ResponseWriter, e *engineState, cj *chatJob) {
		if cj.schema != nil {
			s.answerSchema(ctx, w, e, cj)
			return
		}
		if cj.stream {
			s.streamChat(ctx, w, cj)
		} else {
			s.collectChat(ctx, w, cj)
		}
	})
}

// handle is the shape both generation routes share: readiness, the body
// decoded into a request of type R, validated into an answer plan A and
// its job, the job submitted, then the answer written.
func handle[R, A any](s *Server, w http.ResponseWriter, r *http.Request, route string, known map[string]bool,
	build func(*engineState, *R, time.Time) (A, *job, *Error), answer func(context.Context, http.ResponseWriter, *engineState, A)) {
	start := time.Now()
	e := s.ready(w)
	if e == nil {
		return
	}
	var req R
	ignored, aerr := decodeBody(w, r, &req, known)
	if aerr != nil {
		aerr.write(w)
		return
	}
	if len(ignored) > 0 {
		s.log.Debug("ignored request fields", "route", route, "fields", ignored)
	}
	plan, j, aerr := build(e, &req, start)
	if aerr == nil && j != nil {
		aerr = s.submit(r.Context(), e, j)
	}
	if aerr != nil {
		aerr.write(w)
		return
	}
	answer(r.Context(), w, e, plan)
}

// chatJob validates a chat request and renders its prompt.
func (s *Server) chatJob(e *engineState, req *wire.ChatRequest, start time.Time) (*chatJob, *Error) {
	if err := s.checkModel(req.Model); err != nil {
		return nil, err
	}
	if req.StreamOptions != nil && !req.Stream {
		return nil, badRequest("stream_options", "stream_options needs stream: true")
	}
	if isNull(req.Messages) {
		if !isNull(req.Prompt) {
			return nil, badRequest("messages", "messages is required; prompt is a field of POST /v1/completions")
		}
		return nil, badRequest("messages", "messages is required")
	}
	msgs, err := chat.ParseMessages(req.Messages)
	if err != nil {
		return nil, requestError(err)
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages", "messages is empty")
	}
	// The checks generate --chat makes: a known role, and something said.
	if err := chat.CheckConversation(msgs); err != nil {
		return nil, requestError(err)
	}
	var tools []any
	if !isNull(req.Tools) {
		if tools, err = chat.ParseTools(req.Tools); err != nil {
			return nil, requestError(err)
		}
		if len(tools) > maxTools {
			return nil, badRequest("tools", "%d tools; at most %d", len(tools), maxTools)
		}
	}
	choice, aerr := parseToolChoice(req.ToolChoice, len(tools) > 0)
	if aerr != nil {
		return nil, aerr
	}
	if choice == toolsNone {
		tools = nil
	}
	schema, aerr := responseFormat(req.ResponseFormat)
	if aerr != nil {
		return nil, aerr
	}
	if schema != nil {
		if len(tools) > 0 {
			return nil, unsupported("tools", "tools and a json_schema response_format exclude each other")
		}
		msgs = schema.WithInstruction(msgs)
	}
	if req.TopLogprobs != nil {
		switch n := *req.TopLogprobs; {
		case !req.Logprobs:
			return nil, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		case n < 0 || n > maxTopLogprobs:
			return nil, badRequest("top_logprobs", "top_logprobs = %d is outside [0, %d]", n, maxTopLogprobs)
		}
	}
	kw, aerr := kwargs(req.ChatTemplateKwargs)
	if aerr != nil {
		return nil, aerr
	}
	if !e.renderCall {
		historyToolCalls(msgs)
	}
	// Assistant turns are the model's own earlier output sent back: their
	// special-token strings (</think>, tool-call markers) are rendered as
	// control tokens; user, system and tool text never is.
	prompt, err := e.Session.EncodeChatRequest(chat.Request{Messages: msgs, Tools: tools, AddGenerationPrompt: true, Kwargs: kw}, chat.TrustAssistant())
	if err != nil {
		if errors.Is(err, generate.ErrNoTemplate) {
			return nil, badRequest("messages", "this model has no chat template; use /v1/completions with a plain prompt")
		}
		if aerr := requestError(err); aerr != nil {
			return nil, aerr
		}
		return nil, &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: err.Error()}
	}
	if schema != nil {
		return s.schemaJob(e, req, schema, prompt)
	}
	field, given := "max_tokens", req.MaxTokens
	if req.MaxCompletionTokens != nil {
		field, given = "max_completion_tokens", req.MaxCompletionTokens
	}
	maxTok, aerr := maxNewTokens(field, given, s.opts.Defaults.MaxNewTokens, len(prompt), e.maxLen, false)
	if aerr != nil {
		return nil, aerr
	}
	j, aerr := s.newJob(e, "chatcmpl-", prompt, maxTok, &req.Sampling, start)
	if aerr != nil {
		return nil, aerr
	}
	j.logprobs = req.Logprobs
	if req.TopLogprobs != nil {
		j.topLogprobs = *req.TopLogprobs
	}
	j.setKeepLogits(j.logprobs)
	cj := &chatJob{job: j, stream: req.Stream, includeReasoning: req.IncludeReasoning == nil || *req.IncludeReasoning,
		parallelCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls, returnTokenIDs: req.ReturnTokenIDs,
		parser: parser.Options{Reasoning: e.vocab.reasoning, Tools: len(tools) > 0,
			StartInReasoning: e.vocab.reasoning && prompt[len(prompt)-1] == e.vocab.thinkID}}
	if req.StreamOptions != nil {
		cj.includeUsage = req.StreamOptions.IncludeUsage
	}
	return cj, nil
}

// newJob builds the parts of a job that chat and completions share.
func (s *Server) newJob(e *engineState, prefix string, prompt []int, maxTok int, f *wire.Sampling, start time.Time) (*job, *Error) {
	params, aerr := samplingParams(f, s.opts.Defaults, e.vocabSize, e.Session.StopIDs)
	if aerr != nil {
		return nil, aerr
	}
	if params.MinTokens > maxTok && maxTok > 0 {
		return nil, badRequest("min_tokens", "min_tokens = %d is more than the %d tokens the request may generate", params.MinTokens, maxTok)
	}
	stops, aerr := stopStrings(f.Stop)
	if aerr != nil {
		return nil, aerr
	}
	n, aerr := candidates(e, f.N)
	if aerr != nil {
		return nil, aerr
	}
	skip := f.SkipSpecialTokens == nil || *f.SkipSpecialTokens
	j := &job{id: newID(prefix), created: time.Now().Unix(), prompt: prompt, params: params, maxTokens: maxTok, cacheSalt: f.CacheSalt}
	for i := range n {
		o := newOutput(e.vocab, stops, skip, params.MinTokens, false, &requestObserver{m: s.metrics, start: start})
		if i > 0 {
			o.notify = j.out.notify
		} else {
			j.out = o
		}
		j.outs = append(j.outs, o)
	}
	return j, nil
}

// candidates reads n: 1 if absent, else at least 1 and at most the
// sequences the scheduler runs at once (--max-num-seqs), since every
// candidate is a sequence of its own.
func candidates(e *engineState, n *int) (int, *Error) {
	if n == nil {
		return 1, nil
	}
	limit := e.Sched.Config().MaxNumSeqs
	switch {
	case *n < 1:
		return 0, badRequest("n", "n = %d; must be at least 1", *n)
	case *n > limit:
		return 0, badRequest("n", "n = %d; at most %d (--max-num-seqs: every candidate is a sequence of its own)", *n, limit)
	}
	return *n, nil
}

// setKeepLogits keeps the logits of every candidate's tokens (log-probs).
func (j *job) setKeepLogits(keep bool) {
	for _, o := range j.outs {
		o.keepLogits = keep
	}
}

// responseFormat accepts "text", and "json_schema" with a flat closed
// schema (docs/serving.md §10), which it returns; anything else is a 400
// naming what is not supported.
func responseFormat(raw []byte) (*choice.Schema, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, badRequest("response_format", "response_format must be an object with a type")
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_schema":
		if rf.JSONSchema == nil || isNull(rf.JSONSchema.Schema) {
			return nil, badRequest("response_format", "response_format json_schema needs json_schema.schema")
		}
		sch, err := choice.Parse(rf.JSONSchema.Schema)
		if err != nil {
			var ue *choice.UnsupportedError
			if errors.As(err, &ue) {
				return nil, unsupported("response_format", "json_schema.schema.%s: %s; this server answers flat closed objects (every property required, additionalProperties false) of booleans and string enums", ue.Path, ue.Msg)
			}
			return nil, badRequest("response_format", "%v", err)
		}
		return sch, nil
	}
	return nil, unsupported("response_format", "response_format type %q is not supported; use \"text\" or \"json_schema\" with a closed schema", rf.Type)
}

// chatState runs a chat answer's pieces through the parser: the same code
// for streaming and non-streaming answers.
type chatState struct {
	cj        *chatJob
	e         *engineState
	p         *parser.Parser
	tokens    int   // completion tokens, stop ids included
	ids       []int // generated ids (stop ids excluded)
	calls     int
	streamed  int // tool calls sent in a stream
	scratch   []float32
	pendingLP []wire.Logprob
	sentIDs   int // ids already streamed (return_token_ids)
}

// feed turns pieces into parser events (and log-prob entries); finish
// ends the parse (the request finished normally).
func (c *chatState) feed(pieces []piece, finish bool) []parser.Event {
	var evs []parser.Event
	for _, pc := range pieces {
		if pc.id >= 0 {
			c.tokens++
		}
		if pc.stopID {
			continue
		}
		if pc.id >= 0 {
			c.ids = append(c.ids, pc.id)
		}
		if pc.logits != nil {
			c.pendingLP = append(c.pendingLP, c.logprob(pc.id, pc.logits))
		}
		if pc.text != "" {
			evs = append(evs, c.p.Text(pc.text)...)
		}
		if pc.marker != 0 {
			evs = append(evs, c.p.Marker(pc.marker)...)
		}
	}
	if finish {
		evs = append(evs, c.p.Finish()...)
	}
	// Filter what the request does not want.
	out := evs[:0]
	for _, ev := range evs {
		switch {
		case ev.Kind == parser.KindReasoning && !c.cj.includeReasoning:
		case ev.Kind == parser.KindToolCall && !c.cj.parallelCalls && c.calls > 0:
		default:
			if ev.Kind == parser.KindToolCall {
				c.calls++
			}
			out = append(out, ev)
		}
	}
	return out
}

// logprob builds the log-prob entry of a sampled token. The whole row is
// formed only when alternatives are asked for.
func (c *chatState) logprob(id int, logits []float32) wire.Logprob {
	var own float32
	if c.cj.topLogprobs > 0 {
		c.scratch = sample.LogProbs(c.scratch, logits)
		own = c.scratch[id]
	} else {
		own = sample.LogProb(logits, id)
	}
	tok := c.e.Session.Tokenizer
	entry := func(id int) (string, []int) {
		s, _ := tok.TokenBytes(id)
		b := make([]int, len(s))
		for i := range len(s) {
			b[i] = int(s[i])
		}
		return s, b
	}
	t, bs := entry(id)
	le := wire.Logprob{Token: t, Logprob: logprobValue(own), Bytes: bs, TopLogprobs: []wire.TopLogprob{}}
	for _, tid := range topN(c.scratch, c.cj.topLogprobs) {
		t, bs := entry(tid)
		le.TopLogprobs = append(le.TopLogprobs, wire.TopLogprob{Token: t, Logprob: logprobValue(c.scratch[tid]), Bytes: bs})
	}
	return le
}

// finishedNormally reports a batch that ends a request that was not
// cut off (its parse may be finished).
func finishedNormally(b batch) bool {
	return b.done && b.reason != sched.FinishCancelled && b.reason != sched.FinishError
}

// finishReason is docs/serving.md §5's rule.
func (c *chatState) finishReason(r sched.FinishReason) string {
	switch {
	case r == sched.FinishLength:
		return "length"
	case c.calls > 0:
		return "tool_calls"
	}
	return "stop"
}

func (c *chatState) toolCall(ev parser.Event, index int, streaming bool) wire.ToolCall {
	tc := wire.ToolCall{ID: newID("chatcmpl-tool-"), Type: "function", Function: wire.Function{Name: ev.Call.Name, Arguments: ev.Call.Arguments}}
	if streaming {
		tc.Index = &index
	}
	return tc
}

func (s *Server) collectChat(ctx context.Context, w http.ResponseWriter, cj *chatJob) {
	e := s.engine.Load()
	// One answer per candidate (n), each through its own parser.
	type answer struct {
		c                  *chatState
		content, reasoning []byte
		calls              []wire.ToolCall
		last               batch
	}
	as := make([]*answer, len(cj.outs))
	for i := range as {
		as[i] = &answer{c: &chatState{cj: cj, e: e, p: parser.New(cj.parser)}}
	}
	err := waitAll(ctx, cj.outs, func(i int, b batch) error {
		a := as[i]
		for _, ev := range a.c.feed(b.pieces, finishedNormally(b)) {
			switch ev.Kind {
			case parser.KindContent:
				a.content = append(a.content, ev.Text...)
			case parser.KindReasoning:
				a.reasoning = append(a.reasoning, ev.Text...)
			case parser.KindToolCall:
				a.calls = append(a.calls, a.c.toolCall(ev, len(a.calls), false))
			}
		}
		a.last = b
		return nil
	})
	if err != nil {
		return // the client went away; the scheduler frees the request
	}
	resp := wire.ChatResponse{ID: cj.id, Object: "chat.completion", Created: cj.created, Model: s.opts.ServedModelName}
	tokens := 0
	for i, a := range as {
		if aerr := endError(a.last.reason, a.last.err); aerr != nil {
			aerr.write(w)
			return
		}
		msg := wire.ChatMessage{Role: "assistant", ReasoningContent: string(a.reasoning), Reasoning: string(a.reasoning), ToolCalls: a.calls}
		if len(a.content) > 0 || len(a.calls) == 0 {
			s := string(a.content)
			msg.Content = &s
		}
		choice := wire.ChatChoice{Index: i, Message: msg, FinishReason: a.c.finishReason(a.last.reason)}
		if cj.logprobs {
			choice.Logprobs = &wire.ChatLogprobs{Content: append([]wire.Logprob{}, a.c.pendingLP...)}
		}
		if cj.returnTokenIDs {
			choice.TokenIDs = append([]int{}, a.c.ids...)
		}
		resp.Choices = append(resp.Choices, choice)
		tokens += a.c.tokens
	}
	// The prompt is counted once: the candidates share it.
	resp.Usage = newUsage(len(cj.prompt), tokens, as[0].last.cached)
	if cj.returnTokenIDs {
		resp.PromptTokenIDs = cj.prompt
	}
	writeJSON(w, http.StatusOK, resp)
}

var jsonNull = rawNull{}

// rawNull marshals as null (a present usage field with no value).
type rawNull struct{}

func (rawNull) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

func (s *Server) streamChat(ctx context.Context, w http.ResponseWriter, cj *chatJob) {
	e := s.engine.Load()
	cs := make([]*chatState, len(cj.outs))
	for i := range cs {
		cs[i] = &chatState{cj: cj, e: e, p: parser.New(cj.parser)}
	}
	out := &sse{w: w}
	// A chunk carries one candidate's choice, by its index (OpenAI's and
	// vLLM's n > 1 streams).
	chunk := func(i int, d wire.Delta, finish *string) wire.ChatChunk {
		c := cs[i]
		ch := wire.ChatChunk{ID: cj.id, Object: "chat.completion.chunk", Created: cj.created, Model: s.opts.ServedModelName,
			Choices: []wire.ChunkChoice{{Index: i, Delta: d, FinishReason: finish}}}
		if cj.includeUsage {
			ch.Usage = jsonNull
		}
		if cj.logprobs && len(c.pendingLP) > 0 {
			ch.Choices[0].Logprobs = &wire.ChatLogprobs{Content: c.pendingLP}
			c.pendingLP = nil
		}
		if cj.returnTokenIDs {
			if d.Role != "" {
				ch.PromptTokenIDs = cj.prompt
			}
			ch.Choices[0].TokenIDs = c.ids[c.sentIDs:]
			c.sentIDs = len(c.ids)
		}
		return ch
	}
	empty := ""
	for i := range cs {
		if out.send(marshal(chunk(i, wire.Delta{Role: "assistant", Content: &empty}, nil))) != nil {
			return
		}
	}
	// One event per token (or fewer: held text waits for a later token),
	// as a step produces them, so that a stream's chunks depend only on
	// the tokens, never on how fast the client reads.
	send := func(i int, evs []parser.Event) error {
		c := cs[i]
		for k := 0; k < len(evs); {
			ev := evs[k]
			var d wire.Delta
			if ev.Kind == parser.KindToolCall {
				d.ToolCalls = []wire.ToolCall{c.toolCall(ev, c.streamed, true)}
				c.streamed++
				k++
			} else {
				text := ""
				for ; k < len(evs) && evs[k].Kind == ev.Kind; k++ {
					text += evs[k].Text
				}
				if ev.Kind == parser.KindReasoning {
					d.ReasoningContent, d.Reasoning = text, text
				} else {
					d.Content = &text
				}
			}
			if err := out.send(marshal(chunk(i, d, nil))); err != nil {
				return err
			}
		}
		return nil
	}
	left, cached := len(cs), 0
	waitAll(ctx, cj.outs, func(i int, b batch) error {
		c := cs[i]
		for _, pc := range b.pieces {
			if err := send(i, c.feed([]piece{pc}, false)); err != nil {
				return err
			}
		}
		if !b.done {
			return nil
		}
		if aerr := endError(b.reason, b.err); aerr != nil {
			return failStream(out, aerr)
		}
		if err := send(i, c.feed(nil, true)); err != nil {
			return err
		}
		fr := c.finishReason(b.reason)
		if err := out.send(marshal(chunk(i, wire.Delta{}, &fr))); err != nil {
			return err
		}
		if i == 0 {
			cached = b.cached
		}
		if left--; left > 0 {
			return nil
		}
		if cj.includeUsage {
			tokens := 0
			for _, c := range cs {
				tokens += c.tokens
			}
			u := wire.ChatChunk{ID: cj.id, Object: "chat.completion.chunk", Created: cj.created, Model: s.opts.ServedModelName,
				Choices: []wire.ChunkChoice{}, Usage: newUsage(len(cj.prompt), tokens, cached)}
			if err := out.send(marshal(u)); err != nil {
				return err
			}
		}
		return out.done()
	})
}

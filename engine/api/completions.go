package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lfmq/lfmq/engine/api/wire"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
)

// defaultCompletionTokens is /v1/completions' max_tokens when neither the
// request nor the server sets one (OpenAI's and vLLM's 16).
const defaultCompletionTokens = 16

// completionJob is a validated completions request.
type completionJob struct {
	*job
	echoText       string
	echo           bool
	logprobs       *int // top-N per generated token (and prompt token with echo)
	promptLogprobs *int // vLLM prompt_logprobs: top-N, or −1 for every row as float32
	stream         bool
	includeUsage   bool
	skipSpecial    bool
	returnTokenIDs bool
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	handle(s, w, r, "/v1/completions", completionFields, func(e *engineState, req *wire.CompletionRequest, start time.Time) (*completionJob, *job, *Error) {
		cj, aerr := s.completionJob(e, req, start)
		if aerr != nil {
			return nil, nil, aerr
		}
		return cj, cj.job, nil
	}, func(ctx context.Context, w http.ResponseWriter, e *engineState, cj *completionJob) {
		if cj.stream {
			s.streamCompletion(ctx, w, e, cj)
		} else {
			s.collectCompletion(ctx, w, e, cj)
		}
	})
}

// promptIDs reads "prompt": a string, an array of token ids, or a
// one-element array of either. Several prompts per request are not served.
func promptIDs(e *engineState, raw json.RawMessage) (ids []int, text string, isText bool, aerr *Error) {
	if isNull(raw) {
		return nil, "", false, badRequest("prompt", "prompt is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return nil, "", false, badRequest("prompt", "prompt is empty")
		}
		return e.Session.EncodeText(s), s, true, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, "", false, badRequest("prompt", "prompt must be a string or an array of token ids")
	}
	if len(list) == 1 {
		var inner string
		if json.Unmarshal(list[0], &inner) == nil || bytes.HasPrefix(bytes.TrimSpace(list[0]), []byte("[")) {
			return promptIDs(e, list[0])
		}
	}
	if len(list) == 0 {
		return nil, "", false, badRequest("prompt", "prompt is empty")
	}
	ids = make([]int, len(list))
	for i, item := range list {
		var id int
		if err := json.Unmarshal(item, &id); err != nil {
			if len(list) > 1 && (bytes.HasPrefix(bytes.TrimSpace(item), []byte(`"`)) || bytes.HasPrefix(bytes.TrimSpace(item), []byte("["))) {
				return nil, "", false, unsupported("prompt", "one prompt per request: send the prompts as separate requests")
			}
			return nil, "", false, badRequest("prompt", "prompt[%d] is not a token id", i)
		}
		if id < 0 || id >= e.vocabSize {
			return nil, "", false, badRequest("prompt", "prompt[%d] = %d is outside the vocabulary [0, %d)", i, id, e.vocabSize)
		}
		ids[i] = id
	}
	return ids, "", false, nil
}

func (s *Server) completionJob(e *engineState, req *wire.CompletionRequest, start time.Time) (*completionJob, *Error) {
	if err := s.checkModel(req.Model); err != nil {
		return nil, err
	}
	if req.StreamOptions != nil && !req.Stream {
		return nil, badRequest("stream_options", "stream_options needs stream: true")
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return nil, unsupported("suffix", "suffix (fill-in-the-middle) is not supported")
	}
	if req.BestOf != nil {
		n := 1
		if req.N != nil {
			n = *req.N
		}
		switch b := *req.BestOf; {
		case b < n:
			return nil, badRequest("best_of", "best_of = %d; must be at least n (%d)", b, n)
		case b > n:
			return nil, unsupported("best_of", "best_of = %d: only best_of = n (%d) is supported", b, n)
		}
	}
	if req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxTopLogprobs) {
		return nil, badRequest("logprobs", "logprobs = %d is outside [0, %d]", *req.Logprobs, maxTopLogprobs)
	}
	if req.PromptLogprobs != nil && (*req.PromptLogprobs < -1 || *req.PromptLogprobs > maxTopLogprobs) {
		return nil, badRequest("prompt_logprobs", "prompt_logprobs = %d; use -1 (every row, as float32) or 0 to %d", *req.PromptLogprobs, maxTopLogprobs)
	}
	if req.PromptLogprobs != nil && *req.PromptLogprobs == -1 && req.Stream {
		return nil, unsupported("prompt_logprobs", "prompt_logprobs = -1 is not streamed; send stream: false")
	}
	if isNull(req.Prompt) && !isNull(req.Messages) {
		return nil, badRequest("prompt", "prompt is required; messages is a field of POST /v1/chat/completions")
	}
	prompt, text, isText, aerr := promptIDs(e, req.Prompt)
	if aerr != nil {
		return nil, aerr
	}
	def := s.opts.Defaults.MaxNewTokens
	if def == nil {
		d := defaultCompletionTokens
		def = &d
	}
	allowZero := req.Echo || req.PromptLogprobs != nil
	maxTok, aerr := maxNewTokens("max_tokens", req.MaxTokens, def, len(prompt), e.maxLen, allowZero)
	if aerr != nil {
		aerr.Param = "max_tokens"
		if aerr.Code == "context_length_exceeded" {
			aerr.Param = "prompt"
		}
		return nil, aerr
	}
	j, aerr := s.newJob(e, "cmpl-", prompt, maxTok, &req.Sampling, start)
	if aerr != nil {
		return nil, aerr
	}
	cj := &completionJob{job: j, echo: req.Echo, logprobs: req.Logprobs, promptLogprobs: req.PromptLogprobs, stream: req.Stream,
		skipSpecial: req.SkipSpecialTokens == nil || *req.SkipSpecialTokens, returnTokenIDs: req.ReturnTokenIDs}
	if req.StreamOptions != nil {
		cj.includeUsage = req.StreamOptions.IncludeUsage
	}
	j.promptLogits = req.PromptLogprobs != nil || (req.Echo && req.Logprobs != nil)
	j.setKeepLogits(req.Logprobs != nil)
	if len(j.outs) > 1 && j.promptLogits {
		if req.PromptLogprobs != nil {
			return nil, unsupported("prompt_logprobs", "prompt_logprobs with n = %d is not supported; send n = 1", len(j.outs))
		}
		return nil, unsupported("echo", "echo with logprobs and n = %d is not supported; send n = 1", len(j.outs))
	}
	if req.Echo {
		if isText {
			cj.echoText = text
		} else {
			cj.echoText = s.decodeIDs(e, prompt, cj.skipSpecial)
		}
	}
	return cj, nil
}

// decodeIDs decodes ids as text, without special tokens when skip.
func (s *Server) decodeIDs(e *engineState, ids []int, skip bool) string {
	var b strings.Builder
	dec := e.Session.Tokenizer.NewStreamDecoder()
	for _, id := range ids {
		_, isMarker := e.vocab.markers[id]
		if skip && (e.vocab.special[id] || isMarker) {
			b.WriteString(dec.Flush())
			continue
		}
		t, _ := dec.Add(id)
		b.WriteString(t)
	}
	b.WriteString(dec.Flush())
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// f32Mark is the placeholder of prompt_logprobs_f32 that marks where the
// float32 rows go in a response written in pieces. Only integers and the
// usage object follow the field, so the last occurrence of the placeholder
// is the field's value even if the echoed text contains the same
// characters.
const f32Mark = `"LFMQ_F32_ROWS"`

// completionState assembles a completion from an output's batches.
type completionState struct {
	cj     *completionJob
	e      *engineState
	tokens int
	ids    []int
	text   strings.Builder
	lp     *wire.CompletionLogprobs
	// offset is the next entry's text_offset: the code points of the
	// choice's text before it (OpenAI's and vLLM's unit, Python string
	// indices), and partial the bytes of a character the entries so far
	// left incomplete (it counts at the token that completes it).
	offset  int
	partial []byte
	rows    [][]float32 // prompt logits, per chunk
	scratch []float32
}

func (c *completionState) feed(b batch) string {
	c.rows = append(c.rows, b.promptRows...)
	var out strings.Builder
	for _, pc := range b.pieces {
		if pc.id >= 0 {
			c.tokens++
		}
		if pc.stopID {
			// Counted and listed with its log-prob, never shown.
			if pc.logits != nil {
				c.addLogprob(pc.id, pc.logits, false)
			}
			continue
		}
		if pc.id >= 0 {
			c.ids = append(c.ids, pc.id)
			if pc.logits != nil {
				_, marker := c.e.vocab.markers[pc.id]
				c.addLogprob(pc.id, pc.logits, !c.cj.skipSpecial || !(c.e.vocab.special[pc.id] || marker))
			}
		}
		out.WriteString(pc.text)
		if pc.marker != 0 && !c.cj.skipSpecial {
			out.WriteString(pc.marker.String())
		}
	}
	c.text.WriteString(out.String())
	return out.String()
}

// addLogprob appends one token's entry from the logits it was drawn from
// or that predict it (nil: the first prompt token, which has no
// distribution); shown says whether the token's bytes are in the choice's
// text (a special token skipped from it takes no room).
func (c *completionState) addLogprob(id int, logits []float32, shown bool) {
	if c.lp == nil {
		c.lp = &wire.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	}
	raw, _ := c.e.Session.Tokenizer.TokenBytes(id)
	tok := strings.ToValidUTF8(raw, "\uFFFD")
	c.lp.Tokens = append(c.lp.Tokens, tok)
	c.lp.TextOffset = append(c.lp.TextOffset, c.offset)
	if shown {
		c.partial = append(c.partial, raw...)
		for len(c.partial) > 0 && utf8.FullRune(c.partial) {
			_, n := utf8.DecodeRune(c.partial)
			c.partial = c.partial[n:]
			c.offset++
		}
	}
	if logits == nil {
		c.lp.TokenLogprobs = append(c.lp.TokenLogprobs, nil)
		c.lp.TopLogprobs = append(c.lp.TopLogprobs, nil)
		return
	}
	// The whole row is formed only when alternatives are asked for.
	n := *c.cj.logprobs
	var v float64
	if n > 0 {
		c.scratch = sample.LogProbs(c.scratch, logits)
		v = logprobValue(c.scratch[id])
	} else {
		v = logprobValue(sample.LogProb(logits, id))
	}
	c.lp.TokenLogprobs = append(c.lp.TokenLogprobs, &v)
	top := map[string]float64{}
	for _, t := range topN(c.scratch, n) {
		s, _ := c.e.Session.Tokenizer.TokenBytes(t)
		top[strings.ToValidUTF8(s, "\uFFFD")] = logprobValue(c.scratch[t])
	}
	// The chosen token is in the map too, as OpenAI documents ("the
	// logprobs most likely tokens, as well the chosen tokens") and vLLM
	// answers: up to logprobs + 1 entries.
	if _, ok := top[tok]; !ok {
		top[tok] = v
	}
	c.lp.TopLogprobs = append(c.lp.TopLogprobs, top)
}

// promptRow returns the logits that predict prompt token j ≥ 1.
func (c *completionState) promptRow(j int) []float32 {
	V := c.e.vocabSize
	p := j - 1
	for _, r := range c.rows {
		n := len(r) / V
		if p < n {
			return r[p*V : (p+1)*V]
		}
		p -= n
	}
	return nil
}

// promptEntries sets lp to the prompt tokens' entries, their offsets
// into the echoed text from 0, leaving offset after that text for the
// generated tokens' entries. A prompt token is in the echoed text when its
// bytes come next there: a BOS the tokenizer added to a text prompt is
// not, nor is a special token decodeIDs skipped from a token-id prompt.
func (c *completionState) promptEntries() {
	c.lp, c.offset, c.partial = nil, 0, nil
	rest := c.cj.echoText
	for j, id := range c.cj.prompt {
		raw, _ := c.e.Session.Tokenizer.TokenBytes(id)
		shown := raw != "" && strings.HasPrefix(rest, raw)
		if shown {
			rest = rest[len(raw):]
		}
		if j == 0 {
			c.addLogprob(id, nil, shown)
			continue
		}
		c.addLogprob(id, c.promptRow(j), shown)
	}
	c.offset, c.partial = utf8.RuneCountInString(c.cj.echoText), nil
}

// echoLogprobs puts the prompt tokens' entries first (echo with logprobs).
func (c *completionState) echoLogprobs() {
	gen := c.lp
	c.promptEntries()
	if gen != nil {
		for i := range gen.Tokens {
			c.lp.Tokens = append(c.lp.Tokens, gen.Tokens[i])
			c.lp.TokenLogprobs = append(c.lp.TokenLogprobs, gen.TokenLogprobs[i])
			c.lp.TopLogprobs = append(c.lp.TopLogprobs, gen.TopLogprobs[i])
			c.lp.TextOffset = append(c.lp.TextOffset, c.offset+gen.TextOffset[i])
		}
	}
}

// topPromptLogprobs is vLLM's prompt_logprobs list: null first, then per
// position the prompt token's entry and the top N, keyed by token id.
func (c *completionState) topPromptLogprobs(n int) []any {
	out := make([]any, len(c.cj.prompt))
	var lp []float32
	tok := c.e.Session.Tokenizer
	for j := 1; j < len(c.cj.prompt); j++ {
		lp = sample.LogProbs(lp, c.promptRow(j))
		m := map[string]wire.PromptLogprob{}
		add := func(id int) {
			rank := 1
			for _, x := range lp {
				if x > lp[id] {
					rank++
				}
			}
			s, _ := tok.TokenBytes(id)
			m[strconv.Itoa(id)] = wire.PromptLogprob{Logprob: logprobValue(lp[id]), Rank: rank, DecodedToken: strings.ToValidUTF8(s, "\uFFFD")}
		}
		add(c.cj.prompt[j])
		for _, id := range topN(lp, n) {
			add(id)
		}
		out[j] = m
	}
	return out
}

func (c *completionState) finishReason(r sched.FinishReason) string {
	if r == sched.FinishLength {
		return "length"
	}
	return "stop"
}

func (s *Server) collectCompletion(ctx context.Context, w http.ResponseWriter, e *engineState, cj *completionJob) {
	// One state per candidate (n); prompt log-probs (n = 1 only) are the
	// first's.
	cs := make([]*completionState, len(cj.outs))
	lasts := make([]batch, len(cj.outs))
	for i := range cs {
		cs[i] = &completionState{cj: cj, e: e}
	}
	c := cs[0]
	if err := waitAll(ctx, cj.outs, func(i int, b batch) error {
		cs[i].feed(b)
		lasts[i] = b
		return nil
	}); err != nil {
		return
	}
	resp := wire.CompletionResponse{ID: cj.id, Object: "text_completion", Created: cj.created, Model: s.opts.ServedModelName}
	tokens := 0
	for i, c := range cs {
		if aerr := endError(lasts[i].reason, lasts[i].err); aerr != nil {
			aerr.write(w)
			return
		}
		if cj.echo && cj.logprobs != nil {
			c.echoLogprobs()
		}
		fr := c.finishReason(lasts[i].reason)
		choice := wire.CompletionChoice{Index: i, Text: cj.echoText + c.text.String(), Logprobs: c.lp, FinishReason: &fr}
		if cj.logprobs != nil && choice.Logprobs == nil {
			choice.Logprobs = &wire.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
		}
		if cj.returnTokenIDs {
			choice.TokenIDs, choice.PromptTokenIDs = append([]int{}, c.ids...), cj.prompt
		}
		resp.Choices = append(resp.Choices, choice)
		tokens += c.tokens
	}
	// The prompt is counted once: the candidates share it.
	resp.Usage = newUsage(len(cj.prompt), tokens, lasts[0].cached)
	if cj.promptLogprobs == nil {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	if n := *cj.promptLogprobs; n >= 0 {
		resp.Choices[0].PromptLogprobs = c.topPromptLogprobs(n)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	resp.Choices[0].F32 = json.RawMessage(f32Mark)
	s.writeF32(w, marshal(resp), c)
}

// writeF32 writes a response whose prompt_logprobs_f32 placeholder is
// replaced by the rows, streamed one row at a time: a 512-token window of
// a 65,536-token vocabulary is 175 MB of base64, never held at once.
func (s *Server) writeF32(w http.ResponseWriter, body []byte, c *completionState) {
	i := bytes.LastIndex(body, []byte(f32Mark))
	head, tail := body[:i], body[i+len(f32Mark):]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(head); err != nil {
		return
	}
	V := c.e.vocabSize
	lp := make([]float32, V)
	raw := make([]byte, 4*V)
	enc := make([]byte, base64.StdEncoding.EncodedLen(4*V)+3)
	w.Write([]byte("[null"))
	for j := 1; j < len(c.cj.prompt); j++ {
		lp = sample.LogProbs(lp, c.promptRow(j))
		for v, x := range lp {
			binary.LittleEndian.PutUint32(raw[4*v:], math.Float32bits(x))
		}
		enc[0], enc[1] = ',', '"'
		n := base64.StdEncoding.EncodedLen(len(raw))
		base64.StdEncoding.Encode(enc[2:], raw)
		enc[2+n] = '"'
		if _, err := w.Write(enc[:3+n]); err != nil {
			return
		}
	}
	w.Write([]byte("]"))
	w.Write(tail)
	w.Write([]byte("\n"))
}

func (s *Server) streamCompletion(ctx context.Context, w http.ResponseWriter, e *engineState, cj *completionJob) {
	cs := make([]*completionState, len(cj.outs))
	for i := range cs {
		cs[i] = &completionState{cj: cj, e: e}
	}
	out := &sse{w: w}
	// With return_token_ids, each candidate's first chunk carries the
	// prompt's ids and each chunk the ids of the tokens it delivers (held
	// text's ids come with the text), as vLLM streams them.
	sentIDs := make([]int, len(cs))
	promptSent := make([]bool, len(cs))
	// A chunk carries one candidate's choice, by its index (n > 1).
	chunk := func(i int, text string, lp *wire.CompletionLogprobs, finish *string) wire.CompletionResponse {
		c := cs[i]
		ch := wire.CompletionResponse{ID: cj.id, Object: "text_completion", Created: cj.created, Model: s.opts.ServedModelName,
			Choices: []wire.CompletionChoice{{Index: i, Text: text, Logprobs: lp, FinishReason: finish}}}
		if cj.includeUsage {
			ch.Usage = jsonNull
		}
		if cj.returnTokenIDs {
			if !promptSent[i] {
				ch.Choices[0].PromptTokenIDs, promptSent[i] = cj.prompt, true
			}
			ch.Choices[0].TokenIDs = c.ids[sentIDs[i]:]
			sentIDs[i] = len(c.ids)
		}
		return ch
	}
	// The first chunk carries what needs the prompt's logits, as the
	// non-streamed answer does: with echo and logprobs the prompt tokens'
	// entries, and prompt_logprobs N. It waits for them: they have all
	// arrived once the first token has, or the request is done. The
	// generated tokens' offsets then continue after the prompt's. (Only
	// with n = 1: completionJob refuses them with more.)
	echoLP := cj.echo && cj.logprobs != nil
	first := echoLP || cj.promptLogprobs != nil
	if cj.echo && !first && cj.echoText != "" {
		for i := range cs {
			if out.send(marshal(chunk(i, cj.echoText, nil, nil))) != nil {
				return
			}
		}
	}
	left, cached := len(cs), 0
	waitAll(ctx, cj.outs, func(i int, b batch) error {
		c := cs[i]
		c.rows = append(c.rows, b.promptRows...)
		if first && (len(b.pieces) > 0 || (b.done && endError(b.reason, b.err) == nil)) {
			first = false
			ch := chunk(i, "", nil, nil)
			if cj.echo {
				ch.Choices[0].Text = cj.echoText
			}
			if echoLP {
				c.promptEntries()
				ch.Choices[0].Logprobs = c.lp
			}
			if n := cj.promptLogprobs; n != nil {
				ch.Choices[0].PromptLogprobs = c.topPromptLogprobs(*n) // −1 is refused for streams
			}
			if err := out.send(marshal(ch)); err != nil {
				return err
			}
			c.lp = nil
		}
		// One chunk per token that released text, as for chat.
		for _, pc := range b.pieces {
			if c.lp != nil && len(c.lp.Tokens) == 0 {
				c.lp = nil
			}
			text := c.feed(batch{pieces: []piece{pc}})
			if text == "" && c.lp == nil {
				continue
			}
			if err := out.send(marshal(chunk(i, text, c.lp, nil))); err != nil {
				return err
			}
			c.lp = nil
		}
		if !b.done {
			return nil
		}
		if aerr := endError(b.reason, b.err); aerr != nil {
			return failStream(out, aerr)
		}
		fr := c.finishReason(b.reason)
		if err := out.send(marshal(chunk(i, "", nil, &fr))); err != nil {
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
			u := wire.CompletionResponse{ID: cj.id, Object: "text_completion", Created: cj.created, Model: s.opts.ServedModelName,
				Choices: []wire.CompletionChoice{}, Usage: newUsage(len(cj.prompt), tokens, cached)}
			if err := out.send(marshal(u)); err != nil {
				return err
			}
		}
		return out.done()
	})
}

// Package generate runs text generation for one prompt on top of the engine:
// it tokenizes a plain or chat prompt by the special-token policy of
// docs/model.md §5, prefills, samples token by token with engine/sample,
// stops on the checkpoint's stop ids, and streams decoded text.
//
// It is the terminal path (lfmq generate); request scheduling and the HTTP API
// are not here.
package generate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/choice"
	"github.com/lfmq/lfmq/engine/draft"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/prompt"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/spec"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

// Session holds a loaded model with its tokenizer, chat template and stop ids.
type Session struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	// Template is nil when the checkpoint has no chat template.
	Template *chat.Template
	prompts  *prompt.Encoder
	// StopIDs are eos_token_id of generation_config.json and config.json (an
	// int or a list) plus <|im_end|> and <|endoftext|> where the vocabulary
	// has them.
	StopIDs []int
}

// Open loads the checkpoint in dir (Hugging Face BF16 or lfmq-1).
func Open(dir string, opts load.Options) (*Session, error) {
	m, err := load.Load(dir, opts)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		m.Close()
		return nil, err
	}
	tmpl, err := chat.Load(dir)
	if err != nil && !errors.Is(err, chat.ErrNoTemplate) {
		m.Close()
		return nil, err
	}
	s := &Session{Model: m, Tokenizer: tok, Template: tmpl}
	if tmpl != nil {
		s.prompts = prompt.New(tok, tmpl)
	}
	stops := map[int]bool{}
	for _, id := range m.Config.EOSTokenIDs {
		stops[id] = true
	}
	genIDs, err := generationEOS(filepath.Join(dir, "generation_config.json"))
	if err != nil {
		m.Close()
		return nil, err
	}
	for _, id := range genIDs {
		stops[id] = true
	}
	for _, name := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := tok.TokenID(name); ok {
			stops[id] = true
		}
	}
	for id := range stops {
		s.StopIDs = append(s.StopIDs, id)
	}
	sort.Ints(s.StopIDs)
	return s, nil
}

// Close releases the model.
func (s *Session) Close() error { return s.Model.Close() }

// generationEOS reads eos_token_id (int or list) from generation_config.json,
// which may be absent.
func generationEOS(path string) ([]int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("generate: %s: %w", path, err)
	}
	if len(g.EOS) == 0 || string(g.EOS) == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(g.EOS, &one); err == nil {
		return []int{one}, nil
	}
	var list []int
	if err := json.Unmarshal(g.EOS, &list); err != nil {
		return nil, fmt.Errorf("generate: %s: eos_token_id: expected an integer or a list of integers, got %s", path, g.EOS)
	}
	return list, nil
}

// EncodeText tokenizes a plain prompt as /v1/completions does: special-token
// strings are matched and BOS is prepended unless the text starts with it.
func (s *Session) EncodeText(text string) []int {
	return s.Tokenizer.Encode(text, tokenizer.EncodeOptions{AddBOS: true, MatchSpecial: true})
}

// EncodeChat renders messages (OpenAI JSON) with the checkpoint's chat
// template and a generation prompt, then tokenizes the result: only special
// tokens emitted by the template itself become control ids; text supplied
// in the messages is encoded as ordinary text (docs/model.md §5).
func (s *Session) EncodeChat(messagesJSON, toolsJSON []byte, now time.Time) ([]int, error) {
	msgs, err := chat.ParseMessages(messagesJSON)
	if err != nil {
		return nil, err
	}
	req := chat.Request{Messages: msgs, AddGenerationPrompt: true, Now: now}
	if len(toolsJSON) > 0 {
		if req.Tools, err = chat.ParseTools(toolsJSON); err != nil {
			return nil, err
		}
	}
	return s.EncodeChatRequest(req)
}

// EncodeChatRequest renders and tokenizes a chat request as EncodeChat
// does; opts adjust the special-token policy (e.g. chat.TrustAssistant).
func (s *Session) EncodeChatRequest(req chat.Request, opts ...chat.SegmentOption) ([]int, error) {
	if s.Template == nil {
		return nil, ErrNoTemplate
	}
	return s.prompts.Chat(req, opts...)
}

// ErrNoTemplate is returned for a chat prompt when the checkpoint has no
// chat template.
var ErrNoTemplate = errors.New("generate: the checkpoint has no chat template (chat_template.jinja or tokenizer_config.json)")

// Options controls one generation.
type Options struct {
	MaxTokens int
	Params    sample.Params
	// OnText receives decoded text as it becomes complete UTF-8.
	OnText func(string)
	// Drafter, if set, is a DSpark drafter attached to the model: the
	// generation runs drafted (the same tokens). DraftDepth fixes the
	// drafts verified per step (0: scheduled by DraftCosts, a verify
	// cost table; nil measures as it goes).
	Drafter    *draft.Drafter
	DraftDepth int
	DraftCosts *spec.Table
}

// Result describes a finished generation.
type Result struct {
	PromptTokens int
	Tokens       []int
	// Stopped is true when a stop id ended the generation (it is not in
	// Tokens); false when MaxTokens or the context limit did.
	Stopped       bool
	PrefillTime   time.Duration
	DecodeTime    time.Duration
	ContextFilled bool
	// Draft is what the drafter did (nil without one).
	Draft *DraftStats
}

// PrefillTokensPerSecond is the prompt throughput.
func (r *Result) PrefillTokensPerSecond() float64 {
	return float64(r.PromptTokens) / max(r.PrefillTime.Seconds(), 1e-9)
}

// DecodeTokensPerSecond is the generation throughput after the first token.
func (r *Result) DecodeTokensPerSecond() float64 {
	n := len(r.Tokens)
	if r.Stopped {
		n++
	}
	if n <= 1 {
		return 0
	}
	return float64(n-1) / max(r.DecodeTime.Seconds(), 1e-9)
}

// Run generates from prompt ids.
func (s *Session) Run(ctx context.Context, prompt []int, opts Options) (*Result, error) {
	if len(prompt) == 0 {
		return nil, errors.New("generate: empty prompt")
	}
	if opts.MaxTokens <= 0 {
		return nil, fmt.Errorf("generate: max tokens must be positive, got %d", opts.MaxTokens)
	}
	p := opts.Params
	if len(p.StopIDs) == 0 {
		p.StopIDs = s.StopIDs
	}
	if err := p.Validate(s.Model.Config.VocabSize); err != nil {
		return nil, err
	}
	if opts.Drafter != nil {
		return s.runDrafted(ctx, prompt, opts, p)
	}
	seq := s.Model.NewSequence()
	res := &Result{PromptTokens: len(prompt)}
	start := time.Now()
	logits, err := s.Model.Forward(ctx, []*model.Sequence{seq}, [][]int{prompt}, model.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	res.PrefillTime = time.Since(start)
	start = time.Now()
	dec := s.Tokenizer.NewStreamDecoder()
	var smp sample.Sampler
	stop := map[int]bool{}
	for _, id := range s.StopIDs {
		stop[id] = true
	}
	for {
		pos := len(prompt) + len(res.Tokens)
		next := smp.Next(p, logits[0], sample.History{Prompt: prompt, Output: res.Tokens}, pos)
		if stop[next] {
			res.Stopped = true
			break
		}
		res.Tokens = append(res.Tokens, next)
		// An id the tokenizer does not know (the embedding is padded past
		// the vocabulary, e.g. 64,400 tokens in 65,536 rows) has no text.
		if text, err := dec.Add(next); err == nil && text != "" && opts.OnText != nil {
			opts.OnText(text)
		}
		if len(res.Tokens) >= opts.MaxTokens {
			break
		}
		if seq.Len() >= seq.MaxContext() {
			res.ContextFilled = true
			break
		}
		logits, err = s.Model.Forward(ctx, []*model.Sequence{seq}, [][]int{{next}}, model.ForwardOptions{})
		if err != nil {
			return nil, err
		}
	}
	if rest := dec.Flush(); rest != "" && opts.OnText != nil {
		opts.OnText(rest)
	}
	res.DecodeTime = time.Since(start)
	return res, nil
}

// AnswerSchema answers a chat with a closed-schema JSON object by
// scoring (engine/choice, docs/serving.md §10): the schema's
// instruction is added to the system message, the conversation is
// rendered with the assistant's answer opened by choice.Open, and every
// candidate of every field is scored from that shared prompt. Assistant
// turns are rendered as the server renders them (chat.TrustAssistant),
// so both give the same answer.
func (s *Session) AnswerSchema(ctx context.Context, messagesJSON, schemaJSON []byte, now time.Time) (*choice.Schema, *choice.Answer, error) {
	sch, err := choice.Parse(schemaJSON)
	if err != nil {
		return nil, nil, err
	}
	msgs, err := chat.ParseMessages(messagesJSON)
	if err != nil {
		return nil, nil, err
	}
	rendered, err := s.EncodeChatRequest(chat.Request{Messages: sch.WithInstruction(msgs), AddGenerationPrompt: true, Now: now}, chat.TrustAssistant())
	if err != nil {
		return nil, nil, err
	}
	prompt := append(rendered, s.Tokenizer.EncodeOrdinary(choice.Open)...)
	a, err := sch.Score(ctx, s.Model, prompt, sch.Encode(s.Tokenizer))
	return sch, a, err
}

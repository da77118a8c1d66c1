package parser

import (
	"strings"
	"unicode"
)

// Options selects which parts of docs/serving.md §9 a Parser applies.
type Options struct {
	// Reasoning turns reasoning parsing on; set it when the tokenizer has
	// the think markers. Without it, think markers are literal content.
	Reasoning bool
	// StartInReasoning says the rendered prompt ended with <think>, so the
	// output starts inside reasoning. It is ignored without Reasoning.
	StartInReasoning bool
	// Tools turns tool-call parsing on; set it when tools were given and
	// tool_choice is not "none". Without it, tool-call markers are literal
	// content.
	Tools bool
}

// EventKind says which response field an Event feeds.
type EventKind int

// The event kinds. The names carry a Kind prefix because ToolCall is the
// type of a call.
const (
	KindReasoning EventKind = iota + 1 // reasoning_content / reasoning text
	KindContent                        // content text
	KindToolCall                       // one whole tool call
)

// String returns the kind's name, e.g. "content".
func (k EventKind) String() string {
	switch k {
	case KindReasoning:
		return "reasoning"
	case KindContent:
		return "content"
	case KindToolCall:
		return "tool_call"
	}
	return "parser.EventKind(?)"
}

// Event is one piece of parsed output. Text events are never empty; the
// text of adjacent events of one kind concatenates, and how it is split
// carries no meaning.
type Event struct {
	Kind EventKind
	Text string    // KindReasoning and KindContent
	Call *ToolCall // KindToolCall
}

// ToolCall is one parsed call. Its index in the message is its position
// among all ToolCall events of the Parser.
type ToolCall struct {
	Name string
	// Arguments is a compact JSON object: keys in the order written, no
	// HTML escaping, non-ASCII unescaped, "{}" for a call without
	// arguments.
	Arguments string
}

// echoHoldMax bounds the text held after a closed tool-call block while it
// might still be an echo of the call. Held text that grows past it is
// released as content and can no longer be dropped. The decision depends
// only on the total held length, so it is the same for every chunking.
const echoHoldMax = 64 << 10

type phase uint8

const (
	// phaseLead: Reasoning on, nothing but whitespace seen yet; the
	// whitespace is held in lead until we know whether <think> follows.
	phaseLead phase = iota
	phaseReasoning
	// phaseAfterThink: </think> seen; whitespace is dropped.
	phaseAfterThink
	phaseContent
)

// Parser is the state machine of docs/serving.md §9 for one choice. Feed
// it the generated items in order with Text and Marker, then call Finish
// once. Each call returns the events that became certain; the server
// sends them as they come (streaming) or concatenates them
// (non-streaming).
//
// Text is held back only where the rules require it:
//   - with Reasoning (and not StartInReasoning), leading whitespace until
//     the first other item shows whether reasoning opens;
//   - with Tools, the body of a tool-call block until its end marker;
//   - with Tools, after a block closed by <|tool_call_end|> (parsed or
//     not), whitespace and any following text that starts with '[' or '<'
//     (a possible echo of the call; a literal think marker counts as text).
//     An orphan <|tool_call_end|> drops the held text with itself, and the
//     text after it is checked again. The held text is released
//     as content at once when its first non-whitespace character is not
//     '[' or '<', when a <|tool_call_start|> arrives, when it grows past
//     64 KiB, and at Finish.
//
// A tool-call block whose body fails to parse or holds no call becomes
// content: "<|tool_call_start|>", the body as generated and, when it came,
// "<|tool_call_end|>". Inside a block every other marker is body text.
// Inside reasoning, every marker but </think> is reasoning text. A think
// marker after reasoning has closed or never opened is literal text of the
// current kind (content, or body text inside a tool-call block).
//
// A Parser is not safe for concurrent use. Its memory is the held text
// above; a block body is bounded only by the generation's length.
type Parser struct {
	opts     Options
	phase    phase
	finished bool

	lead strings.Builder // phaseLead: held leading whitespace

	inBlock bool            // inside <|tool_call_start|> … <|tool_call_end|>
	body    strings.Builder // the block's body as generated

	armed bool            // a block was closed: the echo rule applies
	hold  strings.Builder // armed: held whitespace, then possibly echo text
	echo  bool            // hold has text that starts with '[' or '<'

	out []Event
}

// New returns a Parser for one choice.
func New(opts Options) *Parser {
	p := &Parser{opts: opts, phase: phaseContent}
	if opts.Reasoning {
		p.phase = phaseLead
		if opts.StartInReasoning {
			p.phase = phaseReasoning
		}
	}
	return p
}

// Text feeds a piece of decoded text and returns the events that became
// certain. s must be valid UTF-8 and must not end inside a character (see
// the package comment); invalid bytes are passed through, never a panic.
// After Finish, Text returns nil.
func (p *Parser) Text(s string) []Event {
	if p.finished || s == "" {
		return nil
	}
	p.text(s)
	return p.take()
}

// Marker feeds a marker recognised by token id and returns the events that
// became certain. Unknown marker values are ignored. After Finish, Marker
// returns nil.
func (p *Parser) Marker(m Marker) []Event {
	if p.finished || !m.valid() {
		return nil
	}
	switch p.phase {
	case phaseLead:
		if m == ThinkStart {
			p.lead.Reset() // leading whitespace before <think> is dropped
			p.phase = phaseReasoning
			break
		}
		p.phase = phaseContent
		p.releaseLead()
		p.contentMarker(m)
	case phaseReasoning:
		if m == ThinkEnd {
			p.phase = phaseAfterThink
			break
		}
		p.emit(KindReasoning, m.String())
	case phaseAfterThink:
		p.phase = phaseContent
		p.contentMarker(m)
	default:
		p.contentMarker(m)
	}
	return p.take()
}

// Finish ends the output and returns the last events: held leading
// whitespace or echo text as content, and an unterminated tool-call block
// parsed as it stands (calls on success, content on failure). Unterminated
// reasoning needs nothing: it was all reasoning and already returned.
// Finish may be called once; later calls return nil.
func (p *Parser) Finish() []Event {
	if p.finished {
		return nil
	}
	p.finished = true
	switch {
	case p.phase == phaseLead:
		p.releaseLead()
	case p.inBlock:
		body := p.body.String()
		p.body.Reset()
		p.inBlock = false
		if calls, ok := ParseToolCalls(body); ok {
			p.emitCalls(calls)
		} else {
			p.emit(KindContent, ToolCallStart.String()+body)
		}
	case p.armed:
		p.releaseHold()
	}
	return p.take()
}

func (p *Parser) text(s string) {
	switch p.phase {
	case phaseLead:
		i := firstNonSpace(s)
		if i < 0 {
			p.lead.WriteString(s)
			return
		}
		p.phase = phaseContent
		p.releaseLead()
		p.content(s)
	case phaseReasoning:
		p.emit(KindReasoning, s)
	case phaseAfterThink:
		i := firstNonSpace(s)
		if i < 0 {
			return
		}
		p.phase = phaseContent
		p.content(s[i:])
	default:
		p.content(s)
	}
}

// releaseLead sends held leading whitespace on as content: the output did
// not open with <think>, so it is content throughout.
func (p *Parser) releaseLead() {
	s := p.lead.String()
	p.lead.Reset()
	if s != "" {
		p.content(s)
	}
}

// content handles text in the content phase.
func (p *Parser) content(s string) {
	switch {
	case p.inBlock:
		p.body.WriteString(s)
	case p.armed:
		p.holdText(s)
	default:
		p.emit(KindContent, s)
	}
}

// holdText applies the echo rule to text that follows a closed block.
func (p *Parser) holdText(s string) {
	if !p.echo {
		i := firstNonSpace(s)
		if i >= 0 {
			if c := s[i]; c != '[' && c != '<' {
				p.hold.WriteString(s)
				p.releaseHold()
				return
			}
			p.echo = true
		}
	}
	p.hold.WriteString(s)
	if p.hold.Len() > echoHoldMax {
		p.releaseHold()
	}
}

// releaseHold sends held text on as content and ends the echo rule.
func (p *Parser) releaseHold() {
	s := p.hold.String()
	p.hold.Reset()
	p.armed, p.echo = false, false
	p.emit(KindContent, s)
}

// contentMarker handles a marker in the content phase.
func (p *Parser) contentMarker(m Marker) {
	if !p.opts.Tools || m == ThinkStart || m == ThinkEnd {
		p.content(m.String())
		return
	}
	if p.inBlock {
		if m == ToolCallEnd {
			p.closeBlock()
		} else {
			p.body.WriteString(m.String())
		}
		return
	}
	if m == ToolCallStart {
		if p.armed {
			p.releaseHold()
		}
		p.inBlock = true
		return
	}
	// An orphan <|tool_call_end|>.
	if p.armed {
		p.hold.Reset() // an echo of the previous call: dropped with the marker
		p.echo = false
		return
	}
	p.emit(KindContent, m.String())
}

func (p *Parser) closeBlock() {
	body := p.body.String()
	p.body.Reset()
	p.inBlock = false
	if calls, ok := ParseToolCalls(body); ok {
		p.emitCalls(calls)
	} else {
		p.emit(KindContent, ToolCallStart.String()+body+ToolCallEnd.String())
	}
	p.armed, p.echo = true, false
	p.hold.Reset()
}

func (p *Parser) emitCalls(calls []ToolCall) {
	for i := range calls {
		p.out = append(p.out, Event{Kind: KindToolCall, Call: &calls[i]})
	}
}

// emit appends a text event, merging it into the previous one of the same
// kind from this call.
func (p *Parser) emit(k EventKind, s string) {
	if s == "" {
		return
	}
	if n := len(p.out); n > 0 && p.out[n-1].Kind == k {
		p.out[n-1].Text += s
		return
	}
	p.out = append(p.out, Event{Kind: k, Text: s})
}

func (p *Parser) take() []Event {
	out := p.out
	p.out = nil
	return out
}

// firstNonSpace returns the byte index of the first rune of s that is not
// Unicode white space, or -1.
func firstNonSpace(s string) int {
	for i, r := range s {
		if !unicode.IsSpace(r) {
			return i
		}
	}
	return -1
}

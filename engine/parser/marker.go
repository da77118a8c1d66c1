package parser

import "strconv"

// Marker is a special token that the server recognises by id and hands to
// the Parser as a unit, never as text.
type Marker int

// The markers of LFM2 output (docs/model.md §6).
const (
	ThinkStart    Marker = iota + 1 // <think>
	ThinkEnd                        // </think>
	ToolCallStart                   // <|tool_call_start|>
	ToolCallEnd                     // <|tool_call_end|>
)

// String returns the literal marker text, e.g. "<|tool_call_start|>": the
// text a marker becomes where it has no meaning. An unknown value gives
// "parser.Marker(N)".
func (m Marker) String() string {
	switch m {
	case ThinkStart:
		return "<think>"
	case ThinkEnd:
		return "</think>"
	case ToolCallStart:
		return "<|tool_call_start|>"
	case ToolCallEnd:
		return "<|tool_call_end|>"
	}
	return "parser.Marker(" + strconv.Itoa(int(m)) + ")"
}

func (m Marker) valid() bool { return m >= ThinkStart && m <= ToolCallEnd }

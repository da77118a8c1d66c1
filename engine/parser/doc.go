// Package parser turns what an LFM2 model generates into the fields
// of an OpenAI chat response: reasoning text, content text and tool
// calls (docs/serving.md §9), and matches request stop strings on
// decoded text (docs/serving.md §5 "Stops").
//
// A Parser is one state machine per choice. The server feeds it decoded
// text pieces (Parser.Text) and the four marker tokens it recognised by id
// (Parser.Marker), then calls Parser.Finish when generation ends. The
// streaming and non-streaming paths share it, so for every chunking of the
// same items the concatenated reasoning, the concatenated content and the
// list of tool calls are identical. Model output is never an error: a tool
// call that does not parse becomes content, with its markers written
// literally.
//
// Reasoning: with Options.Reasoning, only a <think> at the very start of
// the output (after optional whitespace, which is dropped) or a prompt that
// ended with <think> (Options.StartInReasoning) opens reasoning; it runs to
// </think>, whitespace right after </think> is dropped, and the rest is
// content. Any other think marker is literal text of the surrounding kind.
//
// Tool calls: with Options.Tools, <|tool_call_start|> … <|tool_call_end|>
// blocks are buffered and parsed by ParseToolCalls, which accepts LFM2's
// Pythonic call lists and the JSON form and writes the arguments as compact
// JSON in the bytes Python's json.dumps(ast.literal_eval(…)) would give,
// separators aside. After a closed block, text that starts (after
// whitespace) with '[' or '<' may be the model echoing its call; it is held
// and dropped if an orphan <|tool_call_end|> follows (see Parser).
//
// A StopMatcher finds the first stop string in a stream of text pieces and
// holds back only the tail that could still become one.
//
// Whitespace means Unicode White_Space (unicode.IsSpace). Text pieces must
// be valid UTF-8, each piece complete (the server's decoder holds partial
// characters); rune-boundary chunking is what the invariance above is
// defined and tested over.
//
// This package does not know token ids, does not decode tokens, does not
// detect markers inside text (a "<think>" that arrives as text is text),
// does not filter tool names against the request's tools, does not assign
// tool-call ids or indices, and does not build SSE chunks or JSON
// responses: it returns events, and the server writes them.
package parser

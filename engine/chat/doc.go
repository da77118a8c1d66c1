// Package chat renders a checkpoint's own chat template into the
// prompt text the model was trained on, as Hugging Face's
// apply_chat_template does, and splits that prompt for tokenization
// under the project's special-token policy (docs/model.md §5 and §6).
//
// Templates are Jinja2 and run on github.com/ardanlabs/jinja, a Jinja engine
// written for LLM chat templates. This package adds what Hugging Face's
// environment adds or does differently from the engine:
//
//   - Whitespace as Hugging Face configures Jinja2 (trim_blocks,
//     lstrip_blocks, keep_trailing_newline off). The source is translated
//     before compilation so that all whitespace control happens here
//     (see translate), which also fixes the engine trimming text that is
//     not adjacent to the tag.
//   - tojson as json.dumps(ensure_ascii=False): ", " and ": " separators,
//     keys in input order, non-ASCII and <>& unescaped, Python float repr,
//     and the indent, separators, sort_keys and ensure_ascii arguments.
//   - Python str() for {{ … }} output and the string filter: None, True,
//     False, 1.0, and repr() quoting inside lists and dicts.
//   - strftime_now(format) over Request.Now, raise_exception(message) as an
//     *ExceptionError, {% generation %} blocks rendering their body, and the
//     variables messages, tools, add_generation_prompt, bos_token,
//     eos_token (pad_token, unk_token) plus chat_template_kwargs.
//
// Request data keeps JSON key order: tools, tool-call arguments and kwargs
// are held as *Object values (see DecodeJSON), so a template's tojson gives
// the bytes Python would. ParseMessages turns OpenAI request messages into
// template messages (text parts joined, images rejected with
// ErrImageContent, arguments parsed, reasoning_content as thinking).
//
// RenderSegments implements the special-token policy: special-token strings
// typed inside request data are hidden behind placeholders while the
// template runs, so that only the ones the template emits come back as
// Special segments; user-typed ones return as ordinary text. Templates that
// look for special-token strings in request data (an assistant's
// "</think>") cannot see them then; TrustAssistant exempts assistant turns.
//
// Fidelity is tested against Python Jinja2 set up as transformers sets it
// up (testdata/gen_jinja2_cases.py), against every chat and instruct
// record of the tiny-lfm2-moe fixture, and with golden prompts for an
// LFM2.5-style template. Known gaps, inherited from the engine and outside
// what LFM2 templates use: the ~ operator and string + number format floats
// Go's way; ** always yields a float; str.split ignores maxsplit and there
// is no rsplit or splitlines; tuples are lists; an undefined name is never
// an error.
//
// This package is not a tokenizer and knows no token ids: it returns text
// and segments, and engine/tokenizer encodes them. It does not parse model
// output (tool calls, thinking) either, and it does not decide which tools
// a request renders (tool_choice) or how requests are validated beyond
// what the template needs.
package chat

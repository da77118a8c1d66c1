// Package wire holds the JSON bodies of lfmq's OpenAI-compatible API: the
// requests and answers of /v1/chat/completions and /v1/completions, their
// stream chunks, /v1/models with lfmq's checkpoint identity, the usage
// object and the error envelope.
//
// The server (engine/api) writes and reads these types, and clients
// (engine/api/client and its users) read them, so that the two sides
// cannot drift apart and a client never imports the server. It holds data
// only: no validation, no HTTP, no defaults; a client talking to another
// server (vLLM, llama.cpp) reads what it needs leniently on its own.
package wire

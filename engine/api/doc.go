// Package api is the engine's OpenAI-compatible HTTP server
// (docs/serving.md §5, §8, §9): /v1/models, /v1/chat/completions,
// /v1/completions, /health and /metrics over net/http, with API-key
// auth, CORS, request validation that names the field at fault, SSE
// streaming, the LFM2 reasoning and tool-call parsers, and
// full-vocabulary prompt log-probs for scoring a running server.
//
// The JSON bodies it reads and writes are engine/api/wire's, which its
// clients (engine/api/client) read too, so no client imports the server.
//
// Requests are rendered and tokenized here and run by engine/sched; the
// model, sampler and parsers live in their own packages. It does not read
// release bundles or verify checkpoints (that is launch/verify).
package api

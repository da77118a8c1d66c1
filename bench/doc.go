// Package bench measures an OpenAI-compatible server under load: a
// matrix of concurrent streams × prompt lengths, each cell a fixed time of
// closed-loop requests that must each generate exactly the tokens asked
// for, with aggregate and per-stream throughput, time to first token,
// inter-token and request latency, failures by kind, and the server's own
// counters from /metrics where it has them.
//
// It talks to lfmq serve, vLLM and llama.cpp's server alike through their
// OpenAI routes (token-id prompts on /v1/completions, min_tokens and
// ignore_eos to forbid an early stop, usage in the last stream chunk,
// logprobs for one event per token). It contacts only the base URL it is
// given, and every loop is bounded in requests and in time.
//
// It does not start servers, render tables for people beyond the
// Markdown summary (Markdown), or draw plots (cmd/lfmq does, with
// evidence/report).
package bench

// Package client talks to an OpenAI-compatible server: lfmq serve, and
// vLLM or llama.cpp's server where a caller compares against them. It
// sends requests (with the bearer key), tells an answer from the server's
// refusal (Error: the status and the OpenAI error envelope unwrapped),
// reads Retry-After and retries refusals that ask for it, bounds what it
// reads, lists the served models (/v1/models) and reads server-sent event
// streams.
//
// It is not the server (engine/api), whose JSON bodies it shares through
// engine/api/wire, and it keeps no policy of its callers: bench, eval's
// task runner and score each frame its errors in their own words and
// decide what a model list must hold.
package client

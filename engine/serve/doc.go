// Package serve describes the engine's OpenAI-compatible server once, as
// Settings, for every command that runs it: lfmq serve listens on the host
// and port its flags give, and a command that needs a checkpoint's answers
// as a server gives them (lfmq eval --model) starts one in process on a
// loopback port with Start, with serve's defaults, so that its texts are
// those lfmq serve would give.
//
// It is not the server (engine/api), nor the command line: flags are
// parsed and checked by cmd/lfmq, and a device is opened and closed by the
// caller.
package serve

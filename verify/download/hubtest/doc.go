// Package hubtest is an in-process emulator of a Hugging Face style hub for
// tests: it serves a release directory at /{owner}/{name}/resolve/{rev}/{path}
// with Range support, X-Repo-Commit and optional LFS ETags, and injects
// faults (a connection dropped mid-file, a corrupted byte, a 503).
//
// It is test support, used with net/http/httptest; nothing in lfmq serves
// releases with it.
package hubtest

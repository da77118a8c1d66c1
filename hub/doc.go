// Package hub turns a model argument into a checkpoint directory: a
// directory stays itself, and a Hugging Face hub id, OWNER/NAME[@REVISION],
// becomes its snapshot in the Hugging Face cache, found there without the
// network or fetched into it (package hfcache). The commands that read a
// source checkpoint (quantize, score, generate, serve, inspect, eval) call
// it, so that they name and resolve a model the same way.
//
// The sub-packages hold the rest of lfmq's hub access: hubapi (the client
// of the hub's HTTP API, its errors, and Remote, the read-only access that
// hfcache lists a commit with), hfcache (the cache and its filling),
// download (a release fetched and verified), publish (a release uploaded
// as one commit and tag, on hubapi's client) and hubtest (an in-process
// hub for tests); their retry rule and wait are internal/httpstatus's.
//
// It does not load or check a checkpoint (package format/hf does), and it
// does not verify releases (package verify does).
package hub

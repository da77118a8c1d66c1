// Package launch turns a release into a running server
// (docs/release.md, "Launching a release"): it verifies every byte of
// the release (package verify), picks the bundled runtime for this
// platform and checks it against the digest pinned in
// runtime-release.json, binds the server's cache directory to the
// release through an identity file, and builds the exact runtime
// command, `runtime/lfmq-<os>-<arch> serve …`, that it then executes.
//
// It does not verify in its own way (it calls verify), serve, or download.
package launch

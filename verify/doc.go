// Package verify checks an lfmq release directory byte for byte against its
// hash lists (docs/release.md, "Verifying a release") and checks any
// sha256sum-style list.
//
// Every run re-hashes every byte of every listed file, in parallel across
// files; nothing is trusted from an earlier run. A finding (missing, extra,
// size or hash mismatch, unsafe entry, malformed list, disagreeing lists,
// broken pin, bad signature) is a *MismatchError; Report.Err joins them, so
// errors.As and errors.Is (ErrMissing, ErrExtra, ErrUnsafePath, ErrMalformed,
// ErrMismatch, ErrSignature) work on the result.
//
// A release may carry SHA256SUMS.sig, an SSH signature over SHA256SUMS
// (docs/release.md, "Signatures"). It is the one top-level file no list
// names, so it is never an extra file; given Options.AllowedSigners,
// Release also verifies it, and a missing or bad signature is a finding.
//
// The sub-package sums reads and writes the two lists. The SSHSIG format
// the signature is checked with is package format/sshsig, which the
// release signer shares. Building a release is release/bundle's job,
// fetching one hub/download's (both call Release to check their result);
// this package does not build, fetch, sign, serve or quantize anything.
package verify

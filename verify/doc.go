// Package verify checks an lfmq release directory byte for byte against its
// hash lists (release.md §6) and checks any sha256sum-style list.
//
// Every run re-hashes every byte of every listed file, in parallel across
// files; nothing is trusted from an earlier run. A finding (missing, extra,
// size or hash mismatch, unsafe entry, malformed list, disagreeing lists,
// broken pin) is a *MismatchError; Report.Err joins them, so errors.As and
// errors.Is (ErrMissing, ErrExtra, ErrUnsafePath, ErrMalformed, ErrMismatch)
// work on the result.
//
// The sub-packages hold the lists (sums), the deterministic source archive
// (archive), the release builder (bundle) and the hub download (download).
// This package does not build, fetch, serve or quantize anything.
package verify

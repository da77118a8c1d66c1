// Package refcache stores the reference model's log-probs once so that
// candidates can be scored later without running the reference
// (docs/scoring.md, "The reference cache").
//
// A cache file is one zstd stream (klauspost/compress, encoder concurrency
// 1, level SpeedDefault, so the same content gives the same bytes). Inside
// it: the magic "lfmq-refcache-1\n", a little-endian uint32 header length
// and the header as canonical JSON (Header), then every window in corpus,
// record and window order:
//
//	uint32 record, uint32 n, uint32 first, n × uint32 token ids,
//	then for each scored position p = first … n−1:
//	uint32 target, float64 NLL (IEEE bits), uint32 argmax,
//	vocab_size × binary16 log-prob (round to nearest even from float64).
//
// All integers are little-endian. The file's sha256 is written beside it as
// FILE.sha256 (sha256sum format) and recorded in the evidence file; Open
// refuses a file whose hash differs, and Check refuses a header that does
// not match the current reference, tokenizer, context or corpora, naming the
// differing field. Every length read from a file is bounded before it is
// used, so a damaged or hostile file yields an error, never a panic or an
// unbounded allocation.
package refcache

// Package identity names a checkpoint directory by the digests that pin its
// bytes: for an lfmq-1 checkpoint the sha256 of its manifest (which pins
// every other file), for a Hugging Face checkpoint the sha256 of the
// canonical JSON of its top-level files' list (path, size and sha256 of each,
// as the quantizer records its source).
//
// It is the one definition shared by the evidence receipts of lfmq score and
// the /v1/models answer of lfmq serve, so that a served candidate reports
// the same identity the scorer computes for the same directory. It hashes
// bytes only; it does not verify an lfmq-1 checkpoint's files against the
// manifest (format/lfmq1 does) nor load any weights.
package identity

// Package task holds task evidence: what `lfmq eval` measures beside the
// teacher-forced figures of evidence/score. It reads task datasets
// (GSM8K-style word problems with a "#### N" answer line, and
// multiple-choice items scored by likelihood), takes the answer out of a
// model's text by one written rule (Extract), runs the items against an
// OpenAI-compatible server with a bounded number of requests in flight,
// and keeps every item's full text, its answer, its tokens and why it
// ended. A run's summary carries accuracy with a Wilson 95 % interval.
//
// Compare checks that the texts of the same items are byte-identical
// across runs: the release gate that seeded sampling depends neither on
// the batch nor on speculation.
//
// The package neither starts servers nor renders the model card; the
// command (cmd/lfmq) and evidence/card do.
package task

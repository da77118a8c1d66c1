// Package evidence holds the evidence file of lfmq: the JSON record of one
// measurement (its settings, its full figures and the receipts that pin what
// was measured), as docs/design.md §4 and docs/scoring.md, "Output" define it.
//
// Every figure the project reports (model-card tables, release notes) is
// rendered from such a file, never typed by hand. A File is written as
// canonical JSON (format/canonjson) with floats in Go's shortest round-trip
// form, so reading it back and rendering it gives the same table byte for
// byte.
//
// The sub-packages produce and consume files: evidence/corpus reads
// scoring corpora, evidence/score computes the figures (windows, per-token
// quantities, aggregates) and runs the teacher-forced comparison,
// evidence/refcache stores reference log-probs, and evidence/report renders
// Markdown tables and SVG plots. This package does not run models.
package evidence

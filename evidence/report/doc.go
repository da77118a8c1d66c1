// Package report renders evidence files for people: the Markdown table of
// docs/scoring.md, "Output" that model cards and the terminal show, and SVG
// plots: the per-token KL distribution, and line plots over categories
// (lfmq bench's throughput and latency against concurrent streams) on the same frame.
//
// Output depends only on its input, formatted with fixed rules, so the same
// evidence renders the same bytes (golden files in testdata/ pin them). The
// package computes no statistics (evidence/score does).
package report

// Package score computes teacher-forced fidelity figures of candidate
// checkpoints against a reference (docs/scoring.md): the window rule that
// cuts records into model inputs (docs/scoring.md, "Windows"), the
// per-token quantities in float64 over the full vocabulary
// (docs/scoring.md, "Per-token quantities"), their aggregates with
// standard errors (docs/scoring.md, "Statistics"), and Run, which drives
// the engine over corpora and produces an evidence file.
//
// A candidate is a checkpoint directory run in process, or a running lfmq
// serve scored through its /v1/completions prompt log-probs
// (docs/scoring.md, "Scoring a running server"). Either way the
// statistics read, at every scored position, the float32 log-prob row
// sample.LogProbs computes from the logits (the server returns that row;
// Run computes it from the logits of the models it runs), so a served
// candidate and the same checkpoint in process give bit-identical figures.
//
// The numeric functions are plain, deterministic float64 code: every sum is
// taken in one fixed order (token order, vocabulary id order), so the same
// rows always give the same bits. The package does not implement the
// forward pass (engine/model does), does not serve (engine/api does) and
// does not render tables (evidence/report does).
package score

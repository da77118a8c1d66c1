// Package score computes teacher-forced fidelity figures of candidate
// checkpoints against a reference (scoring.md): the window rule that cuts
// records into model inputs (§1), the per-token quantities in float64 over
// the full vocabulary (§2), their aggregates with standard errors (§3), and
// Run, which drives the engine over corpora and produces an evidence file.
//
// The numeric functions are plain, deterministic float64 code: every sum is
// taken in one fixed order (token order, vocabulary id order), so the same
// logits always give the same bits. The package does not implement the
// forward pass (engine/model does) and does not render tables
// (evidence/report does).
package score

// Package quant turns a BF16 Hugging Face LFM2-MoE checkpoint into an
// lfmq-1 checkpoint: it follows the plan of quant/plan, packs every BFP8
// tensor with the codec of format/bfp by round to nearest, quantizes the
// routed experts to BFP4 with GPTQ (docs/gptq.md) or RTN, and writes the
// result with format/lfmq1.
//
// A GPTQ run reads its calibration set with quant/calib (refusing one that
// overlaps the evaluation corpora), collects each MoE layer's statistics
// with quant/hessian by running engine/model (layer by layer, with the
// layers below already quantized), solves every expert matrix with
// quant/gptq, and records every setting and per-expert metric in the
// manifest. It keeps each finished layer in a partial directory so that an
// interrupted run can be resumed to the same bytes.
//
// A GPTQ run (quantizeGPTQ, gptqrun.go) is a sequence of stages, each in
// its own file: prepare (gptqprepare.go: settings, calibration set,
// fingerprint), the dense pass (densepass.go: RTN for what no solve
// writes), the layers (gptqlayers.go: each layer's dense GPTQ file,
// densegptq.go, then its routed experts or FFN, moelayer.go), the head
// (headsolve.go) and finish (gptqfinish.go). They share the calibration
// model (calibration.go), the output being written (gptqoutput.go), the
// progress reporting (gptqprogress.go) and the solver (solve.go); resume
// state is in resume.go and resumerun.go, memory budgeting in solvemem.go
// and runmem.go.
//
// QuantizeDrafter (drafter.go) quantizes a model's DSpark drafter for its
// lfmq-1 checkpoint (docs/lfmq-1.md, "A drafter"): its linear weights to
// BFP8 by round to nearest, written as an lfmq-1 checkpoint of its own
// after MeasureAcceptance has measured, with engine/draft, what that costs
// in tokens per verify step on held-out text.
//
// It does not run the model's maths itself: activations come from engine.
package quant

// Package quant turns a BF16 Hugging Face LFM2-MoE checkpoint into an lfmq-1
// checkpoint: it follows the plan of quant/plan, packs every BFP8 tensor
// with the codec of format/bfp by round to nearest, quantizes the routed
// experts to BFP4 with GPTQ (gptq.md) or RTN, and writes the result with
// format/lfmq1.
//
// A GPTQ run reads its calibration set with quant/calib (refusing one that
// overlaps the evaluation corpora), collects each MoE layer's statistics
// with quant/hessian by running engine/model (layer by layer, with the
// layers below already quantized), solves every expert matrix with
// quant/gptq, and records every setting and per-expert metric in the
// manifest. It keeps each finished layer in a partial directory so that an
// interrupted run can be resumed to the same bytes.
//
// It does not run the model's maths itself: activations come from engine.
package quant

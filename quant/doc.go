// Package quant turns a BF16 Hugging Face LFM2-MoE checkpoint into an lfmq-1
// checkpoint: it follows the plan of quant/plan, packs BFP weights with the
// codec of format/bfp (round to nearest now; GPTQ for the routed experts
// later), and writes the result with format/lfmq1.
//
// It does not run the model itself: calibration activations come from engine.
package quant

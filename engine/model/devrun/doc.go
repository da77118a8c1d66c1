// Package devrun runs an engine/model Model on a device (engine/device:
// OpenCL, or the exact Go twin that tests use): the device runner behind
// model.Runner. New uploads the weights once; each Forward step is the
// same layers as the CPU runner's, in the same order, as kernel launches
// on the device's one queue, so the logits are bit-identical to the CPU
// engine's. A sequence's state (conv states, keys and values in the
// model's KV format) lives in device buffers, freed when the sequence is
// collected; spans come back to the host as rows (kv.Span).
//
// The package does not load checkpoints (engine/model/load calls New when
// its Options name a device) and does not calibrate: an Observer, Layers,
// StartLayer or LastLayer is refused, and so is ReplaceLinear.
package devrun

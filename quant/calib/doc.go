// Package calib reads calibration input for GPTQ and checks it against the
// evaluation corpora (docs/gptq.md §3).
//
// A calibration file is JSONL, each record {"input_ids": […]} (a window used
// exactly as given), {"messages": […], "tools": […]} (a chat, rendered with
// the checkpoint's chat template) or {"text": …} (BOS + ordinary encoding),
// or a safetensors token-id file. Encoded records form one token stream cut
// into windows of a chosen length; a seeded choice picks the windows used,
// and the calibration digest (sha256 of their token ids) identifies the set
// in the manifest. CheckDisjoint refuses a set that shares any 32-token
// window with an evaluation corpus.
//
// The package does not run the model (quant/hessian does) and does not
// score corpora (evidence does); it only turns records into token ids.
package calib

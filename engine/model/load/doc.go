// Package load opens a checkpoint and makes an engine/model Model of it: a
// Hugging Face safetensors checkpoint (single or sharded, BF16) or an
// lfmq-1 checkpoint with BFP8/BFP4 weights.
//
// Load maps the weights without expanding them (or, with Options.Resident,
// reads the files into the process's memory on huge pages): BF16 matrices
// are used in place over the file's bytes and BFP matrices are handed to
// engine/kernels as packed tiles; only small tensors (norms, the conv kernel, the expert
// bias) are converted to float32. Every tensor is checked against the
// config's expected shapes, and every misfit is reported at once
// (*FindingsError of *TensorError). An lfmq-1 checkpoint's files may be
// hashed in the background (Model.Verified). With Options.Device the model
// runs on that device (engine/model/devrun).
//
// The package does not compute: the forward is engine/model's.
package load

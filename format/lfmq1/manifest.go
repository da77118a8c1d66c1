// Package lfmq1 writes and reads the lfmq-1 checkpoint layout of
// docs/lfmq-1.md: global, per-layer and per-MoE-layer safetensors files,
// unmodified copies of the source's config and tokenizer files, and a
// canonical manifest.json that records every tensor's format, shape and
// sha256, every file's sha256 and the quantization settings.
//
// It stores and checks bytes; it does not decide which tensor gets which
// format (quant does) and does not decode BFP tiles (format/bfp does).
package lfmq1

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// FormatName is the value of the manifest's "format" key.
const FormatName = "lfmq-1"

// ManifestFile is the manifest's file name inside a checkpoint.
const ManifestFile = "manifest.json"

// GlobalFile holds the embedding, the final norm and the BFP8 head.
const GlobalFile = "global.safetensors"

// DrafterDir is the one sub-directory a checkpoint may hold: a drafter for
// the model (lfmq quantize --drafter), itself an lfmq-1 checkpoint with its
// own manifest, which the model's manifest does not list and Open does not
// check (docs/lfmq-1.md, "A drafter"). The model's manifest, its identity,
// is the same with or without one.
const DrafterDir = "drafter"

// DrafterArchitecture is the manifest architecture of a drafter's
// checkpoint: a DSpark drafter quantized by lfmq quantize --drafter.
const DrafterArchitecture = "dspark"

// CopiedFiles are the source checkpoint files copied unmodified (those that
// exist).
var CopiedFiles = []string{
	"config.json", "generation_config.json", "tokenizer.json",
	"tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json",
}

// TensorFormat is how a tensor's values are stored.
type TensorFormat string

// The tensor formats of lfmq-1.
const (
	BF16 TensorFormat = "bf16"
	F32  TensorFormat = "f32"
	BFP8 TensorFormat = "bfp8_b"
	BFP4 TensorFormat = "bfp4_b"
)

// IsBFP reports whether the format is a packed block floating-point format.
func (f TensorFormat) IsBFP() bool { return f == BFP8 || f == BFP4 }

// Valid reports whether f is one of the lfmq-1 tensor formats.
func (f TensorFormat) Valid() bool { return f == BF16 || f == F32 || f == BFP8 || f == BFP4 }

// LayerFile returns the name of layer i's file in a model of numLayers layers:
// "layer-NN.safetensors", zero padded to two digits or more.
func LayerFile(i, numLayers int) string {
	return fmt.Sprintf("layer-%0*d.safetensors", width(numLayers), i)
}

// ExpertsFile returns the name of MoE layer i's expert file.
func ExpertsFile(i, numLayers int) string {
	return fmt.Sprintf("experts-%0*d.safetensors", width(numLayers), i)
}

// FFNFile returns the name of layer i's FFN file in a dense checkpoint
// (model_type "lfm2"): "ffn-NN.safetensors", numbered as LayerFile.
func FFNFile(i, numLayers int) string {
	return fmt.Sprintf("ffn-%0*d.safetensors", width(numLayers), i)
}

func width(numLayers int) int {
	w := len(fmt.Sprint(max(numLayers-1, 0)))
	return max(w, 2)
}

// Manifest is the content of manifest.json.
type Manifest struct {
	Format string `json:"format"`
	// Architecture is the source config's model_type: "lfm2_moe" or
	// "lfm2" (dense). Absent in checkpoints written before dense support,
	// which are all "lfm2_moe".
	Architecture string          `json:"architecture,omitempty"`
	LfmqVersion  string          `json:"lfmq_version"`
	CreatedBy    string          `json:"created_by"`
	Source       Source          `json:"source"`
	Quantization Quantization    `json:"quantization"`
	Tensors      []TensorEntry   `json:"tensors"`
	Files        []FileEntry     `json:"files"`
	Metrics      json.RawMessage `json:"metrics"`
	// MetricsSHA256 is the sha256 of the canonical JSON encoding of Metrics.
	MetricsSHA256 string `json:"metrics_sha256"`
}

// Source identifies the checkpoint that was quantized.
type Source struct {
	ConfigSHA256 string      `json:"config_sha256"`
	Files        []FileEntry `json:"files"`
	// Repo and Commit name the hub repository (OWNER/NAME) and the
	// 40-hex commit the source was read from, when it came from the
	// Hugging Face cache (by hub id or by a snapshot's path); absent for
	// any other directory.
	Repo   string `json:"repo,omitempty"`
	Commit string `json:"commit,omitempty"`
}

// Quantization records how each tensor class was produced.
type Quantization struct {
	Experts ClassSpec `json:"experts"`
	Dense   ClassSpec `json:"dense"`
	Head    ClassSpec `json:"head"`
	Kept    ClassSpec `json:"kept"`
	// FFN is the dense checkpoints' class of every layer's FFN w1/w3/w2
	// (BFP4 by GPTQ or RTN, or BFP8 by RTN); absent for LFM2-MoE, whose
	// dense-layer FFNs are in Dense.
	FFN *ClassSpec `json:"ffn,omitempty"`
	// Settings holds every setting of the method (GPTQ's act order, block
	// size, damping, calibration digest …); an RTN run records only its
	// exponent rules. Absent in checkpoints written before those existed.
	Settings json.RawMessage `json:"settings,omitempty"`
}

// ClassSpec is the method and the formats used for one class of tensors.
type ClassSpec struct {
	Method  string         `json:"method"`
	Formats []TensorFormat `json:"formats"`
	Tensors int            `json:"tensors"`
}

// TensorEntry describes one stored tensor.
type TensorEntry struct {
	Name        string       `json:"name"`
	File        string       `json:"file"`
	Format      TensorFormat `json:"format"`
	Shape       []int64      `json:"shape"`
	DType       string       `json:"dtype"`
	StoredShape []int64      `json:"stored_shape"`
	SHA256      string       `json:"sha256"`
}

// FileEntry describes one file by its path relative to the checkpoint
// directory, its size and its sha256.
type FileEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Tensor returns the entry of the named tensor.
func (m *Manifest) Tensor(name string) (TensorEntry, bool) {
	i, ok := slices.BinarySearchFunc(m.Tensors, name, func(e TensorEntry, n string) int {
		return strings.Compare(e.Name, n)
	})
	if !ok {
		return TensorEntry{}, false
	}
	return m.Tensors[i], true
}

package wire

import (
	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/sample"
)

// ModelList is the GET /v1/models answer.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model is one served model as GET /v1/models lists it (and GET
// /v1/models/{id} answers); Lfmq is set by lfmq serve only.
type Model struct {
	ID          string       `json:"id"`
	Object      string       `json:"object"`
	Created     int64        `json:"created"`
	OwnedBy     string       `json:"owned_by"`
	MaxModelLen int          `json:"max_model_len"`
	Lfmq        *ModelDetail `json:"lfmq"`
}

// ModelDetail is lfmq's own part of a Model: the checkpoint and binary
// served and the sampling defaults.
type ModelDetail struct {
	Identity
	SamplingDefaults sample.Defaults `json:"sampling_defaults"`
}

// Identity is what /v1/models reports about the served checkpoint and the
// binary serving it, so that a scorer can pin what it scored.
type Identity struct {
	CheckpointFormat   string `json:"checkpoint_format"`
	CheckpointIdentity string `json:"checkpoint_identity"`
	ManifestSHA256     string `json:"manifest_sha256,omitempty"`
	ConfigSHA256       string `json:"config_sha256"`
	TokenizerSHA256    string `json:"tokenizer_sha256"`
	VocabSize          int    `json:"vocab_size"`
	LfmqVersion        string `json:"lfmq_version"`
	SourceDigest       string `json:"source_digest"`
	BinarySHA256       string `json:"binary_sha256"`
	// Device is the engine the model runs on: the CPU, or a device with
	// its driver and kernel digest.
	Device device.Info `json:"device"`
	// KVCacheDType is the KV cache's number format: f32, bf16 or bfp8.
	KVCacheDType string `json:"kv_cache_dtype"`
}

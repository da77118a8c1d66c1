package evidence

import (
	"fmt"
	"math"
	"strconv"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/internal/strictjson"
)

// Format is the value of File.Format: the version of this file layout.
const Format = "lfmq-evidence-1"

// KindScore is File.Kind for the output of lfmq score.
const KindScore = "score"

// WindowRule names the window rule the figures were computed with
// (docs/scoring.md, "Windows"); a change of the rule changes this string.
const WindowRule = "scoring.md#1/v1"

// AllCorpora is the Result.Corpus of the rows pooled over every scored token
// of every corpus (not an average of the corpus figures).
const AllCorpora = "all"

// The values of Result.Kind.
const (
	// KindCandidate is a candidate checkpoint scored against the reference.
	KindCandidate = "candidate"
	// KindNoiseFloor is the reference against itself run in chunks through
	// the incremental path (docs/scoring.md, "The noise floor").
	KindNoiseFloor = "noise-floor"
	// KindStorageFloor is the reference against its own log-probs stored as
	// binary16 (docs/scoring.md, "The reference cache").
	KindStorageFloor = "storage-floor"
)

// File is one evidence file.
type File struct {
	// Format is always Format.
	Format string `json:"format"`
	// Kind says what was measured (KindScore).
	Kind     string   `json:"kind"`
	Settings Settings `json:"settings"`
	Receipts Receipts `json:"receipts"`
	// Results holds one row per variant and corpus, the corpora in the
	// order given and the pooled AllCorpora row last for each variant.
	Results []Result `json:"results"`
	// Comparisons holds the paired differences between candidates.
	Comparisons []Comparison `json:"comparisons,omitempty"`
	// Notes are sentences printed under the table (e.g. that the chunked
	// noise floor is exactly zero).
	Notes  []string `json:"notes,omitempty"`
	Timing Timing   `json:"timing"`
}

// Settings are the parameters the figures depend on.
type Settings struct {
	// Ctx is the window length C actually used (after capping by the
	// models' context).
	Ctx        int    `json:"ctx"`
	WindowRule string `json:"window_rule"`
	// NoiseFloor reports whether the noise and storage floors were measured;
	// Chunk is the chunk length of the noise floor's incremental path.
	NoiseFloor bool `json:"noise_floor"`
	Chunk      int  `json:"chunk,omitempty"`
	// MaxRecords, when positive, is the number of records scored from the
	// start of each corpus; zero means every record.
	MaxRecords int `json:"max_records,omitempty"`
}

// Receipts pin everything the figures depend on (docs/design.md §4).
type Receipts struct {
	LfmqVersion string `json:"lfmq_version"`
	// SourceDigest is the sha256 of the source archive of a release build.
	SourceDigest string `json:"source_digest,omitempty"`
	// BinarySHA256 is the sha256 of the running executable.
	BinarySHA256 string `json:"binary_sha256"`
	// Command is the command line, in the canonical form the command
	// rebuilds from its options.
	Command string `json:"command"`
	// Started is the start time, RFC 3339 in UTC.
	Started         string       `json:"started"`
	Machine         Machine      `json:"machine"`
	Reference       Checkpoint   `json:"reference"`
	Candidates      []Checkpoint `json:"candidates"`
	TokenizerSHA256 string       `json:"tokenizer_sha256"`
	Corpora         []Corpus     `json:"corpora"`
	// ReferenceCache is the reference log-prob cache written or read.
	ReferenceCache *Cache `json:"reference_cache,omitempty"`
}

// Machine describes where the measurement ran.
type Machine struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	GoVersion string `json:"go_version"`
	// Device is the accelerator the models ran on; absent for the CPU
	// engine.
	Device *device.Info `json:"device,omitempty"`
}

// Checkpoint identifies one checkpoint involved in a measurement.
type Checkpoint struct {
	// Name is the label of the checkpoint in tables ("BF16" for the
	// reference, the NAME=DIR or NAME=URL label for a candidate).
	Name string `json:"name"`
	// Dir is the directory as given on the command line; empty for a
	// served candidate.
	Dir string `json:"dir"`
	// URL is, for a served candidate (an lfmq serve scored through its
	// OpenAI-compatible API), the server's base URL.
	URL string `json:"url,omitempty"`
	// ServedModel is the model id the server reported in /v1/models.
	ServedModel string `json:"served_model,omitempty"`
	// BinarySHA256, LfmqVersion and SourceDigest are, for a served
	// candidate, what the server reported of the executable it runs.
	BinarySHA256 string `json:"binary_sha256,omitempty"`
	LfmqVersion  string `json:"lfmq_version,omitempty"`
	SourceDigest string `json:"source_digest,omitempty"`
	// Format is "hf" or "lfmq-1".
	Format string `json:"format"`
	// Identity is the manifest sha256 of an lfmq-1 checkpoint, and for a
	// Hugging Face checkpoint the sha256 of the canonical JSON of its
	// Source (config sha256 and every file's path, size and sha256), as
	// format/identity computes it. For a served candidate it is the
	// identity the server reported for the checkpoint it serves.
	Identity       string `json:"identity"`
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	ConfigSHA256   string `json:"config_sha256"`
	// Files lists every file of a Hugging Face checkpoint (an lfmq-1
	// manifest lists its own).
	Files []lfmq1.FileEntry `json:"files,omitempty"`
	// SourceConfigSHA256 is, for an lfmq-1 checkpoint, the config sha256 of
	// the checkpoint it was quantized from.
	SourceConfigSHA256 string `json:"source_config_sha256,omitempty"`
	// Experts summarises how the routed experts are stored, from the
	// manifest ("rtn bfp4_b", "keep bf16").
	Experts string `json:"experts,omitempty"`
	// Repo and Commit name the hub repository and commit of a Hugging
	// Face checkpoint read from the Hugging Face cache; SourceRepo and
	// SourceCommit those an lfmq-1 manifest records of its source.
	Repo         string `json:"repo,omitempty"`
	Commit       string `json:"commit,omitempty"`
	SourceRepo   string `json:"source_repo,omitempty"`
	SourceCommit string `json:"source_commit,omitempty"`
	// KVCacheDType is the KV cache format a candidate ran with (in
	// process: lfmq score's --kv-cache-dtype; served: what the server
	// reported), bf16 or bfp8; absent for the float32 cache.
	KVCacheDType string `json:"kv_cache_dtype,omitempty"`
}

// Corpus identifies one scored corpus.
type Corpus struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	// Records, Windows and Tokens count the scored records, their windows
	// and their scored tokens.
	Records int `json:"records"`
	Windows int `json:"windows"`
	Tokens  int `json:"tokens"`
}

// Cache identifies the reference log-prob cache of a run.
type Cache struct {
	// Mode is "saved" (written by this run) or "used" (read instead of
	// running the reference).
	Mode   string `json:"mode"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Result is one row: a variant scored on one corpus (or AllCorpora).
type Result struct {
	// Candidate is the variant's name.
	Candidate string `json:"candidate"`
	// Kind is KindCandidate, KindNoiseFloor or KindStorageFloor.
	Kind   string `json:"kind"`
	Corpus string `json:"corpus"`
	Stats
}

// Stats are the aggregates of docs/scoring.md, "Statistics" over N scored
// tokens. SEs are nil (JSON null) for N ≤ 10.
type Stats struct {
	Tokens  int   `json:"tokens"`
	PPLRef  Float `json:"ppl_ref"`
	PPLCand Float `json:"ppl_cand"`
	// LnRatio is the mean paired difference d̄ = mean(nll_c − nll_r).
	LnRatio   Float  `json:"ln_ratio"`
	LnRatioSE *Float `json:"ln_ratio_se"`
	// DPPLPct is 100·(exp(d̄) − 1), its SE by the delta method.
	DPPLPct   Float  `json:"dppl_pct"`
	DPPLPctSE *Float `json:"dppl_pct_se"`
	// Top1 is the fraction of tokens whose argmax agrees.
	Top1   Float  `json:"top1"`
	Top1SE *Float `json:"top1_se"`
	// KL(ref ‖ cand) per token: mean ± SE and order statistics.
	KLMean   Float  `json:"kl_mean"`
	KLMeanSE *Float `json:"kl_mean_se"`
	KLMedian Float  `json:"kl_median"`
	KLP90    Float  `json:"kl_p90"`
	KLP99    Float  `json:"kl_p99"`
	KLP999   Float  `json:"kl_p999"`
	KLMin    Float  `json:"kl_min"`
	KLMax    Float  `json:"kl_max"`
	// RMSDP is sqrt(mean Δp²), Δp = p_c(target) − p_r(target).
	RMSDP Float `json:"rms_dp"`
}

// Comparison is the paired difference of two candidates on the same tokens
// (docs/scoring.md, "Statistics"): B − A per token, averaged, with its paired SE.
type Comparison struct {
	Corpus string `json:"corpus"`
	A      string `json:"a"`
	B      string `json:"b"`
	Tokens int    `json:"tokens"`
	// KLDiff is mean(KL_B,t − KL_A,t).
	KLDiff   Float  `json:"kl_diff"`
	KLDiffSE *Float `json:"kl_diff_se"`
	// NLLDiff is mean(nll_B,t − nll_A,t), the log of the PPL ratio B/A.
	NLLDiff   Float  `json:"nll_diff"`
	NLLDiffSE *Float `json:"nll_diff_se"`
}

// Timing records how long scoring took (not part of the figures).
type Timing struct {
	Seconds Float `json:"seconds"`
	// Tokens is the number of token positions run through a model
	// (every window position of every model pass).
	Tokens          int   `json:"tokens"`
	TokensPerSecond Float `json:"tokens_per_second"`
}

// Float is a float64 written in JSON with Go's shortest round-trip
// formatting (strconv 'g', -1), as docs/scoring.md, "Output" requires, so
// that a file read back renders the same text. NaN and infinities cannot be written.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, fmt.Errorf("evidence: %v cannot be written to an evidence file", x)
	}
	return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	x, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("evidence: %q is not a number", b)
	}
	*f = Float(x)
	return nil
}

// Ptr returns a pointer to x as a Float, for the nullable fields.
func Ptr(x float64) *Float { f := Float(x); return &f }

// Marshal returns the canonical JSON of f.
func Marshal(f *File) ([]byte, error) {
	return canonjson.Marshal(f)
}

// maxFileBytes bounds an evidence file before it is parsed: a real one is a
// few tens of kilobytes.
const maxFileBytes = 64 << 20

// ParseError reports an evidence file that cannot be used.
type ParseError struct {
	Name  string // file name
	Field string // the offending field, if known
	Msg   string
}

func (e *ParseError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("evidence: %s: %s: %s", e.Name, e.Field, e.Msg)
	}
	return fmt.Sprintf("evidence: %s: %s", e.Name, e.Msg)
}

// Parse decodes an evidence file; name is used in errors. Unknown fields,
// a wrong format or kind, trailing data and rows naming no corpus or
// candidate are refused.
func Parse(name string, data []byte) (*File, error) {
	var f File
	if err := strictjson.Unmarshal(data, maxFileBytes, &f); err != nil {
		return nil, &ParseError{Name: name, Msg: err.Error()}
	}
	if f.Format != Format {
		return nil, &ParseError{Name: name, Field: "format", Msg: fmt.Sprintf("%q, want %q", f.Format, Format)}
	}
	if f.Kind != KindScore {
		return nil, &ParseError{Name: name, Field: "kind", Msg: fmt.Sprintf("%q, want %q", f.Kind, KindScore)}
	}
	for i, r := range f.Results {
		field := fmt.Sprintf("results[%d]", i)
		switch {
		case r.Candidate == "":
			return nil, &ParseError{Name: name, Field: field + ".candidate", Msg: "empty"}
		case r.Corpus == "":
			return nil, &ParseError{Name: name, Field: field + ".corpus", Msg: "empty"}
		case r.Kind != KindCandidate && r.Kind != KindNoiseFloor && r.Kind != KindStorageFloor:
			return nil, &ParseError{Name: name, Field: field + ".kind", Msg: fmt.Sprintf("unknown kind %q", r.Kind)}
		case r.Tokens < 0:
			return nil, &ParseError{Name: name, Field: field + ".tokens", Msg: "negative"}
		}
	}
	return &f, nil
}

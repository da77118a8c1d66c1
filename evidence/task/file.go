package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/internal/strictjson"
)

// Format is the "format" of a task evidence file.
const Format = "lfmq-eval-1"

// File is one `lfmq eval` result: the settings, the receipts and one run
// per seed, each with its summary and every item.
type File struct {
	Format   string   `json:"format"`
	Task     Kind     `json:"task"`
	Settings Settings `json:"settings"`
	Receipts Receipts `json:"receipts"`
	Runs     []Run    `json:"runs"`
}

// Settings are what the texts and scores depend on.
type Settings struct {
	// Label names the run in tables (--label; default the file's name).
	Label string `json:"label,omitempty"`
	// Limit is --limit (0: every item).
	Limit     int `json:"limit,omitempty"`
	MaxTokens int `json:"max_tokens,omitempty"`
	// Concurrency is the number of requests kept in flight.
	Concurrency int `json:"concurrency"`
	// SamplingPreset is the preset the sampling fields came from, if any.
	SamplingPreset string `json:"sampling_preset,omitempty"`
	// Sampling is the sampling fields sent with every request, as sent.
	Sampling Sampling `json:"sampling"`
	// Seeds are the runs' seeds, one run each.
	Seeds []uint64 `json:"seeds,omitempty"`
	// Scoring is, for the choice task, how choices were scored:
	// "in-process" or "completions-echo".
	Scoring string `json:"scoring,omitempty"`
}

// Sampling is a request's sampling fields; nil fields are not sent (the
// server's defaults apply).
type Sampling struct {
	Temperature       *evidence.Float `json:"temperature,omitempty"`
	TopP              *evidence.Float `json:"top_p,omitempty"`
	TopK              *int            `json:"top_k,omitempty"`
	MinP              *evidence.Float `json:"min_p,omitempty"`
	RepetitionPenalty *evidence.Float `json:"repetition_penalty,omitempty"`
}

// String names the fields as sent ("temperature 0.6, top_p 0.95"), or
// "server defaults" when none was.
func (s Sampling) String() string {
	var parts []string
	num := func(name string, v *evidence.Float) {
		if v != nil {
			parts = append(parts, name+" "+strconv.FormatFloat(float64(*v), 'g', -1, 64))
		}
	}
	num("temperature", s.Temperature)
	num("top_p", s.TopP)
	if s.TopK != nil {
		parts = append(parts, "top_k "+strconv.Itoa(*s.TopK))
	}
	num("min_p", s.MinP)
	num("repetition_penalty", s.RepetitionPenalty)
	if len(parts) == 0 {
		return "server defaults"
	}
	return strings.Join(parts, ", ")
}

// CheckpointIdentity is the identity of the checkpoint a task run ran on:
// the in-process checkpoint's (its manifest sha256 for lfmq-1), else the
// one lfmq serve reported in /v1/models for the model asked; "" when the
// server did not say (another server).
func CheckpointIdentity(f *File) string {
	if c := f.Receipts.Checkpoint; c != nil {
		if c.ManifestSHA256 != "" {
			return c.ManifestSHA256
		}
		return c.Identity
	}
	var list struct {
		Data []struct {
			ID   string `json:"id"`
			Lfmq *struct {
				ManifestSHA256     string `json:"manifest_sha256"`
				CheckpointIdentity string `json:"checkpoint_identity"`
			} `json:"lfmq"`
		} `json:"data"`
	}
	if json.Unmarshal(f.Receipts.Server.Models, &list) != nil {
		return ""
	}
	for _, d := range list.Data {
		if d.ID == f.Receipts.Server.Model && d.Lfmq != nil {
			if d.Lfmq.ManifestSHA256 != "" {
				return d.Lfmq.ManifestSHA256
			}
			return d.Lfmq.CheckpointIdentity
		}
	}
	return ""
}

// Receipts pin what the results depend on (docs/design.md §4).
type Receipts struct {
	LfmqVersion  string           `json:"lfmq_version"`
	BinarySHA256 string           `json:"binary_sha256"`
	Command      string           `json:"command"`
	Started      string           `json:"started"`
	Machine      evidence.Machine `json:"machine"`
	// Server is the server asked (for an in-process run, the engine's own
	// server on a loopback port).
	Server Server `json:"server"`
	// Checkpoint is the checkpoint of an in-process run.
	Checkpoint *evidence.Checkpoint `json:"checkpoint,omitempty"`
	// TokenizerSHA256 is the tokenizer.json a choice task over HTTP
	// tokenized with.
	TokenizerSHA256 string  `json:"tokenizer_sha256,omitempty"`
	Dataset         Dataset `json:"dataset"`
}

// Server identifies the server that answered.
type Server struct {
	// URL is the base URL (empty for an in-process run).
	URL string `json:"url,omitempty"`
	// Model is the model id asked for.
	Model string `json:"model"`
	// Models is the server's /v1/models answer, compacted: lfmq serve
	// reports its checkpoint identity and binary there.
	Models json.RawMessage `json:"models"`
}

// Dataset identifies the items.
type Dataset struct {
	// Path is the file as given, or its path in the hub cache.
	Path string `json:"path"`
	// Repo and Revision are a hub dataset's id (OWNER/NAME) and the
	// commit its files came from.
	Repo     string `json:"repo,omitempty"`
	Revision string `json:"revision,omitempty"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	// Items is the number of items in the file; the runs ask the first
	// Settings.Limit of them.
	Items int `json:"items"`
}

// Run is one pass over the items.
type Run struct {
	// Seed is the seed sent with every request (absent: none was sent).
	Seed    *uint64      `json:"seed,omitempty"`
	Summary Summary      `json:"summary"`
	Items   []ItemResult `json:"items"`
}

// Summary is a run's figures.
type Summary struct {
	Items   int `json:"items"`
	Correct int `json:"correct"`
	// Accuracy is Correct/Items; WilsonLow and WilsonHigh its Wilson 95 %
	// score interval.
	Accuracy   evidence.Float `json:"accuracy"`
	WilsonLow  evidence.Float `json:"wilson_low"`
	WilsonHigh evidence.Float `json:"wilson_high"`
	// Truncated counts items that ended at the token limit (finish reason
	// "length"); NoAnswer items whose text held no number.
	Truncated int `json:"truncated"`
	NoAnswer  int `json:"no_answer"`
	// MeanNewTokens is the mean of the items' generated tokens.
	MeanNewTokens evidence.Float `json:"mean_new_tokens"`
	WallSeconds   evidence.Float `json:"wall_seconds"`
}

// ItemResult is one item's outcome.
type ItemResult struct {
	ID string `json:"id"`
	// Prompt is the user message (GSM8K) or the context (choice).
	Prompt string `json:"prompt"`
	// Reasoning is the model's reasoning (the server's
	// reasoning_content), Text its final answer; together the full text.
	Reasoning string `json:"reasoning,omitempty"`
	Text      string `json:"text"`
	// Answer is the extracted answer ("" when none was found), Rule the
	// rule that found it; Gold the right answer.
	Answer  string `json:"answer"`
	Rule    Rule   `json:"rule,omitempty"`
	Gold    string `json:"gold"`
	Correct bool   `json:"correct"`
	// PromptTokens and GeneratedTokens are the server's usage figures.
	PromptTokens    int    `json:"prompt_tokens"`
	GeneratedTokens int    `json:"generated_tokens"`
	FinishReason    string `json:"finish_reason,omitempty"`
	Truncated       bool   `json:"truncated,omitempty"`
	// Scores are a choice item's per-choice log-likelihoods (the sum of
	// its tokens' log-probs after the context).
	Scores []evidence.Float `json:"scores,omitempty"`
}

// Wilson95 returns the Wilson score interval of k successes in n trials
// at 95 % confidence (z = Φ⁻¹(0.975)). Unlike the normal approximation it
// stays inside [0, 1] and is not empty at k = 0 or k = n. n = 0 gives
// [0, 1]: nothing is known.
func Wilson95(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	const z = 1.959963984540054
	nn := float64(n)
	p := float64(k) / nn
	z2 := z * z
	den := 1 + z2/nn
	center := (p + z2/(2*nn)) / den
	half := z / den * math.Sqrt(p*(1-p)/nn+z2/(4*nn*nn))
	return max(0, center-half), min(1, center+half)
}

// Summarize computes a run's summary from its items.
func Summarize(items []ItemResult, wallSeconds float64) Summary {
	s := Summary{Items: len(items), WallSeconds: evidence.Float(wallSeconds)}
	tokens := 0
	for _, it := range items {
		if it.Correct {
			s.Correct++
		}
		if it.Truncated {
			s.Truncated++
		}
		if it.Answer == "" {
			s.NoAnswer++
		}
		tokens += it.GeneratedTokens
	}
	if s.Items > 0 {
		s.Accuracy = evidence.Float(float64(s.Correct) / float64(s.Items))
		s.MeanNewTokens = evidence.Float(float64(tokens) / float64(s.Items))
	}
	lo, hi := Wilson95(s.Correct, s.Items)
	s.WilsonLow, s.WilsonHigh = evidence.Float(lo), evidence.Float(hi)
	return s
}

// Marshal returns the canonical JSON of f.
func Marshal(f *File) ([]byte, error) { return canonjson.Marshal(f) }

// Write writes f to path as canonical JSON, atomically.
func Write(path string, f *File) error {
	data, err := Marshal(f)
	if err != nil {
		return err
	}
	return durable.WriteFile(path, data)
}

// maxFileBytes bounds a task evidence file: 50 items of 4,096 tokens
// are about a megabyte.
const maxFileBytes = 256 << 20

// ParseError is a task evidence file that cannot be used.
type ParseError struct {
	Name  string
	Field string
	Msg   string
}

func (e *ParseError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("task: %s: %s: %s", e.Name, e.Field, e.Msg)
	}
	return fmt.Sprintf("task: %s: %s", e.Name, e.Msg)
}

// IsFile reports whether data looks like a task evidence file (its
// "format" is Format), so that a directory of evidence can hold both
// kinds.
func IsFile(data []byte) bool {
	var f struct {
		Format string `json:"format"`
	}
	return json.Unmarshal(data, &f) == nil && f.Format == Format
}

// Parse decodes a task evidence file; name is used in errors. Unknown
// fields, another format, runs of another item count and duplicate item
// ids are refused.
func Parse(name string, data []byte) (*File, error) {
	var f File
	if err := strictjson.Unmarshal(data, maxFileBytes, &f); err != nil {
		return nil, &ParseError{Name: name, Msg: err.Error()}
	}
	if f.Format != Format {
		return nil, &ParseError{Name: name, Field: "format", Msg: fmt.Sprintf("%q, expected %q", f.Format, Format)}
	}
	if _, err := ParseKind(string(f.Task)); err != nil {
		return nil, &ParseError{Name: name, Field: "task", Msg: err.Error()}
	}
	if len(f.Runs) == 0 {
		return nil, &ParseError{Name: name, Field: "runs", Msg: "no runs"}
	}
	for i, r := range f.Runs {
		if r.Summary.Items != len(r.Items) {
			return nil, &ParseError{Name: name, Field: fmt.Sprintf("runs[%d].summary.items", i), Msg: fmt.Sprintf("%d, but the run holds %d items", r.Summary.Items, len(r.Items))}
		}
		seen := map[string]bool{}
		for j, it := range r.Items {
			if seen[it.ID] {
				return nil, &ParseError{Name: name, Field: fmt.Sprintf("runs[%d].items[%d].id", i, j), Msg: fmt.Sprintf("%q appears twice", it.ID)}
			}
			seen[it.ID] = true
		}
	}
	return &f, nil
}

// Read reads and parses the task evidence file at path.
func Read(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("task: reading %s: %w", path, err)
	}
	return Parse(path, data)
}

// ItemLine is one line of the per-item JSONL: an item's result and the
// seed of its run.
type ItemLine struct {
	Seed *uint64 `json:"seed,omitempty"`
	ItemResult
}

// WriteItems writes the runs' items as JSONL, one compact object a line,
// run after run, atomically: the per-item file beside the summary.
func WriteItems(path string, runs []Run) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // texts hold <think> and the like
	for _, r := range runs {
		for _, it := range r.Items {
			if err := enc.Encode(ItemLine{Seed: r.Seed, ItemResult: it}); err != nil {
				return err
			}
		}
	}
	return durable.WriteFile(path, b.Bytes())
}

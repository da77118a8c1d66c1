package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/internal/strictjson"
)

// GateFormat is the "format" of a gate file (`lfmq eval compare --out`).
const GateFormat = "lfmq-eval-gate-1"

// Gate is the result of comparing the texts of several runs: the release
// gate "same texts at any concurrency, speculation on or off".
type Gate struct {
	Format string `json:"format"`
	// Runs are the files compared, the first being the one the others
	// are compared with.
	Runs []GateRun `json:"runs"`
	// Seeds and Items are what was compared in each file: every run (one
	// per seed) and every item of each.
	Seeds     []uint64 `json:"seeds,omitempty"`
	Items     int      `json:"items"`
	Identical bool     `json:"identical"`
	// Differing counts items whose texts differ from the first file's,
	// over every file and seed.
	Differing int `json:"differing"`
	// First is the first difference found, in file, seed and item order.
	First *Difference `json:"first_difference,omitempty"`
}

// GateRun names one compared file and the settings that set it apart.
type GateRun struct {
	Path        string   `json:"path"`
	Label       string   `json:"label,omitempty"`
	SHA256      string   `json:"sha256"`
	Concurrency int      `json:"concurrency"`
	Server      string   `json:"server"`
	Sampling    Sampling `json:"sampling"`
}

// Difference is where a run's texts first differ from the first file's.
type Difference struct {
	// Path is the file that differs; Seed its run's seed.
	Path string  `json:"path"`
	Seed *uint64 `json:"seed,omitempty"`
	// Item is the item's id; Field "reasoning", "text" or "item" (the item
	// is missing from one of the two).
	Item  string `json:"item"`
	Field string `json:"field"`
	// Offset is the byte offset of the first differing byte in Field.
	Offset int `json:"offset"`
	// Want and Got are a few characters from Offset in the first file
	// and in Path.
	Want string `json:"want"`
	Got  string `json:"got"`
}

func (d *Difference) String() string {
	seed := ""
	if d.Seed != nil {
		seed = " (seed " + strconv.FormatUint(*d.Seed, 10) + ")"
	}
	if d.Field == "item" {
		return fmt.Sprintf("%s%s: item %s: %s", d.Path, seed, d.Item, d.Got)
	}
	return fmt.Sprintf("%s%s: item %s: %s differs at byte %d: %q, expected %q", d.Path, seed, d.Item, d.Field, d.Offset, d.Got, d.Want)
}

// CompareError is a set of files that cannot be compared: another task,
// dataset, set of seeds, model, sampling or token limit.
type CompareError struct {
	Path string
	Msg  string
}

func (e *CompareError) Error() string { return fmt.Sprintf("task: %s: %s", e.Path, e.Msg) }

// Compare compares the texts (reasoning and final answer) of the same
// items in every run of files[1:] with those of files[0], byte for byte.
// paths name the files in the result. The files must be of the same task
// and dataset (by sha256), hold runs of the same seeds, and have asked the
// same model (by checkpoint identity where the receipts hold one, else by
// the served model's id) with the same sampling fields and token limit:
// only then must their texts agree.
func Compare(paths []string, files []*File, data [][]byte) (*Gate, error) {
	if len(files) < 2 || len(paths) != len(files) || len(data) != len(files) {
		return nil, errors.New("task: compare needs two files or more")
	}
	base := files[0]
	g := &Gate{Format: GateFormat, Identical: true}
	for i, f := range files {
		g.Runs = append(g.Runs, GateRun{Path: paths[i], Label: f.Settings.Label, SHA256: evidence.HashBytes(data[i]),
			Concurrency: f.Settings.Concurrency, Server: serverName(f), Sampling: f.Settings.Sampling})
		if i == 0 {
			continue
		}
		switch {
		case f.Task != base.Task:
			return nil, &CompareError{Path: paths[i], Msg: fmt.Sprintf("task %s, but %s is task %s", f.Task, paths[0], base.Task)}
		case f.Receipts.Dataset.SHA256 != base.Receipts.Dataset.SHA256:
			return nil, &CompareError{Path: paths[i], Msg: fmt.Sprintf("dataset sha256 %s, but %s used %s", f.Receipts.Dataset.SHA256, paths[0], base.Receipts.Dataset.SHA256)}
		case !sameSeeds(f.Runs, base.Runs):
			return nil, &CompareError{Path: paths[i], Msg: fmt.Sprintf("runs of seeds %s, but %s holds seeds %s", seedList(f.Runs), paths[0], seedList(base.Runs))}
		case modelKey(f) != modelKey(base):
			return nil, &CompareError{Path: paths[i], Msg: fmt.Sprintf("%s, but %s ran %s", modelKey(f), paths[0], modelKey(base))}
		case f.Settings.Sampling.String() != base.Settings.Sampling.String():
			return nil, &CompareError{Path: paths[i], Msg: fmt.Sprintf("sampling %s, but %s sent %s", f.Settings.Sampling, paths[0], base.Settings.Sampling)}
		case f.Settings.MaxTokens != base.Settings.MaxTokens:
			return nil, &CompareError{Path: paths[i], Msg: fmt.Sprintf("max_tokens %d, but %s used %d", f.Settings.MaxTokens, paths[0], base.Settings.MaxTokens)}
		}
	}
	for _, r := range base.Runs {
		if r.Seed != nil {
			g.Seeds = append(g.Seeds, *r.Seed)
		}
	}
	g.Items = len(base.Runs[0].Items)
	for i := 1; i < len(files); i++ {
		for k, want := range base.Runs {
			got := files[i].Runs[k]
			for _, d := range compareRun(paths[i], want, got) {
				g.Identical = false
				g.Differing++
				if g.First == nil {
					d := d
					g.First = &d
				}
			}
		}
	}
	return g, nil
}

// compareRun returns one difference per item of want or got whose texts
// differ, in want's item order and then got's extra items.
func compareRun(path string, want, got Run) []Difference {
	var out []Difference
	byID := map[string]*ItemResult{}
	for j := range got.Items {
		byID[got.Items[j].ID] = &got.Items[j]
	}
	inWant := map[string]bool{}
	for _, w := range want.Items {
		inWant[w.ID] = true
		g, ok := byID[w.ID]
		if !ok {
			out = append(out, Difference{Path: path, Seed: want.Seed, Item: w.ID, Field: "item", Got: "missing from this file"})
			continue
		}
		for _, f := range [][3]string{{"reasoning", w.Reasoning, g.Reasoning}, {"text", w.Text, g.Text}} {
			if f[1] != f[2] {
				off := firstDiff(f[1], f[2])
				out = append(out, Difference{Path: path, Seed: want.Seed, Item: w.ID, Field: f[0], Offset: off,
					Want: excerpt(f[1], off), Got: excerpt(f[2], off)})
				break
			}
		}
	}
	for _, g := range got.Items {
		if !inWant[g.ID] {
			out = append(out, Difference{Path: path, Seed: want.Seed, Item: g.ID, Field: "item", Got: "not in the first file"})
		}
	}
	return out
}

// firstDiff is the offset of the first byte where a and b differ.
func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// excerpt is up to 24 bytes of s from off, cut back to whole characters.
func excerpt(s string, off int) string {
	if off >= len(s) {
		return ""
	}
	end := min(len(s), off+24)
	for end < len(s) && end > off && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[off:end]
}

// modelKey names the model a file's runs asked: "checkpoint" and the
// first 12 hex digits of its identity where the receipts hold one (in
// process, or lfmq serve's /v1/models), else the served model's id.
func modelKey(f *File) string {
	if id := CheckpointIdentity(f); id != "" {
		return "checkpoint " + id[:min(12, len(id))]
	}
	return fmt.Sprintf("model %q", f.Receipts.Server.Model)
}

func sameSeeds(a, b []Run) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i].Seed == nil) != (b[i].Seed == nil) || (a[i].Seed != nil && *a[i].Seed != *b[i].Seed) {
			return false
		}
	}
	return true
}

func seedList(runs []Run) string {
	var b bytes.Buffer
	for i, r := range runs {
		if i > 0 {
			b.WriteByte(',')
		}
		if r.Seed == nil {
			b.WriteString("none")
		} else {
			b.WriteString(strconv.FormatUint(*r.Seed, 10))
		}
	}
	return b.String()
}

// serverName is how a run's server is named in a gate: its URL, or
// "in-process".
func serverName(f *File) string {
	if f.Receipts.Server.URL != "" {
		return f.Receipts.Server.URL
	}
	return "in-process"
}

// MarshalGate returns the canonical JSON of g.
func MarshalGate(g *Gate) ([]byte, error) { return canonjson.Marshal(g) }

// IsGate reports whether data looks like a gate file.
func IsGate(data []byte) bool {
	var f struct {
		Format string `json:"format"`
	}
	return json.Unmarshal(data, &f) == nil && f.Format == GateFormat
}

// ParseGate decodes a gate file; name is used in errors.
func ParseGate(name string, data []byte) (*Gate, error) {
	var g Gate
	if err := strictjson.Unmarshal(data, maxFileBytes, &g); err != nil {
		return nil, &ParseError{Name: name, Msg: err.Error()}
	}
	if g.Format != GateFormat {
		return nil, &ParseError{Name: name, Field: "format", Msg: fmt.Sprintf("%q, expected %q", g.Format, GateFormat)}
	}
	if len(g.Runs) < 2 {
		return nil, &ParseError{Name: name, Field: "runs", Msg: "fewer than two runs"}
	}
	if g.Identical != (g.First == nil) {
		return nil, &ParseError{Name: name, Field: "identical", Msg: "disagrees with first_difference"}
	}
	return &g, nil
}

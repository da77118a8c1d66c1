// Package inspect describes a checkpoint directory, Hugging Face or lfmq-1,
// as a list of tensors with their format, logical shape and stored bytes, plus
// totals per format.
//
// It reads headers and manifests (and, for lfmq-1, checks the files against
// the manifest); it does not decode tensor values.
package inspect

import (
	"sort"

	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// Kind is the layout of an inspected directory.
type Kind string

// The layouts inspect understands.
const (
	HuggingFace Kind = "huggingface"
	LFMQ1       Kind = "lfmq-1"
)

// Row is one tensor.
type Row struct {
	Name   string  `json:"name"`
	Format string  `json:"format"`
	Shape  []int64 `json:"shape"`
	Bytes  int64   `json:"bytes"`
	File   string  `json:"file,omitempty"`
}

// Total sums the tensors of one format.
type Total struct {
	Format  string `json:"format"`
	Tensors int    `json:"tensors"`
	Params  int64  `json:"params"`
	Bytes   int64  `json:"bytes"`
	// BitsPerWeight is 8·Bytes/Params.
	BitsPerWeight float64 `json:"bits_per_weight"`
}

// Report is the description of a checkpoint.
type Report struct {
	Dir    string  `json:"dir"`
	Kind   Kind    `json:"kind"`
	Rows   []Row   `json:"tensors"`
	Totals []Total `json:"totals"`
	// All sums every tensor.
	All Total `json:"all"`
	// ManifestSHA256 is the lfmq-1 checkpoint identity (empty for HF).
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
}

// Options selects what Dir checks.
type Options struct {
	// Check is how thoroughly an lfmq-1 checkpoint is verified against its
	// manifest before it is described.
	Check lfmq1.Check
}

// Dir describes the checkpoint in dir: lfmq-1 when it holds manifest.json,
// else a Hugging Face checkpoint.
func Dir(dir string, opts Options) (*Report, error) {
	if lfmq1.IsCheckpoint(dir) {
		return lfmq1Report(dir, opts)
	}
	return hfReport(dir)
}

func lfmq1Report(dir string, opts Options) (*Report, error) {
	c, err := lfmq1.Open(dir, opts.Check)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r := &Report{Dir: dir, Kind: LFMQ1, ManifestSHA256: c.ManifestSHA256}
	for _, t := range c.Manifest.Tensors {
		stored := int64(1)
		for _, d := range t.StoredShape {
			stored *= d
		}
		if t.DType != "U8" {
			stored *= dtypeSize(t.DType)
		}
		r.Rows = append(r.Rows, Row{Name: t.Name, Format: string(t.Format), Shape: t.Shape, Bytes: stored, File: t.File})
	}
	r.finish()
	return r, nil
}

func dtypeSize(dt string) int64 {
	switch dt {
	case "F32", "I32":
		return 4
	case "BF16", "F16":
		return 2
	}
	return 1
}

func hfReport(dir string) (*Report, error) {
	c, err := hf.Open(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r := &Report{Dir: dir, Kind: HuggingFace}
	for _, name := range c.Names() {
		info, _ := c.Info(name)
		f, _ := c.File(name)
		r.Rows = append(r.Rows, Row{
			Name: name, Format: lower(string(info.DType)), Shape: info.Shape,
			Bytes: info.End - info.Begin, File: baseName(f.Path()),
		})
	}
	r.finish()
	return r, nil
}

func (r *Report) finish() {
	sort.Slice(r.Rows, func(i, j int) bool { return r.Rows[i].Name < r.Rows[j].Name })
	byFormat := map[string]*Total{}
	for _, row := range r.Rows {
		t := byFormat[row.Format]
		if t == nil {
			t = &Total{Format: row.Format}
			byFormat[row.Format] = t
		}
		params := int64(1)
		for _, d := range row.Shape {
			params *= d
		}
		t.Tensors++
		t.Params += params
		t.Bytes += row.Bytes
		r.All.Tensors++
		r.All.Params += params
		r.All.Bytes += row.Bytes
	}
	for _, t := range byFormat {
		t.BitsPerWeight = bits(t.Bytes, t.Params)
		r.Totals = append(r.Totals, *t)
	}
	sort.Slice(r.Totals, func(i, j int) bool { return r.Totals[i].Format < r.Totals[j].Format })
	r.All.Format = "all"
	r.All.BitsPerWeight = bits(r.All.Bytes, r.All.Params)
}

func bits(bytes, params int64) float64 {
	if params == 0 {
		return 0
	}
	return 8 * float64(bytes) / float64(params)
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' || p[i] == '\\' {
			return p[i+1:]
		}
	}
	return p
}

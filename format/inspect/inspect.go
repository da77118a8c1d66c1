// Package inspect describes a checkpoint directory, Hugging Face or lfmq-1,
// as a list of tensors with their format, logical shape and stored bytes, a
// summary per decoder layer, plus totals per format.
//
// It reads headers and manifests (and, for lfmq-1, checks the files against
// the manifest); it does not decode tensor values.
package inspect

import (
	"errors"
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

// Report is the description of a checkpoint. When an lfmq-1 checkpoint
// differs from its manifest, only Dir, Kind, Check, ManifestSHA256,
// Findings and OK are set.
type Report struct {
	Dir  string `json:"dir"`
	Kind Kind   `json:"kind"`
	// Check names how far an lfmq-1 checkpoint was checked against its
	// manifest: "structure", "files" or "tensors" (empty for HF).
	Check string `json:"check,omitempty"`
	// Rows lists every tensor in natural name order.
	Rows []Row `json:"tensors,omitempty"`
	// Layers summarises each decoder layer, in index order.
	Layers []Layer `json:"layers,omitempty"`
	// LayersFrom says what Layers' kinds and dense/MoE split were read
	// from: LayersFromConfig or LayersFromNames.
	LayersFrom string `json:"layers_from,omitempty"`
	// Attention and PostNorms are Options' when Layers come from
	// config.json (a config for another model says nothing of this one).
	Attention []Attention `json:"attention,omitempty"`
	PostNorms bool        `json:"post_norms,omitempty"`
	Totals    []Total     `json:"totals,omitempty"`
	// All sums every tensor; nil when there are findings.
	All *Total `json:"all,omitempty"`
	// ManifestSHA256 is the lfmq-1 checkpoint identity (empty for HF).
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	// Findings are the lfmq-1 checkpoint's disagreements with its
	// manifest, in the order lfmq1.Open reports them.
	Findings []Finding `json:"findings,omitempty"`
	// OK is false when there are findings.
	OK bool `json:"ok"`
}

// Options selects what Dir checks.
type Options struct {
	// Check is how thoroughly an lfmq-1 checkpoint is verified against its
	// manifest before it is described.
	Check lfmq1.Check
	// Layers, if set, is the model's decoder layers as its config.json
	// describes them (Layers[i] is layer i). Dir prefers it to guessing
	// from tensor names, but only when it covers exactly the layers the
	// names show: a config for another model must not relabel this one.
	Layers []LayerSpec
	// Attention, if set, describes each attention kind of a model that has
	// more than LFM2's one (lfm3: full and sliding, docs/lfm3.md), from its
	// config.json; PostNorms says its layers normalise each branch's output
	// before the residual add. Both are reported only with Layers.
	Attention []Attention
	PostNorms bool
}

// Attention is one attention kind of a model, as its config.json gives
// it: the layers of that kind, what a query sees and how it is rotated.
type Attention struct {
	// Kind is the kind's layer_types name, e.g. "sliding_attention".
	Kind   string `json:"kind"`
	Layers []int  `json:"layers"`
	// Window is how many positions a query sees, its own included; 0 is
	// every earlier position.
	Window int `json:"window,omitempty"`
	// RoPETheta is the rotary base θ; RotaryDims of each head's HeadDim
	// dimensions rotate, the rest pass through.
	RoPETheta  float64 `json:"rope_theta"`
	RotaryDims int     `json:"rotary_dims"`
	HeadDim    int     `json:"head_dim"`
	Heads      int     `json:"heads"`
	KVHeads    int     `json:"kv_heads"`
	// Gate: each head's output is scaled by sigmoid(self_attn.gate_proj·x)
	// before the output projection.
	Gate bool `json:"output_gate"`
}

// Dir describes the checkpoint in dir: lfmq-1 when it holds manifest.json,
// else a Hugging Face checkpoint.
//
// If an lfmq-1 checkpoint differs from its manifest, Dir returns both the
// error from lfmq1.Open (which joins *lfmq1.MismatchError values) and a
// Report listing the findings, so a caller can print them in its own form.
func Dir(dir string, opts Options) (*Report, error) {
	report := hfReport
	if lfmq1.IsCheckpoint(dir) || lfmq1.LostManifest(dir) {
		report = lfmq1Report
	}
	r, err := report(dir, opts)
	if r != nil && r.LayersFrom == LayersFromConfig {
		r.Attention, r.PostNorms = opts.Attention, opts.PostNorms
	}
	return r, err
}

func lfmq1Report(dir string, opts Options) (*Report, error) {
	c, err := lfmq1.Open(dir, opts.Check)
	if err != nil {
		// A manifest that cannot be used is a finding too (lfmq verify
		// reports it, and the exit status is a verification failure), so
		// that --json readers get a report for it.
		var mm *lfmq1.MismatchError
		var me *lfmq1.ManifestError
		if !errors.As(err, &mm) && !errors.As(err, &me) {
			return nil, err
		}
		r := &Report{Dir: dir, Kind: LFMQ1, Check: checkName(opts.Check), Findings: findings(dir, err)}
		// Open read the manifest before it found anything wrong, so this
		// read succeeds unless the file changed since; the digest tells the
		// reader which manifest the findings are against.
		if _, sum, rerr := lfmq1.ReadManifest(dir); rerr == nil {
			r.ManifestSHA256 = sum
		}
		return r, err
	}
	defer c.Close()
	r := &Report{Dir: dir, Kind: LFMQ1, Check: checkName(opts.Check), ManifestSHA256: c.ManifestSHA256}
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
	r.finish(opts.Layers)
	return r, nil
}

func checkName(c lfmq1.Check) string {
	switch c {
	case lfmq1.CheckStructure:
		return "structure"
	case lfmq1.CheckFiles:
		return "files"
	}
	return "tensors"
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

func hfReport(dir string, opts Options) (*Report, error) {
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
	r.finish(opts.Layers)
	return r, nil
}

func (r *Report) finish(specs []LayerSpec) {
	r.OK = true
	sort.Slice(r.Rows, func(i, j int) bool { return naturalLess(r.Rows[i].Name, r.Rows[j].Name) })
	r.Totals, r.All = totals(r.Rows)
	r.Layers, r.LayersFrom = layers(r.Rows, specs)
}

// totals sums rows per format (sorted by format name) and over all of them.
func totals(rows []Row) ([]Total, *Total) {
	byFormat := map[string]*Total{}
	all := &Total{Format: "all"}
	for _, row := range rows {
		t := byFormat[row.Format]
		if t == nil {
			t = &Total{Format: row.Format}
			byFormat[row.Format] = t
		}
		params := int64(1)
		for _, d := range row.Shape {
			params *= d
		}
		for _, t := range []*Total{t, all} {
			t.Tensors++
			t.Params += params
			t.Bytes += row.Bytes
		}
	}
	out := make([]Total, 0, len(byFormat))
	for _, t := range byFormat {
		t.BitsPerWeight = bits(t.Bytes, t.Params)
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Format < out[j].Format })
	all.BitsPerWeight = bits(all.Bytes, all.Params)
	return out, all
}

// Global returns the tensors outside every decoder layer (embedding, final
// norm, head), in natural name order.
func (r *Report) Global() []Row {
	var out []Row
	for _, row := range r.Rows {
		if _, _, ok := layerOf(row.Name); !ok {
			out = append(out, row)
		}
	}
	return out
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

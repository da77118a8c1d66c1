// Package plan decides, for every tensor of a Hugging Face LFM2-MoE or dense LFM2
// checkpoint, its lfmq-1 output: which class it belongs to, which format it is stored in
// and which file holds it (docs/lfmq-1.md, "Which tensor gets which format").
//
// It checks the source against the config (every tensor present once with
// the expected shape, nothing unknown) but does not read tensor data or
// quantize anything.
package plan

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// Class groups tensors that share a quantization method.
type Class string

// The tensor classes of the manifest's quantization section.
const (
	Experts Class = "experts" // routed experts: BFP4 (GPTQ or RTN)
	Dense   Class = "dense"   // attention, conv projections, dense FFN: BFP8
	Head    Class = "head"    // LM head: BFP8
	Kept    Class = "kept"    // embedding, norms, conv kernel, router, expert bias
	// FFN is every layer's FFN w1/w3/w2 in a dense LFM2 (model_type
	// "lfm2"): BFP4 (GPTQ or RTN) by default, or BFP8 (RTN), in the
	// layer's own ffn-NN file. They hold most of a dense model's
	// parameters, as the experts do an MoE model's.
	FFN Class = "ffn"
)

// SourceTensor is what the plan needs to know of a source tensor.
type SourceTensor struct {
	DType dtype.DType
	Shape []int64
}

// Slice selects part of a fused source tensor: expert Expert of a
// transformers-v5 [E, rows, cols] tensor, rows [RowStart, RowEnd).
type Slice struct {
	Expert           int
	RowStart, RowEnd int64
}

// Entry is the plan for one output tensor.
type Entry struct {
	// Name is the output tensor's Hugging Face name.
	Name string
	// Source is the source tensor it is made from (the tied embedding for
	// lm_head.weight; a fused expert tensor with Slice set).
	Source string
	Slice  *Slice
	Class  Class
	Format lfmq1.TensorFormat
	File   string
	// Shape is the logical [out, in] (or 1-D) shape.
	Shape []int64
	// Layer is the decoder layer, -1 for global tensors; Expert is the routed
	// expert, -1 otherwise.
	Layer, Expert int
}

// Plan is the ordered list of output tensors.
type Plan struct {
	// Entries are sorted by file, then name.
	Entries []Entry
}

// Error reports a source checkpoint that does not fit the config. Tensor names
// the tensor at fault.
type Error struct {
	Tensor string
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("plan: tensor %q: %s", e.Tensor, e.Msg) }

var (
	layerRe      = regexp.MustCompile(`^model\.layers\.(\d+)\.(.+)$`)
	expertRe     = regexp.MustCompile(`^feed_forward\.experts\.(\d+)\.(w1|w2|w3)\.weight$`)
	fusedGateUp  = "feed_forward.experts.gate_up_proj"
	fusedDown    = "feed_forward.experts.down_proj"
	bfp8Suffixes = []string{
		"conv.in_proj.weight", "conv.out_proj.weight",
		"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.out_proj.weight",
		// LFM3's attention output projection (docs/lfm3.md). Its per-head
		// output gate, gate_proj [heads, hidden], has too few rows for
		// BFP tiles and stays in its source format.
		"self_attn.o_proj.weight",
		"feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight",
	}
	ffnSuffixes = []string{"feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight"}
)

// Options changes the default plan.
type Options struct {
	// KeepExperts stores the routed experts unquantized in their source
	// precision (still in the experts files): the "BF16 experts + BFP8
	// dense" ablation that isolates the cost of the expert quantization.
	KeepExperts bool
	// FFNFormat is the format of a dense checkpoint's FFN class: BFP4 (the
	// default when empty) or BFP8.
	FFNFormat lfmq1.TensorFormat
}

// Build plans the conversion of a checkpoint with config cfg whose tensors are
// src. Every expected tensor must be present with its expected shape (the
// per-expert layout, or the fused transformers-v5 layout); any other tensor
// is an error.
func Build(cfg *config.Config, src map[string]SourceTensor, opts Options) (*Plan, error) {
	ffnFormat := opts.FFNFormat
	switch ffnFormat {
	case "":
		ffnFormat = lfmq1.BFP4
	case lfmq1.BFP4, lfmq1.BFP8:
	default:
		return nil, fmt.Errorf("plan: FFN format %q; want %s or %s", ffnFormat, lfmq1.BFP4, lfmq1.BFP8)
	}
	expected := cfg.ExpectedTensors()
	var entries []Entry
	used := map[string]bool{}
	useSource := func(name string) (SourceTensor, error) {
		st, ok := src[name]
		if !ok {
			return st, &Error{Tensor: name, Msg: "missing from the source checkpoint"}
		}
		used[name] = true
		return st, nil
	}
	checkShape := func(name string, st SourceTensor, want []int64) error {
		if !slices.Equal(st.Shape, want) {
			return &Error{Tensor: name, Msg: fmt.Sprintf("shape %v, the config implies %v", st.Shape, want)}
		}
		return nil
	}
	fused := fusedLayers(cfg, src)

	names := make([]string, 0, len(expected))
	for n := range expected {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		shape := []int64(expected[name])
		layer, rest := splitLayer(name)
		e := Entry{Name: name, Source: name, Shape: shape, Layer: layer, Expert: -1}
		if m := expertRe.FindStringSubmatch(rest); m != nil {
			e.Expert, _ = strconv.Atoi(m[1])
			e.Class, e.Format, e.File = Experts, lfmq1.BFP4, lfmq1.ExpertsFile(layer, cfg.NumLayers)
			if fused[layer] {
				if err := fusedSource(cfg, layer, e.Expert, m[2], src, used, &e); err != nil {
					return nil, err
				}
				if opts.KeepExperts {
					// A slice of a fused tensor is copied out as its own
					// tensor; F32 keeps F32 bytes, BF16 stays BF16.
					f, err := keptFormat(name, rest, src[e.Source].DType)
					if err != nil {
						return nil, err
					}
					e.Format = f
				}
				entries = append(entries, e)
				continue
			}
		} else if cfg.Dense() && layer >= 0 && slices.Contains(ffnSuffixes, rest) {
			e.Class, e.Format, e.File = FFN, ffnFormat, lfmq1.FFNFile(layer, cfg.NumLayers)
		} else if layer >= 0 && slices.Contains(bfp8Suffixes, rest) {
			e.Class, e.Format, e.File = Dense, lfmq1.BFP8, lfmq1.LayerFile(layer, cfg.NumLayers)
		} else if name == "lm_head.weight" {
			e.Class, e.Format, e.File = Head, lfmq1.BFP8, lfmq1.GlobalFile
		} else {
			e.Class = Kept
			if layer >= 0 {
				e.File = lfmq1.LayerFile(layer, cfg.NumLayers)
			} else {
				e.File = lfmq1.GlobalFile
			}
		}
		if rest == "feed_forward.expert_bias" {
			if _, ok := src[e.Source]; !ok {
				// Some exports name the bias as a parameter.
				if _, ok := src[name+".weight"]; ok {
					e.Source = name + ".weight"
				}
			}
		}
		st, err := useSource(e.Source)
		if err != nil {
			return nil, err
		}
		if err := checkShape(e.Source, st, shape); err != nil {
			return nil, err
		}
		if e.Class == Experts && opts.KeepExperts {
			f, err := keptFormat(name, rest, st.DType)
			if err != nil {
				return nil, err
			}
			e.Format = f
		} else if e.Class == Kept {
			f, err := keptFormat(name, rest, st.DType)
			if err != nil {
				return nil, err
			}
			e.Format = f
		} else if !st.DType.Convertible() || st.DType == dtype.I32 || st.DType == dtype.U8 {
			return nil, &Error{Tensor: e.Source, Msg: fmt.Sprintf("dtype %s; a weight to quantize must be BF16, F16 or F32", st.DType)}
		}
		entries = append(entries, e)
	}
	if cfg.TieWordEmbeddings {
		// The tied head is quantized to BFP8 while the embedding table stays
		// BF16, so it is stored as a tensor of its own
		// (docs/lfmq-1.md, "Which tensor gets which format").
		emb := "model.embed_tokens.weight"
		entries = append(entries, Entry{
			Name: "lm_head.weight", Source: emb, Class: Head, Format: lfmq1.BFP8,
			File: lfmq1.GlobalFile, Shape: []int64(expected[emb]), Layer: -1, Expert: -1,
		})
	}
	var unknown []string
	for name := range src {
		if !used[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &Error{Tensor: unknown[0], Msg: fmt.Sprintf("not an %s tensor for this config (%d unknown tensors)", modelName(cfg), len(unknown))}
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].File != entries[j].File {
			return entries[i].File < entries[j].File
		}
		return entries[i].Name < entries[j].Name
	})
	return &Plan{Entries: entries}, nil
}

func modelName(cfg *config.Config) string {
	if cfg.Dense() {
		return "LFM2"
	}
	return "LFM2-MoE"
}

func splitLayer(name string) (int, string) {
	m := layerRe.FindStringSubmatch(name)
	if m == nil {
		return -1, name
	}
	i, err := strconv.Atoi(m[1])
	if err != nil {
		return -1, name
	}
	return i, m[2]
}

func keptFormat(name, rest string, dt dtype.DType) (lfmq1.TensorFormat, error) {
	if rest == "feed_forward.expert_bias" {
		// The selection bias is kept in float32 whatever its file dtype
		// (docs/model.md §3): HF holds it as an fp32 buffer.
		switch dt {
		case dtype.BF16, dtype.F16, dtype.F32:
			return lfmq1.F32, nil
		}
		return "", &Error{Tensor: name, Msg: fmt.Sprintf("dtype %s; expected BF16, F16 or F32", dt)}
	}
	switch dt {
	case dtype.BF16:
		return lfmq1.BF16, nil
	case dtype.F32, dtype.F16:
		// Widening F16 to F32 is exact; narrowing to BF16 would not be.
		return lfmq1.F32, nil
	}
	return "", &Error{Tensor: name, Msg: fmt.Sprintf("dtype %s; expected BF16, F16 or F32", dt)}
}

// fusedLayers finds MoE layers stored in the transformers-v5 fused layout.
func fusedLayers(cfg *config.Config, src map[string]SourceTensor) map[int]bool {
	out := map[int]bool{}
	for i := 0; i < cfg.NumLayers; i++ {
		if !cfg.IsMoE(i) {
			continue
		}
		p := config.LayerPrefix(i)
		_, a := src[p+fusedGateUp]
		_, b := src[p+fusedDown]
		if a || b {
			out[i] = true
		}
	}
	return out
}

// fusedSource points an expert entry at its slice of the fused tensors:
// gate_up_proj [E, 2Fe, H] (rows 0..Fe−1 gate = w1, Fe..2Fe−1 up = w3) and
// down_proj [E, H, Fe] (w2), docs/model.md §3.
func fusedSource(cfg *config.Config, layer, expert int, part string, src map[string]SourceTensor, used map[string]bool, e *Entry) error {
	p := config.LayerPrefix(layer)
	E, Fe, H := int64(cfg.NumExperts), int64(cfg.MoEIntermediateSize), int64(cfg.HiddenSize)
	name, want := p+fusedGateUp, []int64{E, 2 * Fe, H}
	sl := &Slice{Expert: expert}
	switch part {
	case "w1":
		sl.RowStart, sl.RowEnd = 0, Fe
	case "w3":
		sl.RowStart, sl.RowEnd = Fe, 2*Fe
	case "w2":
		name, want = p+fusedDown, []int64{E, H, Fe}
		sl.RowStart, sl.RowEnd = 0, H
	}
	st, ok := src[name]
	if !ok {
		return &Error{Tensor: name, Msg: "missing from the source checkpoint (the layer uses the fused expert layout)"}
	}
	if !slices.Equal(st.Shape, want) {
		return &Error{Tensor: name, Msg: fmt.Sprintf("shape %v, the config implies %v", st.Shape, want)}
	}
	used[name] = true
	e.Source, e.Slice = name, sl
	return nil
}

// Files returns the output safetensors files in order.
func (p *Plan) Files() []string {
	var out []string
	for _, e := range p.Entries {
		if len(out) == 0 || out[len(out)-1] != e.File {
			out = append(out, e.File)
		}
	}
	return out
}

// ByFile returns the entries stored in file.
func (p *Plan) ByFile(file string) []Entry {
	var out []Entry
	for _, e := range p.Entries {
		if e.File == file {
			out = append(out, e)
		}
	}
	return out
}

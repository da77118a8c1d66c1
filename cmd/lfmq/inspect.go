package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/inspect"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/units"
)

type inspectOptions struct {
	IO *IOStreams
	// Dir is the checkpoint as given: a directory or a hub id.
	Dir      string
	Endpoint string
	JSON     bool
	NoVerify bool
	Tensors  bool
}

func newInspectCmd(ios *IOStreams, runF func(*inspectOptions) error) *cobra.Command {
	opts := &inspectOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "inspect DIR|OWNER/NAME[@REV]",
		Short: "List a checkpoint's tensors (Hugging Face or lfmq-1)",
		Long: `Inspect summarises a checkpoint: one line per decoder layer (conv or attention
mixer, dense or MoE feed-forward, experts, tensors, bytes per format), the
tensors outside the layers, and totals per format. --tensors lists every
tensor instead (name, format, logical shape, stored bytes), numbers in names
ordered as numbers. Sizes count tensor data only, as quantize does.

For an LFM3 model the attention layers are named by kind (full_attention,
sliding_attention), and a table gives each kind's layers, window, RoPE
theta, rotated dimensions, heads and output gate, with a line for the post
norms.

A hub id OWNER/NAME[@REVISION] names a Hugging Face checkpoint in the
Hugging Face cache, fetched into it first when the cache lacks any of it
(as quantize --model does).

The layer structure comes from config.json, or from the tensor names when
config.json is missing, unusable or describes other layers.

For an lfmq-1 checkpoint inspect first checks every file and every tensor
against manifest.json and exits 3 if anything differs; with --json the
findings are printed on stdout in the form 'lfmq verify --json' uses.`,
		Example: "  lfmq inspect ./LFM2-8B-A1B-lfmq1\n  lfmq inspect --tensors ./LFM2-8B-A1B\n  lfmq inspect --json ./LFM2-8B-A1B\n  lfmq inspect LiquidAI/LFM2-8B-A1B",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if runF != nil {
				return runF(opts)
			}
			return inspectRun(cmd, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report (every tensor, layers, totals) as JSON on stdout")
	cmd.Flags().BoolVar(&opts.NoVerify, "no-verify", false, "lfmq-1: check structure and sizes only, do not hash")
	cmd.Flags().BoolVar(&opts.Tensors, "tensors", false, "list every tensor instead of the per-layer summary")
	cmd.Flags().StringVar(&opts.Endpoint, "endpoint", "", hubEndpointUsage)
	return cmd
}

func inspectRun(cmd *cobra.Command, opts *inspectOptions) error {
	dir, err := modelDir(cmd, opts.IO, "checkpoint", opts.Dir, opts.Endpoint)
	if err != nil {
		return err
	}
	if err := requireDirs("checkpoint", dir); err != nil {
		return err
	}
	if err := requireInspectable(dir); err != nil {
		return err
	}
	opts.IO.ConfigWarnings(dir)
	check := lfmq1.CheckTensors
	if opts.NoVerify {
		check = lfmq1.CheckStructure
	}
	iopts, cfgErr := configLayers(dir)
	iopts.Check = check
	r, err := inspect.Dir(dir, iopts)
	if r != nil && opts.JSON {
		// A checkpoint that differs from its manifest still gets its report
		// on stdout (the findings), and err still sets the exit status.
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(r); jerr != nil && err == nil {
			err = jerr
		}
	}
	if err != nil {
		return err
	}
	switch {
	case cfgErr != nil && len(r.Layers) > 0:
		opts.IO.Errorf("note: layer kinds read from tensor names: %v\n", cfgErr)
	case r.LayersFrom == inspect.LayersFromNames:
		opts.IO.Errorf("note: layer kinds read from tensor names: config.json describes %d layers, the tensors %d\n", len(iopts.Layers), r.Layers[len(r.Layers)-1].Index+1)
	}
	if opts.JSON {
		return nil
	}
	if opts.Tensors {
		printTensors(opts.IO, r)
	} else {
		printLayers(opts.IO, r)
	}
	printTotals(opts.IO, r, !opts.NoVerify)
	return nil
}

// requireInspectable refuses, as a usage error, a directory that holds
// none of the files any checkpoint has: a wrong directory is the command
// line's fault (docs/cli.md), like a --model without config.json. Inspect
// reads a checkpoint whose config.json is missing or bad from its tensor
// names, so any one of these files lets it go on.
func requireInspectable(dir string) error {
	for _, name := range []string{"config.json", lfmq1.ManifestFile, "model.safetensors", "model.safetensors.index.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return nil
		}
	}
	if hint := releaseHint(dir); hint != "" {
		return &usageError{fmt.Errorf("checkpoint %s: %s", dir, hint)}
	}
	return &usageError{fmt.Errorf("checkpoint %s: not a checkpoint directory (no config.json, manifest.json or model.safetensors): give a Hugging Face checkpoint or one made by lfmq quantize", dir)}
}

// configLayers reads the decoder layers from dir/config.json, and for an
// lfm3 model its attention kinds and post norms (docs/lfm3.md). An unusable
// config is not an error for inspect, which then reads the structure from
// the tensor names; the error says why.
func configLayers(dir string) (inspect.Options, error) {
	cfg, err := config.Load(dir)
	if err != nil {
		return inspect.Options{}, err
	}
	specs := make([]inspect.LayerSpec, cfg.NumLayers)
	var kinds []inspect.Attention
	for i := range specs {
		specs[i].Kind = inspect.MixerConv
		if cfg.LayerKinds[i] == config.Attention {
			specs[i].Kind = inspect.MixerAttention
			if cfg.ModelType == config.ModelTypeLFM3 {
				kinds = addAttention(kinds, cfg, i)
			}
		}
		specs[i].MoE = cfg.IsMoE(i)
	}
	return inspect.Options{Layers: specs, Attention: kinds, PostNorms: cfg.PostNorms}, nil
}

// addAttention adds attention layer i to its kind in kinds, the kinds in
// the order their first layers come.
func addAttention(kinds []inspect.Attention, cfg *config.Config, i int) []inspect.Attention {
	name := cfg.LayerType(i)
	for k := range kinds {
		if kinds[k].Kind == name {
			kinds[k].Layers = append(kinds[k].Layers, i)
			return kinds
		}
	}
	rope := cfg.LayerRoPE(i)
	return append(kinds, inspect.Attention{
		Kind: name, Layers: []int{i}, Window: cfg.LayerWindow(i),
		RoPETheta: rope.Theta, RotaryDims: 2 * rope.RotatedPairs(cfg.HeadDim), HeadDim: cfg.HeadDim,
		Heads: cfg.NumHeads, KVHeads: cfg.NumKVHeads, Gate: cfg.AttnGate,
	})
}

// printLayers writes one line per decoder layer with a column of bytes per
// format, then the tensors outside the layers: a screenful even for a model
// of thousands of tensors.
func printLayers(ios *IOStreams, r *inspect.Report) {
	if len(r.Layers) > 0 {
		// A column per format shows where each format's bytes go; the sum
		// column is left out when it would only repeat the one format's.
		sum := len(r.Totals) > 1
		// A dense LFM2 has no experts: no column for them.
		moe := slices.ContainsFunc(r.Layers, func(l inspect.Layer) bool { return l.MoE })
		// An lfm3 attention layer shows its kind's layer_types name.
		kinds := map[int]string{}
		kw := 9
		for _, a := range r.Attention {
			for _, i := range a.Layers {
				kinds[i] = a.Kind
			}
			kw = max(kw, len(a.Kind))
		}
		layers := &table{}
		head := []string{"layer", pad("kind", kw), pad("ffn", 5), "experts", "tensors"}
		if !moe {
			head = slices.Delete(head, 3, 4)
		}
		for _, t := range r.Totals {
			head = append(head, t.Format)
		}
		if sum {
			head = append(head, "bytes")
		}
		layers.add(head...)
		for _, l := range r.Layers {
			ffn, experts := "dense", "-"
			if l.MoE {
				ffn, experts = "moe", fmt.Sprint(l.Experts)
			}
			kind := l.Kind
			if k, ok := kinds[l.Index]; ok && kind == inspect.MixerAttention {
				kind = k
			}
			row := []string{fmt.Sprint(l.Index), pad(kind, kw), pad(ffn, 5), experts, fmt.Sprint(l.Tensors)}
			if !moe {
				row = slices.Delete(row, 3, 4)
			}
			for _, t := range r.Totals {
				row = append(row, formatBytes(l.Formats, t.Format))
			}
			if sum {
				row = append(row, units.Bytes(l.Bytes))
			}
			layers.add(row...)
		}
		layers.write(ios.Out)
		fmt.Fprintln(ios.Out)
		printAttention(ios, r)
	}
	if global := r.Global(); len(global) > 0 {
		tensors := &table{}
		tensors.add("global tensor", "format", "shape", "bytes")
		for _, row := range global {
			tensors.add(row.Name, row.Format, shapeString(row.Shape), fmt.Sprint(row.Bytes))
		}
		tensors.write(ios.Out)
		fmt.Fprintln(ios.Out)
	}
}

// printAttention writes a model's attention kinds (lfm3's full and
// sliding layers) and its post norms, as its config.json gives them.
func printAttention(ios *IOStreams, r *inspect.Report) {
	if len(r.Attention) > 0 {
		kw := len("attention")
		for _, a := range r.Attention {
			kw = max(kw, len(a.Kind))
		}
		t := &table{}
		t.add(pad("attention", kw), "layers", "window", "rope theta", "rotated dims", "heads", "kv heads", "output gate")
		for _, a := range r.Attention {
			layers := make([]string, len(a.Layers))
			for i, l := range a.Layers {
				layers[i] = fmt.Sprint(l)
			}
			window, gate := "all", "-"
			if a.Window > 0 {
				window = fmt.Sprint(a.Window)
			}
			if a.Gate {
				gate = "per head"
			}
			t.add(pad(a.Kind, kw), strings.Join(layers, ","), window, strconv.FormatFloat(a.RoPETheta, 'g', -1, 64),
				fmt.Sprintf("%d of %d", a.RotaryDims, a.HeadDim), fmt.Sprint(a.Heads), fmt.Sprint(a.KVHeads), gate)
		}
		t.write(ios.Out)
		if slices.ContainsFunc(r.Attention, func(a inspect.Attention) bool { return a.Gate }) {
			fmt.Fprintln(ios.Out, "output gate: each head's output times sigmoid(self_attn.gate_proj · x), before o_proj")
		}
	}
	if r.PostNorms {
		fmt.Fprintln(ios.Out, "post norms: every operator's and MLP's output normalised (post_operator_norm, post_ffn_norm) before its residual add")
	}
	if len(r.Attention) > 0 || r.PostNorms {
		fmt.Fprintln(ios.Out)
	}
}

// pad left-aligns a word in a column that table would right-align.
func pad(s string, width int) string {
	return s + strings.Repeat(" ", max(0, width-len(s)))
}

// formatBytes is the cell of one format in a layer's line: "-" when the
// layer holds none of it.
func formatBytes(formats []inspect.Total, format string) string {
	for _, t := range formats {
		if t.Format == format {
			return units.Bytes(t.Bytes)
		}
	}
	return "-"
}

// printTensors writes every tensor, one line each.
func printTensors(ios *IOStreams, r *inspect.Report) {
	tensors := &table{}
	tensors.add("name", "format", "shape", "bytes")
	for _, row := range r.Rows {
		tensors.add(row.Name, row.Format, shapeString(row.Shape), fmt.Sprint(row.Bytes))
	}
	tensors.write(ios.Out)
	fmt.Fprintln(ios.Out)
}

// printTotals writes the totals per format and the checkpoint's summary.
func printTotals(ios *IOStreams, r *inspect.Report, verified bool) {
	totals := &table{}
	totals.add("format", "tensors", "params", "bytes", "bits/weight")
	for _, t := range append(r.Totals, *r.All) {
		totals.add(t.Format, fmt.Sprint(t.Tensors), fmt.Sprint(t.Params), fmt.Sprint(t.Bytes), fmt.Sprintf("%.3f", t.BitsPerWeight))
	}
	totals.write(ios.Out)
	fmt.Fprintf(ios.Out, "\n%s checkpoint %s: %d tensors, %s of tensor data", r.Kind, r.Dir, r.All.Tensors, units.Bytes(r.All.Bytes))
	if n := len(r.Layers); n > 0 {
		fmt.Fprintf(ios.Out, ", %d layers", n)
	}
	fmt.Fprintln(ios.Out)
	if r.ManifestSHA256 != "" {
		state := "verified against manifest"
		if !verified {
			state = "sizes checked, not hashed"
		}
		fmt.Fprintf(ios.Out, "manifest sha256 %s (%s)\n", r.ManifestSHA256, state)
	}
}

// sizeChange compares a checkpoint's size with its source's, in the
// direction that is true: "3.52x smaller", "1.02x larger".
func sizeChange(size, source int64) string {
	switch {
	case size == source:
		return "same size"
	case size < source:
		return fmt.Sprintf("%.2fx smaller", float64(source)/float64(max(size, 1)))
	}
	return fmt.Sprintf("%.2fx larger", float64(size)/float64(max(source, 1)))
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/format/inspect"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/units"
)

type inspectOptions struct {
	IO       *IOStreams
	Dir      string
	JSON     bool
	NoVerify bool
}

func newInspectCmd(ios *IOStreams, runF func(*inspectOptions) error) *cobra.Command {
	opts := &inspectOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "inspect DIR",
		Short: "List a checkpoint's tensors (Hugging Face or lfmq-1)",
		Long: `Inspect prints one line per tensor (name, format, logical shape, stored bytes)
and totals per format. For an lfmq-1 checkpoint it first checks every file and
every tensor against manifest.json and exits 3 if anything differs.`,
		Example: "  lfmq inspect ./LFM2-8B-A1B-lfmq1\n  lfmq inspect --json ./LFM2-8B-A1B",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if runF != nil {
				return runF(opts)
			}
			return inspectRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON on stdout")
	cmd.Flags().BoolVar(&opts.NoVerify, "no-verify", false, "lfmq-1: check structure and sizes only, do not hash")
	return cmd
}

func inspectRun(opts *inspectOptions) error {
	opts.IO.ConfigWarnings(opts.Dir)
	check := lfmq1.CheckTensors
	if opts.NoVerify {
		check = lfmq1.CheckStructure
	}
	r, err := inspect.Dir(opts.Dir, inspect.Options{Check: check})
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printInspect(opts.IO, r, !opts.NoVerify)
	return nil
}

func printInspect(ios *IOStreams, r *inspect.Report, verified bool) {
	tensors := &table{}
	tensors.add("name", "format", "shape", "bytes")
	for _, row := range r.Rows {
		tensors.add(row.Name, row.Format, shapeString(row.Shape), fmt.Sprint(row.Bytes))
	}
	tensors.write(ios.Out)
	fmt.Fprintln(ios.Out)
	totals := &table{}
	totals.add("format", "tensors", "params", "bytes", "bits/weight")
	for _, t := range append(r.Totals, r.All) {
		totals.add(t.Format, fmt.Sprint(t.Tensors), fmt.Sprint(t.Params), fmt.Sprint(t.Bytes), fmt.Sprintf("%.3f", t.BitsPerWeight))
	}
	totals.write(ios.Out)
	fmt.Fprintf(ios.Out, "\n%s checkpoint %s: %d tensors, %s\n", r.Kind, r.Dir, r.All.Tensors, units.Bytes(r.All.Bytes))
	if r.ManifestSHA256 != "" {
		state := "verified against manifest"
		if !verified {
			state = "sizes checked, not hashed"
		}
		fmt.Fprintf(ios.Out, "manifest sha256 %s (%s)\n", r.ManifestSHA256, state)
	}
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

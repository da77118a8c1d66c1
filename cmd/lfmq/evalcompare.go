package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/task"
	"github.com/lfmq/lfmq/format/durable"
)

type evalCompareOptions struct {
	IO    *IOStreams
	Files []string
	Out   string
}

// errTextsDiffer is the outcome of a compare that found a difference:
// exit 1, the difference already printed.
var errTextsDiffer = errors.New("eval compare: the texts differ")

func newEvalCompareCmd(ios *IOStreams, runF func(*evalCompareOptions) error) *cobra.Command {
	opts := &evalCompareOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "compare A.json B.json [C.json ...] [--out GATE.json]",
		Short: "Check that runs gave byte-identical texts for the same items (the release gate)",
		Long: `Compare reads two or more files written by 'lfmq eval --out' and checks that each
item's text (reasoning and final answer) is byte-identical in every run, run by
run for each seed, against the first file. It is the release gate that seeded
sampling gives the same texts at any concurrency, with speculation on or off,
and on another machine.

It prints the verdict and, when texts differ, the first differing item, field
and byte offset with the bytes there, and exits 1. Files of another task,
dataset (by sha256), set of seeds, model (checkpoint), sampling fields or
--max-tokens, and files that are not eval files, are refused (exit 2): their
texts need not agree. --out writes the verdict as JSON for
'lfmq release build --evidence'.`,
		Example: `  lfmq eval compare c1.json c4.json c1-nospec.json --out gate.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return &usageError{fmt.Errorf("%s takes two or more files, got %d", cmd.CommandPath(), len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Files = args
			if runF != nil {
				return runF(opts)
			}
			return evalCompareRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "write the verdict as JSON to `FILE`")
	return cmd
}

func evalCompareRun(opts *evalCompareOptions) error {
	var pairs []string
	for _, p := range opts.Files {
		pairs = append(pairs, p, p)
	}
	if err := requireFiles(pairs...); err != nil {
		return err
	}
	if opts.Out != "" {
		if err := requireOutFile("--out "+opts.Out, opts.Out); err != nil {
			return err
		}
	}
	files := make([]*task.File, len(opts.Files))
	data := make([][]byte, len(opts.Files))
	for i, p := range opts.Files {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !task.IsFile(b) {
			return &usageError{fmt.Errorf("%s: %s, not an eval file; give files written by 'lfmq eval --out'", p, notEvalFile(b))}
		}
		f, err := task.Parse(p, b)
		if err != nil {
			return err
		}
		files[i], data[i] = f, b
	}
	g, err := task.Compare(opts.Files, files, data)
	var ce *task.CompareError
	if errors.As(err, &ce) {
		return &usageError{err}
	}
	if err != nil {
		return err
	}
	printGate(opts.IO.Out, g)
	if opts.Out != "" {
		out, err := task.MarshalGate(g)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(opts.Out), 0o755); err != nil {
			return err
		}
		if err := durable.WriteFile(opts.Out, out); err != nil {
			return err
		}
		opts.IO.Errorf("wrote %s\n", opts.Out)
	}
	if !g.Identical {
		return errTextsDiffer
	}
	return nil
}

// notEvalFile says what data is instead of an eval file: a gate, a file
// of another format, JSON without a format, or not JSON.
func notEvalFile(data []byte) string {
	if task.IsGate(data) {
		return "a gate file (written by 'lfmq eval compare --out')"
	}
	var f struct {
		Format any `json:"format"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		var list []any
		if json.Unmarshal(data, &list) == nil {
			return "a JSON array"
		}
		return "not JSON"
	}
	if s, ok := f.Format.(string); ok && s != "" {
		if s == evidence.Format {
			return fmt.Sprintf("a score evidence file (format %q, written by 'lfmq score --out')", s)
		}
		return fmt.Sprintf("format %q", s)
	}
	return "JSON without \"format\": \"" + task.Format + "\""
}

// printGate writes the verdict: what was compared, then "identical" or
// the first difference.
func printGate(w io.Writer, g *task.Gate) {
	seeds := "no seed"
	if len(g.Seeds) > 0 {
		s := make([]string, len(g.Seeds))
		for i, x := range g.Seeds {
			s[i] = strconv.FormatUint(x, 10)
		}
		seeds = "seeds " + strings.Join(s, ",")
	}
	fmt.Fprintf(w, "compared %d files, %d items each, %s\n", len(g.Runs), g.Items, seeds)
	for _, r := range g.Runs {
		fmt.Fprintf(w, "  %s  concurrency %d, %s\n", r.Path, r.Concurrency, r.Server)
	}
	if g.Identical {
		fmt.Fprintln(w, "identical: every item's text is the same in every file")
		return
	}
	fmt.Fprintf(w, "DIFFERENT: %d item texts differ; the first: %s\n", g.Differing, g.First)
}

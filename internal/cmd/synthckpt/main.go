// Command synthckpt writes a synthetic BF16 LFM2-MoE checkpoint with the
// layer shapes of LFM2-8B-A1B or LFM2-24B-A2B (engine/model/synth) and a
// chosen layer count, and copies a tokenizer beside it, so that `lfmq
// quantize --calib` can tokenize a text calibration file for it.
// scripts/bench-quantize.sh runs it; it is a benchmark aid, not part of the
// product.
//
//	go run ./internal/cmd/synthckpt --shape 8b-a1b --layers 2 \
//	    --tokenizer-from testdata/tiny-lfm2-moe/model --out /tmp/synth8b-2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lfmq/lfmq/engine/model/synth"
)

// tokenizerFiles are the files copied from --tokenizer-from; the first two
// must exist, the others are copied when present.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "generation_config.json"}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "synthckpt:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("synthckpt", flag.ContinueOnError)
	out := fs.String("out", "", "checkpoint directory to write (required)")
	shape := fs.String("shape", "8b-a1b", "layer shapes: 8b-a1b (synth.RealShape) or 24b-a2b (synth.A2BShape)")
	layers := fs.Int("layers", 4, "layer count; layers repeat the pattern conv, attention, conv, conv (layer 0 dense)")
	tok := fs.String("tokenizer-from", "", "directory whose tokenizer files are copied beside the weights (required)")
	seed := fs.Uint64("seed", 1, "weight seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *tok == "" {
		return errors.New("--out and --tokenizer-from are required")
	}
	s, err := shapeOf(*shape, *layers)
	if err != nil {
		return err
	}
	if _, err := synth.Write(context.Background(), *out, synth.Options{Shape: s, Seed: *seed}); err != nil {
		return err
	}
	for i, name := range tokenizerFiles {
		err := copyFile(filepath.Join(*tok, name), filepath.Join(*out, name))
		if errors.Is(err, os.ErrNotExist) && i >= 2 {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// shapeOf returns the named shape with n layers; layers past the fourth
// repeat the first four's mixers.
func shapeOf(name string, n int) (synth.Shape, error) {
	var s synth.Shape
	switch name {
	case "8b-a1b":
		s = synth.RealShape()
	case "24b-a2b":
		s = synth.A2BShape()
	default:
		return s, fmt.Errorf("--shape %q: want 8b-a1b or 24b-a2b", name)
	}
	if n < 1 || n > 64 {
		return s, fmt.Errorf("--layers %d: want 1 to 64", n)
	}
	base := s.LayerTypes
	s.LayerTypes = make([]string, n)
	for i := range n {
		s.LayerTypes[i] = base[i%len(base)]
	}
	if s.NumDenseLayers > n {
		s.NumDenseLayers = n
	}
	return s, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

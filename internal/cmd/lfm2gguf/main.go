// Command lfm2gguf converts an LFM2-MoE checkpoint in the Hugging Face
// layout (BF16 safetensors, config.json, tokenizer.json) to a GGUF file
// that llama.cpp loads as its lfm2moe architecture, with the matrices in
// Q8_0 (or f16, bf16, f32) and the norms, router and conv kernels in
// float32, as llama.cpp's own convert_hf_to_gguf.py stores them.
//
// It exists so that lfmq and llama.cpp can be measured on the same
// weights where llama.cpp's Python converter cannot run (it needs torch):
// scripts/bench-long-context.sh uses it on the synthetic LFM2-8B-A1B
// checkpoint. It is a benchmark aid, not part of the product; for a
// published model, use llama.cpp's converter.
//
//	go run ./internal/cmd/lfm2gguf --model /tmp/synth-bf16 \
//	    --tokenizer testdata/tiny-lfm2-moe/model --out /tmp/synth-q8_0.gguf
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/format/gguf"
	"github.com/lfmq/lfmq/format/hf"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lfm2gguf:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("lfm2gguf", flag.ContinueOnError)
	model := fs.String("model", "", "Hugging Face checkpoint directory of an lfm2_moe model (required)")
	tok := fs.String("tokenizer", "", "directory with tokenizer.json (and tokenizer_config.json) [--model]")
	out := fs.String("out", "", "GGUF file to write (required)")
	typ := fs.String("type", "q8_0", "type of the matrices: q8_0, f16, bf16 or f32")
	name := fs.String("name", "", "general.name [the model directory's name]")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *out == "" {
		return errors.New("--model and --out are required")
	}
	want, err := gguf.ParseTensorType(*typ)
	if err != nil {
		return fmt.Errorf("--type: %w", err)
	}
	if *tok == "" {
		*tok = *model
	}
	if *name == "" {
		abs, _ := filepath.Abs(*model)
		*name = filepath.Base(abs)
	}
	return convert(*model, *tok, *out, *name, want)
}

// convert writes the GGUF of the checkpoint in model with the tokenizer
// in tok to out; out appears only when complete.
func convert(model, tok, out, name string, want gguf.TensorType) error {
	c, err := config.Load(model)
	if err != nil {
		return err
	}
	p, err := plan(c)
	if err != nil {
		return fmt.Errorf("%s: %w", model, err)
	}
	ck, err := hf.Open(model)
	if err != nil {
		return err
	}
	defer ck.Close()
	ts, err := tensors(ck, p, want)
	if err != nil {
		return err
	}
	vocab, err := tokenizerMeta(tok, c)
	if err != nil {
		return err
	}
	meta := append(modelMeta(c, name, want), vocab...)
	f, err := durable.Create(out)
	if err != nil {
		return err
	}
	if err := gguf.Write(f, meta, ts); err != nil {
		f.Abort()
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return f.Commit()
}

package model_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant"
)

// logitsBitsGolden holds, for the BF16 fixture and its RTN lfmq-1
// checkpoint, the sha256 of the logits TestLogitsBits computes, as float32
// bits. The same file is checked on amd64 (make test) and on arm64 under
// qemu (make test-arm64): one golden for every platform is the claim.
const logitsBitsGolden = "testdata/logits-bits.sha256"

var updateLogitsBits = flag.Bool("update-logits-bits", false, "rewrite "+logitsBitsGolden+" (after a deliberate change to the engine's arithmetic)")

// TestLogitsBits: the engine's logits are the same bits on every platform.
// For each model (the BF16 fixture, run by the BF16 kernels, and its RTN
// lfmq-1 checkpoint, run by the packed BFP tile kernels) it hashes, for the
// shorter reference prompts, the full-sequence logits and the logits of
// eight greedy decode steps, as little-endian float32 bits, and compares the digests
// with the committed golden. The RTN checkpoint is quantized here, so the
// quantizer's bytes are covered as well.
//
// With LFMQ_LOGITS_DUMP=DIR it also writes the hashed bytes to
// DIR/NAME.f32, so that two platforms' dumps can be compared with cmp to
// find the first differing value (byte offset / 4).
func TestLogitsBits(t *testing.T) {
	checkLogitsBits(t, load.Options{})
}

// checkLogitsBits is TestLogitsBits with the models loaded with opts (a
// device engine must give the same golden).
func checkLogitsBits(t *testing.T, opts load.Options) {
	rtn := filepath.Join(t.TempDir(), "rtn")
	if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: tinyDir, OutDir: rtn, Method: quant.RTN, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	ropts := opts
	ropts.Check = lfmq1.CheckTensors
	q, err := load.Load(rtn, ropts)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	bf := tiny(t)
	if opts.Device != nil {
		if bf, err = load.Load(tinyDir, opts); err != nil {
			t.Fatal(err)
		}
		defer bf.Close()
	}
	models := []struct {
		name string
		m    *model.Model
	}{{"bf16", bf}, {"lfmq1-rtn", q}}

	dump := os.Getenv("LFMQ_LOGITS_DUMP")
	var got bytes.Buffer
	for _, mm := range models {
		h := sha256.New()
		w := io.Writer(h)
		if dump != "" {
			f, err := os.Create(filepath.Join(dump, mm.name+".f32"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w = io.MultiWriter(h, f)
		}
		n := 0
		put := func(v []float32) {
			buf := make([]byte, 4*len(v))
			for i, x := range v {
				binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
			}
			if _, err := w.Write(buf); err != nil {
				t.Fatal(err)
			}
			n += len(v)
		}
		V := mm.m.Config.VocabSize
		for _, p := range prompts(t) {
			// The prompts up to 66 tokens (four of six: 146 positions)
			// keep the run short under qemu; the longer two add length,
			// not other arithmetic.
			if len(p.InputIDs) > 66 {
				continue
			}
			s, logits := forward(t, mm.m, p.InputIDs, model.ForwardOptions{Logits: model.AllLogits})
			put(logits)
			last := logits[(len(p.InputIDs)-1)*V:]
			// Eight decode steps exercise the cached path; the full
			// sequence covers every prefill position.
			for range 8 {
				last = step(t, mm.m, s, argmax(last))
				put(last)
			}
		}
		fmt.Fprintf(&got, "%x  %s %d float32\n", h.Sum(nil), mm.name, n)
	}

	if *updateLogitsBits && opts.Device == nil {
		if err := os.WriteFile(logitsBitsGolden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s; run make sums", logitsBitsGolden)
		return
	}
	want, err := os.ReadFile(logitsBitsGolden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("logits bits on %s differ from %s (the same on every platform):\ngot\n%swant\n%s"+
			"set LFMQ_LOGITS_DUMP=DIR here and on amd64 and cmp the files to find the first difference; "+
			"rewrite the golden with -update-logits-bits only after a deliberate change to the arithmetic",
			runtime.GOOS+"/"+runtime.GOARCH, logitsBitsGolden, got.Bytes(), want)
	}
}

package quant

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// lfm3Model is the LFM3 fixture (model_type "lfm3", docs/lfm3.md); it
// shares the MoE fixture's tokenizer, so the MoE fixture's calibration set
// serves it too.
const lfm3Model = "../testdata/tiny-lfm3/model"

var lfm3Runs sync.Map // string → *gptqRunCache

// lfm3Checkpoint quantizes the LFM3 fixture once per test binary under key:
// "rtn", or "gptq" (the MLP and the BFP8 tensors solved by GPTQ on
// fastSeqs windows, as lfmq quantize --calib does).
func lfm3Checkpoint(t *testing.T, key string) string {
	t.Helper()
	v, _ := lfm3Runs.LoadOrStore(key, &gptqRunCache{})
	c := v.(*gptqRunCache)
	c.once.Do(func() {
		c.dir = filepath.Join(testRoot, "lfm3-"+key)
		opts := Options{ModelDir: lfm3Model, OutDir: c.dir, Method: RTN, CreatedBy: "test"}
		if key == "gptq" {
			g := gptqOptions(fastSeqs)
			g.EvalCorpora = nil
			opts.Method, opts.DenseMethod, opts.GPTQ = GPTQ, GPTQ, g
		}
		c.res, c.err = Quantize(context.Background(), opts)
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.dir
}

// lfm3Format is the format docs/lfm3.md gives an LFM3 tensor: the MLP in
// BFP4; the conv and attention projections (o_proj included) and the head
// in BFP8; the per-head output gate (one row per head: no BFP tile of 32
// rows fits), the norms, the conv kernels and the embedding as stored.
func lfm3Format(name string) lfmq1.TensorFormat {
	switch {
	case strings.Contains(name, ".feed_forward."):
		return lfmq1.BFP4
	case name == "lm_head.weight",
		strings.HasSuffix(name, ".conv.in_proj.weight"), strings.HasSuffix(name, ".conv.out_proj.weight"),
		strings.HasSuffix(name, "_proj.weight") && strings.Contains(name, ".self_attn.") && !strings.HasSuffix(name, ".gate_proj.weight"):
		return lfmq1.BFP8
	}
	return lfmq1.BF16
}

// TestLFM3Checkpoint: every tensor of the LFM3 fixture's RTN and GPTQ
// checkpoints has the format lfm3Format gives it, in the file of its class;
// kept tensors are the source bytes; an RTN tensor is exactly the plain
// packer's, a GPTQ one differs from it in every BFP matrix (GPTQ solved it);
// and the manifest records architecture lfm3 and the classes with their
// methods.
func TestLFM3Checkpoint(t *testing.T) {
	src, err := hf.Open(lfm3Model)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, method := range []string{"rtn", "gptq"} {
		t.Run(method, func(t *testing.T) {
			ck, err := lfmq1.Open(lfm3Checkpoint(t, method), lfmq1.CheckTensors)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			m := ck.Manifest
			if m.Architecture != "lfm3" {
				t.Errorf("architecture %q, want lfm3", m.Architecture)
			}
			q := m.Quantization
			for _, c := range []struct {
				name   string
				spec   *lfmq1.ClassSpec
				method string
				format lfmq1.TensorFormat
				n      int
			}{
				{"ffn", q.FFN, method, lfmq1.BFP4, 30},
				// 6 conv layers × in/out, 4 attention layers × q, k, v, o.
				{"dense", &q.Dense, method, lfmq1.BFP8, 28},
				{"head", &q.Head, method, lfmq1.BFP8, 1},
				{"kept", &q.Kept, "none", lfmq1.BF16, 60},
			} {
				if c.spec == nil || c.spec.Method != c.method || fmt.Sprint(c.spec.Formats) != fmt.Sprint([]lfmq1.TensorFormat{c.format}) || c.spec.Tensors != c.n {
					t.Errorf("%s class %+v, want %s [%s] %d tensors", c.name, c.spec, c.method, c.format, c.n)
				}
			}
			counts := map[lfmq1.TensorFormat]int{}
			gates := 0
			for _, e := range m.Tensors {
				counts[e.Format]++
				want := lfm3Format(e.Name)
				if e.Format != want {
					t.Errorf("%s: %s, want %s", e.Name, e.Format, want)
					continue
				}
				if isFFN := strings.Contains(e.Name, ".feed_forward."); isFFN != strings.HasPrefix(e.File, "ffn-") {
					t.Errorf("%s in %s", e.Name, e.File)
				}
				if strings.HasSuffix(e.Name, ".self_attn.gate_proj.weight") {
					gates++
					if fmt.Sprint(e.Shape) != "[4 128]" {
						t.Errorf("%s: shape %v, want [4 128]", e.Name, e.Shape)
					}
				}
				st, err := ck.Tensor(e.Name)
				if err != nil {
					t.Fatal(err)
				}
				if !e.Format.IsBFP() {
					raw, _ := src.Bytes(sourceName(e.Name))
					if !bytes.Equal(raw, st.Data) {
						t.Errorf("%s: kept bytes differ from the source", e.Name)
					}
					continue
				}
				w, err := src.Float32(sourceName(e.Name))
				if err != nil {
					t.Fatal(err)
				}
				f, _ := bfp.ParseFormat(string(e.Format))
				plain, err := bfp.PackMatrix(f, w, int(e.Shape[0]), int(e.Shape[1]))
				if err != nil {
					t.Fatal(err)
				}
				if same := bytes.Equal(st.Data, plain); same != (method == "rtn") {
					t.Errorf("%s (%s, %s): equal to the plain packer's bytes: %v", e.Name, e.Format, method, same)
				}
			}
			want := map[lfmq1.TensorFormat]int{lfmq1.BFP4: 30, lfmq1.BFP8: 29, lfmq1.BF16: 60}
			if fmt.Sprint(counts) != fmt.Sprint(want) || gates != 4 {
				t.Errorf("tensors per format %v, want %v; %d output gates, want 4", counts, want, gates)
			}
		})
	}
}

package inspect

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant"
)

func TestDir(t *testing.T) {
	model := "../../testdata/tiny-lfm2-moe/model"
	hf, err := Dir(model, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hf.Kind != HuggingFace || hf.All.Tensors != 357 || hf.All.Params != 6553888 || hf.All.BitsPerWeight != 16 {
		t.Errorf("HF report: kind %s, %+v", hf.Kind, hf.All)
	}
	out := filepath.Join(t.TempDir(), "q")
	if _, err := quant.Quantize(context.Background(), quant.Options{ModelDir: model, OutDir: out}); err != nil {
		t.Fatal(err)
	}
	q, err := Dir(out, Options{Check: lfmq1.CheckTensors})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Total{
		"bfp4_b": {Format: "bfp4_b", Tensors: 288, Params: 288 * 128 * 128, Bytes: 288 * 16 * 576, BitsPerWeight: 4.5},
		"bfp8_b": {Format: "bfp8_b", Tensors: 29},
		"f32":    {Format: "f32", Tensors: 6, Params: 96, Bytes: 384, BitsPerWeight: 32},
	}
	for _, tot := range q.Totals {
		w, ok := want[tot.Format]
		if !ok {
			continue
		}
		if tot.Tensors != w.Tensors || (w.Params != 0 && tot != w) {
			t.Errorf("%s totals %+v, want %+v", tot.Format, tot, w)
		}
		if tot.Format == "bfp8_b" && tot.BitsPerWeight != 8.5 {
			t.Errorf("bfp8 bits/weight %v", tot.BitsPerWeight)
		}
	}
	if q.Kind != LFMQ1 || len(q.ManifestSHA256) != 64 || q.All.Params != hf.All.Params+8192*128 {
		t.Errorf("lfmq-1 report: %s %s %+v", q.Kind, q.ManifestSHA256, q.All)
	}
}

package model_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant"
)

// lfmq1FakeQuantTol bounds |Δlogit| between the packed-tile kernels and
// the same weights decoded to float32: measured 1.43e-5 (chat_tools,
// chat_long_300) on linux/amd64, assembly and -tags purego alike; 4e-5 is
// 2.8x that.
const lfmq1FakeQuantTol = 4e-5

// TestLFMQ1 quantizes the fixture with RTN and checks that the lfmq-1
// checkpoint (BF16 kept tensors, BFP8 dense and head, BFP4 experts, all run
// by the packed-tile kernels) gives the logits of the fake-quant model (the
// BF16 checkpoint with every BFP weight decoded to float32) within
// lfmq1FakeQuantTol: the two differ only in the kernels' summation order.
func TestLFMQ1(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rtn")
	if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: tinyDir, OutDir: dir, Method: quant.RTN, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	q, err := load.Load(dir, load.Options{Check: lfmq1.CheckTensors})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Format != model.SourceLFMQ1 || len(q.ManifestSHA256) != 64 {
		t.Fatalf("format %q, manifest sha256 %q", q.Format, q.ManifestSHA256)
	}
	fake, err := load.Load(tinyDir, load.Options{FakeQuant: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	bf16 := tiny(t)
	for _, p := range prompts(t) {
		_, got := forward(t, q, p.InputIDs, model.ForwardOptions{Logits: model.AllLogits})
		_, want := forward(t, fake, p.InputIDs, model.ForwardOptions{Logits: model.AllLogits})
		_, orig := forward(t, bf16, p.InputIDs, model.ForwardOptions{Logits: model.AllLogits})
		d, dq := maxAbsDiff(got, want), maxAbsDiff(want, orig)
		t.Logf("%s: lfmq-1 vs fake-quant max |Δlogit| %.3g (quantization moved the logits by up to %.3g)", p.Name, d, dq)
		if d > lfmq1FakeQuantTol {
			t.Errorf("%s: lfmq-1 and fake-quant logits differ by %.3g (tolerance %g)", p.Name, d, lfmq1FakeQuantTol)
		}
		if dq == 0 {
			t.Errorf("%s: fake-quant logits equal the BF16 ones: nothing was substituted", p.Name)
		}
	}
	// The packed-tile kernels keep batch invariance: a batch of four with
	// decode steps against each sequence alone, and one thread against many.
	inputs := batchInputs(t)
	batch := runBatch(t, q, inputs, allTags, 7, 2)
	q1, err := load.Load(dir, load.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Close()
	for i, in := range inputs {
		alone := runBatch(t, q1, [][]int{in}, []int{i}, 0, 2)[0]
		requireSame(t, "lfmq-1 batched vs alone on one thread", batch[i], alone)
	}

	var ie *model.InputError
	if _, err := load.Load(dir, load.Options{FakeQuant: dir}); !errors.As(err, &ie) {
		t.Errorf("FakeQuant on an lfmq-1 checkpoint: %v", err)
	}
}

// TestBackgroundHash: an lfmq-1 checkpoint with one changed byte opens
// (only its structure is checked up front), Verified reports the file,
// and every Forward after that fails with the mismatch.
func TestBackgroundHash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rtn")
	if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: tinyDir, OutDir: dir, Method: quant.RTN, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	m, err := load.Load(dir, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verified(t.Context()); err != nil {
		t.Fatalf("an unchanged checkpoint: %v", err)
	}
	m.Close()

	path := filepath.Join(dir, "layer-03.safetensors")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0x10
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err = load.Load(dir, load.Options{})
	if err != nil {
		t.Fatalf("the structure is intact, Load should succeed: %v", err)
	}
	defer m.Close()
	var mm *lfmq1.MismatchError
	if err := m.Verified(t.Context()); !errors.As(err, &mm) || mm.Path != "layer-03.safetensors" || mm.Kind != "hash" {
		t.Fatalf("Verified = %v, want a hash mismatch of layer-03.safetensors", err)
	}
	_, err = m.Forward(t.Context(), []*model.Sequence{m.NewSequence()}, [][]int{{1, 2, 3}}, model.ForwardOptions{})
	if !errors.As(err, &mm) {
		t.Fatalf("Forward after the mismatch = %v, want the *lfmq1.MismatchError", err)
	}
	// Closing while a hash runs stops it.
	m2, err := load.Load(dir, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
}

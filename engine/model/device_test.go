package model_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/device/opencl"
	"github.com/lfmq/lfmq/engine/device/opencl/opencltest"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/quant"
)

// openCL is the test binary's OpenCL device, or a skip (opencltest.Open).
func openCL(t testing.TB) *opencl.Device { return opencltest.Open(t) }

// TestDeviceLogitsBits: on an OpenCL device the fixture's logits are the
// golden bits of TestLogitsBits, BF16 and RTN lfmq-1 alike.
func TestDeviceLogitsBits(t *testing.T) {
	checkLogitsBits(t, load.Options{Device: openCL(t)})
}

var (
	devTinyMu sync.Mutex
	devTiny   = map[kv.DType]*model.Model{}
)

// tinyOnDevice is the fixture loaded onto the OpenCL device with a float32
// KV cache, shared by the test binary.
func tinyOnDevice(t testing.TB) *model.Model { return tinyOnDeviceAs(t, kv.F32) }

// tinyOnDeviceAs is the fixture on the OpenCL device with its KV cache in
// format dt, one model per format shared by the test binary.
func tinyOnDeviceAs(t testing.TB, dt kv.DType) *model.Model {
	t.Helper()
	d := openCL(t)
	devTinyMu.Lock()
	defer devTinyMu.Unlock()
	if m := devTiny[dt]; m != nil {
		return m
	}
	m, err := load.Load(tinyDir, load.Options{Device: d, KVCacheDType: dt})
	if err != nil {
		t.Fatal(err)
	}
	devTiny[dt] = m
	return m
}

// tinyOnCPUAs is the fixture on the CPU engine with its KV cache in format
// dt: the reference the device runs of that format must equal.
func tinyOnCPUAs(t *testing.T, dt kv.DType) *model.Model {
	if dt == kv.F32 {
		return tiny(t)
	}
	return tinyAs(t, dt, 0)
}

// forEachKVDType runs f as a subtest per KV cache format, with the device
// model and the CPU model of that format.
func forEachKVDType(t *testing.T, f func(t *testing.T, dev, cpu *model.Model)) {
	for _, dt := range kv.DTypes {
		t.Run(dt.String(), func(t *testing.T) { f(t, tinyOnDeviceAs(t, dt), tinyOnCPUAs(t, dt)) })
	}
}

// TestDeviceBatches: on the device, in every KV cache format, sequences of mixed lengths batched
// with each other and with random neighbours, prefilled in chunks of
// several sizes and then decoded together, give the CPU engine's bits for
// each sequence run alone.
func TestDeviceBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("three batched prefills per KV format on PoCL")
	}
	inputs := batchInputs(t)
	const decode = 4
	forEachKVDType(t, func(t *testing.T, dm, cpu *model.Model) {
		alone := make([][]float32, len(inputs))
		for i, in := range inputs {
			alone[i] = runBatch(t, cpu, [][]int{in}, []int{i}, 0, decode)[0]
		}
		rng := rand.New(rand.NewPCG(21, 1))
		for _, chunk := range []int{0, 5, 33} {
			// Random neighbours: extra sequences of random tokens and
			// lengths, placed at random among the checked ones.
			batch, tags, where := [][]int{}, []int{}, make([]int, len(inputs))
			extra := 2 + rng.IntN(3)
			for i := range inputs {
				for range rng.IntN(2) {
					if extra > 0 {
						batch, tags = append(batch, randomTokens(rng, 1+rng.IntN(40), dm.Config.VocabSize)), append(tags, 10+len(batch))
						extra--
					}
				}
				where[i] = len(batch)
				batch, tags = append(batch, inputs[i]), append(tags, i)
			}
			got := runBatch(t, dm, batch, tags, chunk, decode)
			for i := range inputs {
				requireSame(t, fmt.Sprintf("device, chunk %d: sequence %d in a batch of %d", chunk, i, len(batch)), got[where[i]], alone[i])
			}
		}
	})
}

func randomTokens(rng *rand.Rand, n, vocab int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = rng.IntN(vocab)
	}
	return ids
}

// TestDeviceRewind: speculation's rollback on the device, in every KV
// cache format: a draft run
// with conv snapshots, rewound to every length, continues with the CPU
// engine's bits for the sequence that never saw the rejected tokens.
func TestDeviceRewind(t *testing.T) {
	forEachKVDType(t, func(t *testing.T, dev, cpu *model.Model) { checkRewind(t, dev, cpu, []int{0, 2, 6}) })
}

// TestDeviceSpans: in every KV cache format, prefix-cache blocks copied from a device sequence, or
// from a CPU sequence, extend a new device sequence that then continues
// with the CPU engine's bits for a cold prefill; a clone continues as
// its original without disturbing it.
func TestDeviceSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("four long prefills per KV format on PoCL")
	}
	ids := prompts(t)[5].InputIDs
	forEachKVDType(t, func(t *testing.T, dm, cpu *model.Model) { checkSpansOnto(t, dm, cpu, ids) })
}

// checkSpansOnto: prefix-cache blocks of ids copied from a sequence of the
// device model dm, or of the CPU model cpu, extend a new device sequence
// that then continues with cpu's bits for a cold prefill of ids; a clone
// continues as its original without disturbing it.
func checkSpansOnto(t *testing.T, dm, cpu *model.Model, ids []int) {
	t.Helper()
	V := dm.Config.VocabSize
	_, full := forward(t, cpu, ids, model.ForwardOptions{Logits: model.AllLogits})
	for _, from := range []*model.Model{dm, cpu} {
		src := from.NewSequence()
		if _, err := from.Forward(context.Background(), []*model.Sequence{src}, [][]int{ids[:130]}, model.ForwardOptions{ConvSnapshots: [][]int{{64, 128}}, ChunkSize: 100}); err != nil {
			t.Fatal(err)
		}
		dst := dm.NewSequence()
		for _, sp := range blockSpans(t, src, 2) {
			if err := dst.Extend(sp); err != nil {
				t.Fatal(err)
			}
		}
		twin := dst.Clone()
		out, err := dm.Forward(context.Background(), []*model.Sequence{dst}, [][]int{ids[128:]}, model.ForwardOptions{Logits: model.AllLogits})
		if err != nil {
			t.Fatal(err)
		}
		requireSame(t, "after two cached blocks", out[0], full[128*V:])
		again, err := dm.Forward(context.Background(), []*model.Sequence{twin}, [][]int{ids[128:140]}, model.ForwardOptions{Logits: model.AllLogits})
		if err != nil {
			t.Fatal(err)
		}
		requireSame(t, "the clone", again[0], full[128*V:140*V])
	}
}

// TestDeviceRefusals: what a device model cannot do is refused with an
// error, never run half-way on the wrong engine.
func TestDeviceRefusals(t *testing.T) {
	dm, cpu := tinyOnDevice(t), tiny(t)
	var ie *model.InputError
	if _, err := dm.Forward(context.Background(), []*model.Sequence{cpu.NewSequence()}, [][]int{{1, 2}}, model.ForwardOptions{}); !errors.As(err, &ie) {
		t.Errorf("a CPU sequence on the device model: %v", err)
	}
	if _, err := cpu.Forward(context.Background(), []*model.Sequence{dm.NewSequence()}, [][]int{{1, 2}}, model.ForwardOptions{}); !errors.As(err, &ie) {
		t.Errorf("a device sequence on the CPU model: %v", err)
	}
	if _, err := dm.Forward(context.Background(), []*model.Sequence{dm.NewSequence()}, [][]int{{1, 2}}, model.ForwardOptions{Logits: model.NoLogits, Layers: 2}); !errors.As(err, &ie) {
		t.Errorf("a partial forward on the device: %v", err)
	}
	if err := dm.ReplaceLinear("lm_head.weight", nil); !errors.As(err, &ie) {
		t.Errorf("ReplaceLinear on the device: %v", err)
	}
}

// TestDeviceDense: a dense LFM2 (the dense fixture in BF16, and its RTN
// lfmq-1 checkpoint with the FFN in BFP4) gives the CPU engine's logits
// bits on the device, prefill and decode.
func TestDeviceDense(t *testing.T) {
	d := openCL(t)
	rtn := filepath.Join(t.TempDir(), "rtn")
	if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: denseDir, OutDir: rtn, Method: quant.RTN, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	var ids [][]int
	for _, p := range promptsIn(t, denseRefDir) {
		if len(p.InputIDs) <= 66 {
			ids = append(ids, p.InputIDs)
		}
	}
	for _, dir := range []string{denseDir, rtn} {
		cpu, dev := loadPair(t, dir, d)
		n, bad := compareBits(t, cpu, dev, ids, 8)
		cpu.Close()
		dev.Close()
		if bad != 0 || n == 0 {
			t.Errorf("%s: %d of %d logits differ from the CPU engine's", dir, bad, n)
		}
	}
}

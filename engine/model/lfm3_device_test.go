package model_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/quant"
)

// LFM3 on the device runner (docs/lfm3.md): the output gate, the post
// norms, the per-layer RoPE tables and the sliding window run as kernels,
// and every test holds the device to the CPU engine's bits. The fixture's
// window is 32 positions, so every prompt past 32 tokens drops keys.

var (
	lfm3DevMu sync.Mutex
	lfm3Dev   = map[kv.DType]*model.Model{}
)

// lfm3OnDevice is the LFM3 fixture on the OpenCL device with its KV cache
// in format dt, one model per format shared by the test binary.
func lfm3OnDevice(t testing.TB, dt kv.DType) *model.Model {
	t.Helper()
	d := openCL(t)
	lfm3DevMu.Lock()
	defer lfm3DevMu.Unlock()
	if m := lfm3Dev[dt]; m != nil {
		return m
	}
	m, err := load.Load(lfm3Dir, load.Options{Device: d, KVCacheDType: dt})
	if err != nil {
		t.Fatal(err)
	}
	lfm3Dev[dt] = m
	return m
}

// lfm3OnCPU is the LFM3 fixture on the CPU engine with its KV cache in
// format dt; the caller closes it unless dt is kv.F32 (the shared model).
func lfm3OnCPU(t *testing.T, dt kv.DType) *model.Model {
	if dt == kv.F32 {
		return lfm3(t)
	}
	m, err := load.Load(lfm3Dir, load.Options{KVCacheDType: dt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestLFM3DeviceReference: on the device, every prompt's full-sequence
// logits and its 32 greedy decode steps are within lfm3LogitTol of the
// fixture's independent float32 reference, with the same greedy ids.
func TestLFM3DeviceReference(t *testing.T) {
	dev := lfm3OnDevice(t, kv.F32)
	checkReferenceLogitsTol(t, dev, lfm3Prompts(t), openRefIn(t, lfm3RefDir, "logits.safetensors"), lfm3LogitTol)
}

// TestLFM3DeviceBits: the fixture in BF16 and its RTN lfmq-1 checkpoint
// (the MLP in BFP4, the attention and conv projections and o_proj in
// BFP8, the gate in BF16) give the CPU engine's bits on the device for
// every prompt, four of them longer than the window, and eight greedy
// decode steps after each.
func TestLFM3DeviceBits(t *testing.T) {
	d := openCL(t)
	rtn := filepath.Join(t.TempDir(), "rtn")
	if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: lfm3Dir, OutDir: rtn, Method: quant.RTN, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	var ids [][]int
	for _, p := range lfm3Prompts(t) {
		ids = append(ids, p.InputIDs)
	}
	for _, dir := range []string{lfm3Dir, rtn} {
		cpu, dev := loadPairAs(t, dir, d, kv.F32)
		n, bad := compareBits(t, cpu, dev, ids, 8)
		cpu.Close()
		dev.Close()
		if bad != 0 || n == 0 {
			t.Errorf("%s: %d of %d logits differ from the CPU engine's", dir, bad, n)
		}
	}
}

// TestLFM3DeviceIncrementalEqualsFull: on the device itself, token by
// token and in chunks of 1, 3, 7 and 64 equals one whole pass, for two
// prompts past the window (42 and 66 tokens, then 31 greedy tokens).
func TestLFM3DeviceIncrementalEqualsFull(t *testing.T) {
	ps := lfm3Prompts(t)
	checkIncrementalEqualsFull(t, lfm3OnDevice(t, kv.F32), []prompt{ps[1], ps[4]})
}

// TestLFM3DeviceBatches: on the device, in every KV cache format, the
// fixture's prompts batched with each other and with random neighbours,
// prefilled whole and in chunks of 5 and 33 (which cut the window
// anywhere) and then decoded together, give the CPU engine's bits for
// each prompt run alone.
func TestLFM3DeviceBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("three batched prefills per KV format on PoCL")
	}
	ps := lfm3Prompts(t)
	inputs := [][]int{ps[0].InputIDs, ps[1].InputIDs, ps[3].InputIDs, ps[4].InputIDs}
	const decode = 4
	for _, dt := range kv.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			dev, cpu := lfm3OnDevice(t, dt), lfm3OnCPU(t, dt)
			alone := make([][]float32, len(inputs))
			for i, in := range inputs {
				alone[i] = runBatch(t, cpu, [][]int{in}, []int{i}, 0, decode)[0]
			}
			rng := rand.New(rand.NewPCG(33, uint64(dt)))
			for _, chunk := range []int{0, 5, 33} {
				batch, tags, where := [][]int{}, []int{}, make([]int, len(inputs))
				for i := range inputs {
					if rng.IntN(2) == 0 {
						batch, tags = append(batch, randomTokens(rng, 1+rng.IntN(70), dev.Config.VocabSize)), append(tags, 10+len(batch))
					}
					where[i] = len(batch)
					batch, tags = append(batch, inputs[i]), append(tags, i)
				}
				got := runBatch(t, dev, batch, tags, chunk, decode)
				for i := range inputs {
					requireSame(t, fmt.Sprintf("device, chunk %d: prompt %d in a batch of %d", chunk, i, len(batch)), got[where[i]], alone[i])
				}
			}
		})
	}
}

// TestLFM3DeviceLongContext: past attention's first split (1,024
// positions), where the sliding layers' windows straddle the split
// boundary and the first splits are skipped whole, the device prefilled
// whole or in chunks of 300, then decoding, gives the CPU engine's bits;
// so do decode steps at positions 1,030 to 1,035, whose windows straddle
// the boundary (the CPU runs such a row's two splits as separate tasks
// and merges them).
func TestLFM3DeviceLongContext(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1,100-token prefill per KV format on PoCL")
	}
	for _, dt := range []kv.DType{kv.F32, kv.BFP8} {
		t.Run(dt.String(), func(t *testing.T) {
			dev, cpu := lfm3OnDevice(t, dt), lfm3OnCPU(t, dt)
			want := longRun(t, cpu, 0)
			requireSame(t, "whole", longRun(t, dev, 0), want)
			requireSame(t, "chunks of 300", longRun(t, dev, 300), want)
			ids := randomTokens(rand.New(rand.NewPCG(44, 4)), 1030, dev.Config.VocabSize)
			sd, _ := forward(t, dev, ids, model.ForwardOptions{Logits: model.NoLogits})
			sc, _ := forward(t, cpu, ids, model.ForwardOptions{Logits: model.NoLogits})
			for k := range 6 {
				tok := decodeToken(k, k)
				requireSame(t, fmt.Sprintf("decode at position %d", 1030+k), step(t, dev, sd, tok), step(t, cpu, sc, tok))
			}
		})
	}
}

// TestLFM3DeviceSequenceState: speculation's rollback and the prefix
// cache's spans on the device, past the window: a rewound draft continues
// with the CPU engine's bits for the kept tokens, and a span of a device
// or CPU sequence extends a device sequence that continues as a cold CPU
// prefill.
func TestLFM3DeviceSequenceState(t *testing.T) {
	for _, dt := range []kv.DType{kv.F32, kv.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			dev, cpu := lfm3OnDevice(t, dt), lfm3OnCPU(t, dt)
			checkRewind(t, dev, cpu, []int{0, 3, 6})
			checkSpansOnto(t, dev, cpu, lfm3Prompts(t)[5].InputIDs)
		})
	}
}

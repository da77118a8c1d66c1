package model_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/device"
	"github.com/lfmq/lfmq/engine/device/pick"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/model/synth"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant"
)

// TestGPUCheck is the device check (scripts/gpu-check.sh runs it on a
// machine with a GPU): with LFMQ_GPU_CHECK=cuda (or opencl) it opens the
// device, counts the float32 logits that differ from the CPU engine's on
// the fixture and the LFM3 fixture (BF16 and RTN) and on RTN checkpoints
// of synthetic models with LFM2-8B-A1B's and LFM2-24B-A2B's layer shapes,
// and measures decode at batch 1, 4 and 16 (with the share of HBM
// bandwidth batch 1 reaches), a 2,048-token prefill and 16 users'
// aggregate through the scheduler.
// Each result is one JSON line on stdout. Without the variable it skips.
//
// LFMQ_GPU_CHECK_DIR keeps the synthetic checkpoints (default: a
// temporary directory); LFMQ_HBM_GBPS is the device's memory bandwidth
// (default 4800, an H200); LFMQ_GPU_CHECK_LAYERS the synthetic layers (4).
func TestGPUCheck(t *testing.T) {
	kind := os.Getenv("LFMQ_GPU_CHECK")
	if kind == "" {
		t.Skip("the device check runs with LFMQ_GPU_CHECK=cuda|opencl (scripts/gpu-check.sh)")
	}
	emit := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
	}
	hbm := envFloat("LFMQ_HBM_GBPS", 4800) * 1e9
	start := time.Now()
	d, line, err := pick.Open(kind)
	if err != nil || d == nil {
		t.Fatalf("--device %s: %v", kind, err)
	}
	defer d.Close()
	cd := &countingDevice{Device: d}
	info := d.Info()
	emit(map[string]any{"check": "device", "line": line, "kind": info.Kind, "name": info.Name, "driver": info.Driver,
		"kernel_sha256": info.Kernel, "ptx_sha256": device.PTXDigest(), "memory_bytes": info.Memory, "open_ms": time.Since(start).Milliseconds()})

	// The fixture, BF16 and RTN: every logit of the four short prompts
	// and eight greedy steps each.
	// The LFM3 fixture's every prompt, four of them past its 32-position
	// sliding window, in BF16 and RTN.
	rtn := filepath.Join(t.TempDir(), "rtn")
	rtn3 := filepath.Join(t.TempDir(), "rtn3")
	for _, q := range [][2]string{{tinyDir, rtn}, {lfm3Dir, rtn3}} {
		if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: q[0], OutDir: q[1], Method: quant.RTN, CreatedBy: "gpu-check"}); err != nil {
			t.Fatal(err)
		}
	}
	var short, lfm3IDs [][]int
	for _, p := range prompts(t) {
		if len(p.InputIDs) <= 66 {
			short = append(short, p.InputIDs)
		}
	}
	for _, p := range lfm3Prompts(t) {
		lfm3IDs = append(lfm3IDs, p.InputIDs)
	}
	for _, c := range []struct {
		name, dir string
		kv        kv.DType
		ids       [][]int
	}{{"fixture-bf16", tinyDir, kv.F32, short}, {"fixture-rtn", rtn, kv.F32, short},
		{"fixture-rtn-kv-bf16", rtn, kv.BF16, short}, {"fixture-rtn-kv-bfp8", rtn, kv.BFP8, short},
		{"lfm3-bf16", lfm3Dir, kv.F32, lfm3IDs}, {"lfm3-rtn", rtn3, kv.F32, lfm3IDs}} {
		cpu, dev := loadPairAs(t, c.dir, cd, c.kv)
		n, bad := compareBits(t, cpu, dev, c.ids, 8)
		emit(map[string]any{"check": "bits", "model": c.name, "values": n, "mismatches": bad})
		cpu.Close()
		dev.Close()
	}

	layers := int(envFloat("LFMQ_GPU_CHECK_LAYERS", 4))
	root := os.Getenv("LFMQ_GPU_CHECK_DIR")
	if root == "" {
		root = t.TempDir()
	}
	for _, sh := range []struct {
		name  string
		shape synth.Shape
	}{{"8b-a1b", synth.RealShape()}, {"24b-a2b", synth.A2BShape()}} {
		shape := sh.shape
		kinds := shape.LayerTypes
		for len(kinds) < layers {
			kinds = append(kinds, "conv")
		}
		shape.LayerTypes = kinds[:layers]
		shape.MaxPositions = 4096
		bf := filepath.Join(root, sh.name+"-bf16")
		q := filepath.Join(root, sh.name+"-rtn")
		t0 := time.Now()
		if _, err := os.Stat(filepath.Join(q, "manifest.json")); err != nil {
			os.RemoveAll(bf)
			os.RemoveAll(q)
			if _, err := synth.Write(t.Context(), bf, synth.Options{Shape: shape, Seed: 7}); err != nil {
				t.Fatal(err)
			}
			if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: bf, OutDir: q, Method: quant.RTN, CreatedBy: "gpu-check"}); err != nil {
				t.Fatal(err)
			}
		}
		emit(map[string]any{"check": "synthetic", "model": sh.name, "layers": layers, "seconds": time.Since(t0).Seconds()})
		cpu, dev := loadPair(t, q, cd)
		rng := rand.New(rand.NewPCG(1, uint64(layers)))
		ids := [][]int{randomTokens(rng, 64, shape.VocabSize), randomTokens(rng, 17, shape.VocabSize)}
		n, bad := compareBits(t, cpu, dev, ids, 4)
		emit(map[string]any{"check": "bits", "model": sh.name + "-rtn", "values": n, "mismatches": bad})
		cpu.Close()
		wb := float64(dev.DecodeWeightBytes())
		for _, batch := range []int{1, 4, 16} {
			// What one decode step queues, with the step time, says how
			// much of a step launch overhead can be.
			tps, ops := decodeRate(t, dev, batch, 32, rng, cd)
			row := map[string]any{"check": "decode", "model": sh.name + "-rtn", "batch": batch, "tok_s": round1(tps),
				"step_us": round1(1e6 * float64(batch) / tps), "launches_per_step": round1(float64(ops.launches) / 32),
				"transfers_per_step": round1(float64(ops.transfers) / 32)}
			if batch == 1 {
				row["hbm_frac"] = math.Round(wb*tps/hbm*1000) / 1000
			}
			emit(row)
		}
		emit(map[string]any{"check": "prefill", "model": sh.name + "-rtn", "tokens": 2048, "tok_s": round1(prefillRate(t, dev, 2048, rng))})
		emit(map[string]any{"check": "scheduler", "model": sh.name + "-rtn", "users": 16, "prompt": 128, "output": 64,
			"aggregate_tok_s": round1(schedAggregate(t, dev, 16, 128, 64, rng))})
		dev.Close()
	}
	emit(map[string]any{"check": "done", "seconds": time.Since(start).Seconds()})
}

// countingDevice counts what the model queues on a device: kernel
// launches, and copies, writes and reads (transfers).
type countingDevice struct {
	device.Device
	mu  sync.Mutex
	ops queueCounts
}

type queueCounts struct{ launches, transfers int }

func (a queueCounts) minus(b queueCounts) queueCounts {
	return queueCounts{a.launches - b.launches, a.transfers - b.transfers}
}

func (c *countingDevice) counts() queueCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

func (c *countingDevice) count(launch bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if launch {
		c.ops.launches++
	} else {
		c.ops.transfers++
	}
}

func (c *countingDevice) Launch(name string, n, local int, args ...any) error {
	c.count(true)
	return c.Device.Launch(name, n, local, args...)
}

func (c *countingDevice) Write(b device.Buffer, off int, src []byte) error {
	c.count(false)
	return c.Device.Write(b, off, src)
}

func (c *countingDevice) Read(b device.Buffer, off int, dst []byte) error {
	c.count(false)
	return c.Device.Read(b, off, dst)
}

func (c *countingDevice) Copy(dst device.Buffer, doff int, src device.Buffer, soff, n int) error {
	c.count(false)
	return c.Device.Copy(dst, doff, src, soff, n)
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v > 0 {
		return v
	}
	return def
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// loadPair loads dir on the CPU and on d.
func loadPair(t *testing.T, dir string, d device.Device) (cpu, dev *model.Model) {
	return loadPairAs(t, dir, d, kv.F32)
}

// loadPairAs loads dir on the CPU and on d, both with a KV cache in
// format kv.
func loadPairAs(t *testing.T, dir string, d device.Device, kv kv.DType) (cpu, dev *model.Model) {
	t.Helper()
	var err error
	if cpu, err = load.Load(dir, load.Options{Check: lfmq1.CheckStructure, KVCacheDType: kv}); err != nil {
		t.Fatal(err)
	}
	if dev, err = load.Load(dir, load.Options{Check: lfmq1.CheckStructure, Device: d, KVCacheDType: kv}); err != nil {
		t.Fatal(err)
	}
	return cpu, dev
}

// compareBits runs each prompt (all logits) and steps greedy decode steps
// on both models and counts the float32 values whose bits differ.
func compareBits(t *testing.T, cpu, dev *model.Model, prompts [][]int, steps int) (values, mismatches int) {
	t.Helper()
	V := cpu.Config.VocabSize
	for _, ids := range prompts {
		sc, lc := forward(t, cpu, ids, model.ForwardOptions{Logits: model.AllLogits})
		sd, ld := forward(t, dev, ids, model.ForwardOptions{Logits: model.AllLogits})
		values += len(lc)
		mismatches += bitsDiffer(lc, ld)
		last := lc[(len(ids)-1)*V:]
		for range steps {
			tok := argmax(last)
			lc, ld = step(t, cpu, sc, tok), step(t, dev, sd, tok)
			values += len(lc)
			mismatches += bitsDiffer(lc, ld)
			last = lc
		}
	}
	return values, mismatches
}

// decodeRate prefills batch sequences with 128 tokens and returns the
// tokens per second of steps batched decode steps, and what those steps
// queued on cd.
func decodeRate(t *testing.T, m *model.Model, batch, steps int, rng *rand.Rand, cd *countingDevice) (float64, queueCounts) {
	t.Helper()
	seqs := make([]*model.Sequence, batch)
	toks := make([][]int, batch)
	for i := range seqs {
		seqs[i] = m.NewSequence()
		toks[i] = randomTokens(rng, 128, m.Config.VocabSize)
	}
	if _, err := m.Forward(context.Background(), seqs, toks, model.ForwardOptions{}); err != nil {
		t.Fatal(err)
	}
	var elapsed time.Duration
	var ops queueCounts
	for s := range steps + 2 {
		for i := range toks {
			toks[i] = []int{rng.IntN(m.Config.VocabSize)}
		}
		before := cd.counts()
		t0 := time.Now()
		if _, err := m.Forward(context.Background(), seqs, toks, model.ForwardOptions{}); err != nil {
			t.Fatal(err)
		}
		if s >= 2 { // two warm-up steps
			elapsed += time.Since(t0)
			d := cd.counts().minus(before)
			ops.launches += d.launches
			ops.transfers += d.transfers
		}
	}
	return float64(batch*steps) / elapsed.Seconds(), ops
}

// prefillRate returns the tokens per second of one n-token prefill (after
// a warm-up prefill).
func prefillRate(t *testing.T, m *model.Model, n int, rng *rand.Rand) float64 {
	t.Helper()
	var rate float64
	for range 2 {
		ids := randomTokens(rng, n, m.Config.VocabSize)
		t0 := time.Now()
		if _, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{ids}, model.ForwardOptions{ChunkSize: n}); err != nil {
			t.Fatal(err)
		}
		rate = float64(n) / time.Since(t0).Seconds()
	}
	return rate
}

// countSink counts a request's tokens.
type countSink struct {
	mu     sync.Mutex
	tokens int
	done   chan error
}

func (c *countSink) Started(int)                 {}
func (c *countSink) PromptLogits(int, []float32) {}
func (c *countSink) Token(int, []float32, bool) bool {
	c.mu.Lock()
	c.tokens++
	c.mu.Unlock()
	return false
}
func (c *countSink) Done(_ sched.FinishReason, err error) { c.done <- err }

// schedAggregate runs users requests of prompt random tokens and output
// tokens each through the scheduler (continuous batching, as lfmq serve
// runs them, without HTTP) and returns the generated tokens per second.
func schedAggregate(t *testing.T, m *model.Model, users, prompt, output int, rng *rand.Rand) float64 {
	t.Helper()
	sc, err := sched.New(m, sched.Config{MaxNumSeqs: users, MaxModelLen: prompt + output + 1, Speculation: sched.SpecConfig{Off: true}, PrefixCache: sched.PrefixConfig{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go sc.Run(ctx)
	params := sample.Neutral()
	params.MinTokens = output
	sinks := make([]*countSink, users)
	t0 := time.Now()
	for i := range sinks {
		sinks[i] = &countSink{done: make(chan error, 1)}
		if err := sc.Submit(ctx, &sched.Request{Prompt: randomTokens(rng, prompt, m.Config.VocabSize), MaxTokens: output, Params: params, Sink: sinks[i]}); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, s := range sinks {
		if err := <-s.done; err != nil {
			t.Fatal(err)
		}
		total += s.tokens
	}
	return float64(total) / time.Since(t0).Seconds()
}

// bitsDiffer counts the positions where a and b differ in bits (all of
// them when the lengths differ).
func bitsDiffer(a, b []float32) int {
	if len(a) != len(b) {
		return max(len(a), len(b))
	}
	n := 0
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			n++
		}
	}
	return n
}

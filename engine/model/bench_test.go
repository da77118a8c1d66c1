package model_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/model/synth"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/internal/cputime"
	"github.com/lfmq/lfmq/quant"
)

// The engine's speed benchmarks, run by `make bench`:
//
//	go test -run '^$' -bench 'Decode|Prefill|MemCopy' ./engine/model
//
// They run the tiny fixture, a synthetic checkpoint with the real
// LFM2-8B-A1B layer shapes (synth.RealShape: 4 layers, about 2.6 GB of BF16
// weights, written to a temporary directory on first use and removed when
// the test binary exits; set LFMQ_BENCH_SYNTH_DIR to keep and reuse it
// between runs; LFMQ_BENCH_SYNTH_LAYERS changes its layer count) and
// ("dense") a synthetic dense LFM2 with all 16 layers of LFM2-1.2B
// (synth.DenseShape, 2.34 GB of BF16 weights, kept alike), each in
// BF16 and as its RTN lfmq-1 quantization, on 1 and 2 threads (or those of
// LFMQ_BENCH_THREADS). scripts/bench-scaling.sh runs them over thread
// counts and prints one table.
//
// Every decode benchmark holds the weight bytes a step reads
// (Model.DecodeWeightBytes) against the memory's read bandwidth measured in
// the same benchmark: on the synthetic model interleaved with it (every
// few decode steps the timer stops for one pass of kernels.ReadXor over a
// buffer far larger than the caches, on as many goroutines as the model
// has threads), on the tiny model, whose steps are far shorter than a
// pass, in passes after the steps. weightGB/s is the weight bytes times
// steps per second, readGB/s the probe's rate, and bw_frac their ratio,
// the fraction of the read bandwidth decode reaches (the tiny model's
// weights stay in the caches, so its bw_frac may pass 1). The pairing
// matters on a shared machine, where both figures drift with the load.
// peakRSS_MB is the process's peak resident memory from loading the model
// to the end of the benchmark (without the probe's buffer). tokens/cpu-s
// is tokens per second of the process's CPU time during the steps (all
// threads together): on a machine shared with other work it drifts far
// less than tokens/s, so A/B comparisons there read it.

// synthEnv names a directory in which the synthetic checkpoints are kept
// between benchmark runs instead of a temporary one.
const synthEnv = "LFMQ_BENCH_SYNTH_DIR"

// layersEnv sets the synthetic model's layer count (default 4, synth's
// RealShape); threadsEnv the thread counts the benchmarks run, a comma- or
// space-separated list (default 1,2). scripts/bench-scaling.sh sets both.
const (
	layersEnv  = "LFMQ_BENCH_SYNTH_LAYERS"
	threadsEnv = "LFMQ_BENCH_THREADS"
	// depthsEnv sets the context depths of the synthetic model's decode
	// and prefill benchmarks, a comma- or space-separated list (default
	// 0,4096,16384; add 32768 for the longest the issue tracks).
	depthsEnv = "LFMQ_BENCH_DEPTHS"
	// kvEnv sets the KV cache format of every benchmark model (f32, bf16
	// or bfp8; default f32); a benchmark's name then ends in /kv=FORMAT.
	kvEnv = "LFMQ_BENCH_KV_DTYPE"
	// mappedEnv, set to 1, loads the benchmark models with their files
	// mapped (4 KiB pages of the page cache) instead of resident on huge
	// pages as lfmq serve loads them (load.Options.Resident): for a
	// comparison of the two in one run.
	mappedEnv = "LFMQ_BENCH_MAPPED"
	// promptsEnv sets the prompt lengths of BenchmarkPrefillPrompt, a
	// comma- or space-separated list (unset: it does not run).
	promptsEnv = "LFMQ_BENCH_PROMPTS"
	// turnEnv sets the new tokens of BenchmarkPrefillTurn, a comma- or
	// space-separated list (unset: it does not run).
	turnEnv = "LFMQ_BENCH_TURN"
)

// promptChunk is BenchmarkPrefillPrompt's chunk: llama.cpp's default
// micro-batch.
const promptChunk = 512

// feedChunks feeds ids to s in chunks of promptChunk tokens, as a server's
// chunked prefill does.
func feedChunks(b *testing.B, m *model.Model, s *model.Sequence, ids []int) {
	for at := 0; at < len(ids); at += promptChunk {
		chunk := ids[at:min(at+promptChunk, len(ids))]
		if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{chunk}, model.ForwardOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// synthShape returns RealShape with the layer count of layersEnv: further
// layers repeat RealShape's pattern of mixers (conv, attention, conv,
// conv), so 6 layers have two attention layers and five MoE layers.
func synthShape(b *testing.B) (synth.Shape, int) {
	s := synth.RealShape()
	v := os.Getenv(layersEnv)
	if v == "" {
		return s, len(s.LayerTypes)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > 64 {
		b.Fatalf("%s=%q: want a layer count in [2, 64]", layersEnv, v)
	}
	base := s.LayerTypes
	s.LayerTypes = make([]string, n)
	for i := range n {
		s.LayerTypes[i] = base[i%len(base)]
	}
	return s, n
}

// threadCounts returns the thread counts of threadsEnv, or 1 and 2.
func threadCounts() []int { return intList(threadsEnv, []int{1, 2}, 1) }

// contextDepths returns the context depths of depthsEnv, or 0, 4,096 and
// 16,384.
func contextDepths() []int { return intList(depthsEnv, []int{0, 4096, 16384}, 0) }

// intList parses the comma- or space-separated integers of environment
// variable env, each at least least, or returns def when it is unset.
func intList(env string, def []int, least int) []int {
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < least {
			panic(fmt.Sprintf("%s=%q: %q is not an integer of at least %d", env, v, f, least))
		}
		out = append(out, n)
	}
	return out
}

// lfm3DepthsEnv sets the context depths of the synthetic LFM3-1.7B's
// decode and prefill benchmarks (default 0,16384,131072: issue 44's).
const lfm3DepthsEnv = "LFMQ_BENCH_LFM3_DEPTHS"

// depthsOf returns the context depths a benchmark model runs at: those of
// contextDepths for the synthetic LFM2-8B-A1B shapes, those of
// lfm3DepthsEnv for the synthetic LFM3-1.7B, only 0 for the others.
func depthsOf(which string) []int {
	switch which {
	case "synth":
		return benchDepths
	case "lfm3":
		return intList(lfm3DepthsEnv, []int{0, 16384, 131072}, 0)
	}
	return []int{0}
}

// depthName is the benchmark name's depth element: none at depth 0 for the
// models that run only there, so their names stay as they were.
func depthName(which string, depth int) string {
	if which != "synth" && which != "lfm3" {
		return ""
	}
	return fmt.Sprintf("/depth=%d", depth)
}

// withContext returns a sequence of m that holds depth positions of
// seeded random context: keys and values drawn from a unit normal (the
// scale of normed, rotated keys), rounded to the model's KV format, and a
// zero conv state, entered through the prefix cache's span format
// (Model.UnmarshalSpan, Sequence.Extend), so that a benchmark reaches a
// deep context in milliseconds instead of the minutes a prefill would
// take. Attention's cost does not depend on the values it reads; only the
// depth matters. A float32 span is also written in the span format's
// version 1, so that this file measures commits from before version 2
// (scripts/bench-ab.sh with the working tree's benchmarks).
func withContext(b *testing.B, m *model.Model, depth int) *model.Sequence {
	s := m.NewSequence()
	// Spans of at most contextChunk positions, each freed once extended:
	// a deep context of a model with many attention layers would
	// otherwise hold its whole payload twice (bytes and pages) at once.
	const contextChunk = 16384
	version := 2
	for start := 0; start < depth; start += contextChunk {
		end := min(start+contextChunk, depth)
		sp, err := m.UnmarshalSpan(contextSpan(m, start, end, version))
		if err != nil && benchKV == kv.F32 && version == 2 {
			version = 1
			sp, err = m.UnmarshalSpan(contextSpan(m, start, end, version))
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Extend(sp); err != nil {
			b.Fatal(err)
		}
		sp.Free()
	}
	return s
}

// contextSpan returns withContext's span of positions [start, end) in the
// span format's version: seeded random keys and values for every KV layer
// of the model's pool, a zero conv state.
func contextSpan(m *model.Model, start, end, version int) []byte {
	sh := m.KVPool().Shape()
	rng := rand.New(rand.NewPCG(5, uint64(end)))
	var payload []byte
	for l := range sh.Layers {
		if !sh.HasKV(l) {
			payload = append(payload, make([]byte, 4*(sh.ConvK-1)*sh.Hidden)...)
			continue
		}
		x := make([]float32, 2*(end-start)*sh.Dim(l))
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		switch benchKV {
		case kv.BF16:
			for _, v := range x {
				payload = binary.LittleEndian.AppendUint16(payload, dtype.Float32ToBF16(v))
			}
		case kv.BFP8:
			for i := 0; i < len(x); i += bfp.GroupSize {
				e, codes := bfp.QuantizeGroup(bfp.BFP8, (*[bfp.GroupSize]float32)(x[i:]))
				payload = append(append(payload, e), codes[:]...)
			}
		default:
			for _, v := range x {
				payload = binary.LittleEndian.AppendUint32(payload, math.Float32bits(v))
			}
		}
	}
	buf := []byte(fmt.Sprintf("lfmq-span-%d\x00", version))
	for _, v := range []int{sh.Layers, sh.Hidden, sh.ConvK, sh.KVDim, start, end} {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	}
	buf = append(buf, byte(len(sh.Kinds)))
	buf = append(buf, sh.Kinds...)
	if version == 2 {
		buf = append(buf, byte(benchKV))
	}
	return append(buf, payload...)
}

var (
	benchRootOnce sync.Once
	benchRoot     string // temporary directory removed by TestMain
	benchRootErr  error

	tinyQOnce sync.Once
	tinyQDir  string
	tinyQErr  error

	synthOnce sync.Once
	synthDirs [2]string // BF16, lfmq-1
	synthErr  error

	dense12Once sync.Once
	dense12Dirs [2]string // BF16, lfmq-1
	dense12Err  error

	synthLFM3Once sync.Once
	synthLFM3Dirs [2]string // BF16, lfmq-1
	synthLFM3Err  error
)

// TestMain removes the checkpoints the benchmarks generated.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchRoot != "" {
		os.RemoveAll(benchRoot)
	}
	os.Exit(code)
}

func tempRoot(b *testing.B) string {
	benchRootOnce.Do(func() { benchRoot, benchRootErr = os.MkdirTemp("", "lfmq-bench-") })
	if benchRootErr != nil {
		b.Fatal(benchRootErr)
	}
	return benchRoot
}

// benchModel returns the directory of a benchmark checkpoint: which is
// "tiny", "synth", "dense" or "lfm3", format "bf16" or "lfmq1".
func benchModel(b *testing.B, which, format string) string {
	switch {
	case which == "lfm3":
		synthLFM3Once.Do(func() { synthLFM3Dirs, synthLFM3Err = writeSynth(b, "lfm3-1.7b", synth.LFM3Shape()) })
		if synthLFM3Err != nil {
			b.Fatal(synthLFM3Err)
		}
		if format == "bf16" {
			return synthLFM3Dirs[0]
		}
		return synthLFM3Dirs[1]
	case which == "dense":
		dense12Once.Do(func() {
			shape, err := synth.DenseShape("LFM2-1.2B")
			if err != nil {
				dense12Err = err
				return
			}
			dense12Dirs, dense12Err = writeSynth(b, "dense-1.2b", shape)
		})
		if dense12Err != nil {
			b.Fatal(dense12Err)
		}
		if format == "bf16" {
			return dense12Dirs[0]
		}
		return dense12Dirs[1]
	case which == "tiny" && format == "bf16":
		return tinyDir
	case which == "tiny":
		tinyQOnce.Do(func() {
			tinyQDir = filepath.Join(tempRoot(b), "tiny-rtn")
			_, tinyQErr = quant.Quantize(context.Background(), quant.Options{ModelDir: tinyDir, OutDir: tinyQDir, Method: quant.RTN, CreatedBy: "bench"})
		})
		if tinyQErr != nil {
			b.Fatal(tinyQErr)
		}
		return tinyQDir
	}
	synthOnce.Do(func() {
		shape, layers := synthShape(b)
		name := "synth"
		if layers != 4 { // RealShape's four layers keep the old names
			name = fmt.Sprintf("synth%d", layers)
		}
		synthDirs, synthErr = writeSynth(b, name, shape)
	})
	if synthErr != nil {
		b.Fatal(synthErr)
	}
	if format == "bf16" {
		return synthDirs[0]
	}
	return synthDirs[1]
}

// benchPrompt returns the prompt a benchmark model starts from: a fixture
// prompt for the tiny model, seeded random tokens for the synthetic one.
func benchPrompt(b *testing.B, m *model.Model, which string, n int) []int {
	if which == "tiny" {
		for _, p := range prompts(b) {
			if len(p.InputIDs) >= n {
				return p.InputIDs[:n]
			}
		}
		b.Fatalf("no fixture prompt of %d tokens", n)
	}
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = rng.IntN(m.Config.VocabSize)
	}
	return ids
}

// writeSynth writes a synthetic checkpoint of shape and its RTN
// quantization under name in LFMQ_BENCH_SYNTH_DIR or the temporary root,
// unless they are there already, and returns their directories.
func writeSynth(b *testing.B, name string, shape synth.Shape) ([2]string, error) {
	root := os.Getenv(synthEnv)
	if root == "" {
		root = tempRoot(b)
	}
	dirs := [2]string{filepath.Join(root, name+"-bf16"), filepath.Join(root, name+"-rtn")}
	if _, err := os.Stat(filepath.Join(dirs[1], "manifest.json")); err == nil {
		return dirs, nil // kept from an earlier run (synthEnv)
	}
	t0 := time.Now()
	if _, err := synth.Write(context.Background(), dirs[0], synth.Options{Shape: shape, Seed: 1}); err != nil {
		return dirs, err
	}
	t1 := time.Now()
	os.RemoveAll(dirs[1])
	_, err := quant.Quantize(context.Background(), quant.Options{ModelDir: dirs[0], OutDir: dirs[1], Method: quant.RTN, CreatedBy: "bench"})
	b.Logf("synthetic model %s: written in %v, quantized in %v", name, t1.Sub(t0).Round(time.Second), time.Since(t1).Round(time.Second))
	// Generation leaves a layer's worth of garbage; return it so that it
	// does not count in the benchmarks' resident memory.
	debug.FreeOSMemory()
	return dirs, err
}

var (
	benchModels  = []string{"tiny", "synth", "dense", "lfm3"}
	benchFormats = []string{"bf16", "lfmq1"}
	benchThreads = threadCounts()
	benchDepths  = contextDepths()
	benchKV      = kvDType()
	// benchResident is load.Options.Resident of the benchmark models.
	benchResident = os.Getenv(mappedEnv) != "1"
)

// kvDType returns the KV cache format of kvEnv, or f32.
func kvDType() kv.DType {
	v := os.Getenv(kvEnv)
	if v == "" {
		return kv.F32
	}
	t, err := model.ParseKVDType(v)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", kvEnv, err))
	}
	return t
}

// kvName is the benchmark name's KV format element: none for f32.
func kvName() string {
	if benchKV == kv.F32 {
		return ""
	}
	return "/kv=" + benchKV.String()
}

// loadBench loads a benchmark model and waits for the background hash of an
// lfmq-1 checkpoint's files (load.Options.Check) to finish: it would
// otherwise take a core's worth of time from the first second or so of the
// measurement, a share that depends on the benchmark's length.
func loadBench(b *testing.B, dir string, threads int) *model.Model {
	m, err := load.Load(dir, load.Options{Threads: threads, KVCacheDType: benchKV, Resident: benchResident})
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Verified(context.Background()); err != nil {
		m.Close()
		b.Fatal(err)
	}
	return m
}

// BenchmarkLoad measures load.Load and Close of each benchmark model, its
// files mapped ("mapped") and read into the process's memory on huge pages
// as lfmq serve loads them ("resident", load.Options.Resident): what the
// resident load adds to startup. The files are in the page cache after
// the first iteration; an lfmq-1 checkpoint's background hash is stopped
// by Close.
func BenchmarkLoad(b *testing.B) {
	for _, which := range benchModels {
		for _, format := range benchFormats {
			for _, mode := range []string{"mapped", "resident"} {
				b.Run(fmt.Sprintf("%s/%s/%s", which, format, mode), func(b *testing.B) {
					dir := benchModel(b, which, format)
					for b.Loop() {
						m, err := load.Load(dir, load.Options{Threads: 1, Resident: mode == "resident"})
						if err != nil {
							b.Fatal(err)
						}
						if err := m.Close(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkDecode measures one-token decode steps of a batch of one
// sequence (and, on the tiny model, of eight) after a 32-token prompt. The
// tokens fed are seeded random ids, so routing varies from step to step as
// in generation; the sequences restart from the prompt every 256 steps, so
// the attention span stays that of a short chat. On the synthetic model
// the prompt follows a context of each depth of contextDepths
// (withContext), so the attention span is depth + 32 to depth + 288.
func BenchmarkDecode(b *testing.B) {
	const prompt, span = 32, 256
	for _, which := range benchModels {
		for _, format := range benchFormats {
			for _, threads := range benchThreads {
				batches := []int{1}
				if which == "tiny" {
					batches = append(batches, 8)
				}
				for _, batch := range batches {
					for _, depth := range depthsOf(which) {
						name := fmt.Sprintf("%s/%s/threads=%d/batch=%d%s%s", which, format, threads, batch, depthName(which, depth), kvName())
						b.Run(name, func(b *testing.B) {
							dir := benchModel(b, which, format)
							// The synthetic model's steps interleave with probe
							// passes; the tiny model's steps are far shorter
							// than a pass, so its probe runs before and after.
							probe := newReadProbe(threads)
							defer probe.free()
							interleave := which != "tiny"
							// The product kernels' in-cache rates, the
							// roofline's other bound, sampled as the
							// probe is (synthetic models only).
							var rp *rateProbe
							if interleave {
								rp = newRateProbe(threads)
								rp.pass(rateSample)
							}
							resetPeakRSS()
							m := loadBench(b, dir, threads)
							defer m.Close()
							base := withContext(b, m, depth)
							if _, err := m.Forward(context.Background(), []*model.Sequence{base}, [][]int{benchPrompt(b, m, which, prompt)}, model.ForwardOptions{}); err != nil {
								b.Fatal(err)
							}
							seqs := make([]*model.Sequence, batch)
							toks := make([][]int, batch)
							reset := func() {
								for i := range seqs {
									seqs[i] = base.Clone()
								}
							}
							reset()
							rng := rand.New(rand.NewPCG(4, 4))
							b.ReportAllocs()
							n := 0
							var cpu time.Duration
							// The steps' attention cost (attentionCost),
							// summed over the steps; their weights cost
							// weightCost(m) each.
							var attn stepCost
							weights := weightCost(m)
							for b.Loop() {
								if interleave && n%probeEvery == 0 {
									b.StopTimer()
									probe.pass()
									rp.pass(rateSample)
									b.StartTimer()
								}
								if seqs[0].Len() == depth+prompt+span {
									// Fresh clones of the context (they
									// share its pages): not a decode
									// step's work.
									b.StopTimer()
									reset()
									b.StartTimer()
								}
								for i := range toks {
									toks[i] = []int{rng.IntN(m.Config.VocabSize)}
								}
								sc := attentionCost(m.Config, m.KVCacheDType(), seqs[0].Len())
								attn.kvBytes += sc.kvBytes
								for f := range sc.macs {
									attn.macs[f] += sc.macs[f]
								}
								c0 := cputime.Process()
								if _, err := m.Forward(context.Background(), seqs, toks, model.ForwardOptions{}); err != nil {
									b.Fatal(err)
								}
								cpu += cputime.Process() - c0
								n += batch
							}
							tps := float64(n) / b.Elapsed().Seconds()
							if !interleave {
								probe.pass()
								probe.pass()
							}
							// A step reads at least one token's weight bytes
							// whatever the batch (its sequences may route to
							// more experts): per step, so a lower bound for
							// batch > 1.
							wbs := float64(m.DecodeWeightBytes()) * tps / float64(batch)
							bw := probe.bandwidth()
							b.ReportMetric(tps, "tokens/s")
							if cpu > 0 {
								b.ReportMetric(float64(n)/cpu.Seconds(), "tokens/cpu-s")
							}
							b.ReportMetric(wbs/1e9, "weightGB/s")
							b.ReportMetric(bw/1e9, "readGB/s")
							b.ReportMetric(wbs/bw, "bw_frac")
							if which != "tiny" {
								// The roofline of the steps run (batch
								// 1): their weight and KV bytes at the
								// probe's rate, or their multiply-adds
								// at the product kernels' (rateProbe).
								steps := float64(n / batch)
								b.ReportMetric(attn.kvBytes/steps/1e6, "kvMB/token")
								rates := rp.rates()
								b.Log(rp)
								memory, compute := roofSeconds(steps, weights, attn, bw, rates)
								el := b.Elapsed().Seconds()
								b.ReportMetric(max(memory, compute)/el, "roof_frac")
								b.ReportMetric(memory/el, "memroof_frac")
								b.ReportMetric(compute/el, "macroof_frac")
								// The products' own rooflines summed,
								// over the time taken: how near the
								// step comes to running each product at
								// its own bound (productSeconds).
								b.ReportMetric(productSeconds(steps, weights, attn, bw, rates)/el, "prodroof_frac")
							}
							reportPeakRSS(b, probe.size()+rp.size())
						})
					}
				}
			}
		}
	}
}

// BenchmarkPrefill measures prompt processing in one chunk: the fixture's
// longest prompt (chat_long_300, 314 tokens) on the tiny model, 128 seeded
// random tokens on the synthetic one, there after a context of each depth
// of contextDepths (withContext): the cost of a chunk deep in a long
// prompt, whose attention reads every earlier position (a whole long
// prompt is BenchmarkPrefillPrompt's). Besides tokens/s it reports
// tokens/cpu-s, tokens per second of the process's CPU time (all threads
// together), which other processes on a shared machine disturb far less:
// with every thread busy, tokens/s is at most threads × tokens/cpu-s.
func BenchmarkPrefill(b *testing.B) {
	for _, which := range benchModels {
		n := 314
		if which != "tiny" {
			n = 128
		}
		for _, format := range benchFormats {
			for _, threads := range benchThreads {
				for _, depth := range depthsOf(which) {
					b.Run(fmt.Sprintf("%s/%s/threads=%d/tokens=%d%s%s", which, format, threads, n, depthName(which, depth), kvName()), func(b *testing.B) {
						dir := benchModel(b, which, format)
						resetPeakRSS()
						m := loadBench(b, dir, threads)
						defer m.Close()
						ids := benchPrompt(b, m, which, n)
						ctx := withContext(b, m, depth)
						// fresh returns the sequence a prefill starts
						// from; copying a deep context is not its work.
						fresh := func() *model.Sequence {
							if depth == 0 {
								return m.NewSequence()
							}
							b.StopTimer()
							defer b.StartTimer()
							return ctx.Clone()
						}
						prefill := func(s *model.Sequence) {
							if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{ids}, model.ForwardOptions{}); err != nil {
								b.Fatal(err)
							}
						}
						prefill(fresh()) // map the weights in
						b.ReportAllocs()
						var cpu time.Duration
						for b.Loop() {
							s := fresh()
							c0 := cputime.Process()
							prefill(s)
							cpu += cputime.Process() - c0
						}
						b.ReportMetric(float64(b.N*len(ids))/b.Elapsed().Seconds(), "tokens/s")
						if cpu > 0 {
							b.ReportMetric(float64(b.N*len(ids))/cpu.Seconds(), "tokens/cpu-s")
						}
						reportPeakRSS(b, 0)
					})
				}
			}
		}
	}
}

// BenchmarkPrefillPrompt measures a whole prompt of each length of
// promptsEnv on the synthetic model, from an empty sequence, fed in
// chunks of promptChunk tokens as a server's chunked prefill does: what
// llama.cpp's `llama-bench -p N` measures (its default batch of 2,048 and
// micro-batch of 512 tokens). It runs only when promptsEnv is set (a
// 16,384-token prompt takes minutes per iteration);
// scripts/bench-long-context.sh sets it.
func BenchmarkPrefillPrompt(b *testing.B) {
	lengths := intList(promptsEnv, nil, 1)
	if len(lengths) == 0 {
		b.Skipf("set %s to the prompt lengths to measure, e.g. 4096,16384", promptsEnv)
	}
	for _, format := range benchFormats {
		for _, threads := range benchThreads {
			for _, n := range lengths {
				b.Run(fmt.Sprintf("synth/%s/threads=%d/tokens=%d/chunk=%d%s", format, threads, n, promptChunk, kvName()), func(b *testing.B) {
					dir := benchModel(b, "synth", format)
					m := loadBench(b, dir, threads)
					defer m.Close()
					ids := benchPrompt(b, m, "synth", n)
					prefill := func() { feedChunks(b, m, m.NewSequence(), ids) }
					// Map the weights in with one chunk, not a whole prompt.
					feedChunks(b, m, m.NewSequence(), ids[:min(promptChunk, n)])
					var cpu time.Duration
					for b.Loop() {
						c0 := cputime.Process()
						prefill()
						cpu += cputime.Process() - c0
					}
					b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tokens/s")
					if cpu > 0 {
						b.ReportMetric(float64(b.N*n)/cpu.Seconds(), "tokens/cpu-s")
					}
				})
			}
		}
	}
}

// BenchmarkPrefillTurn is an agent loop's turn in process: N new tokens
// (each length of turnEnv) fed in promptChunk-token chunks, as the server
// does, after a context of each depth of depthsEnv held in the sequence
// already (what the prefix cache supplies), on the synthetic model. Its
// tokens/cpu-s at depth 0 divided by that at depth D is the CPU cost of a
// turn at context D over a fresh prompt of its new tokens: `lfmq bench
// --turn-baseline`'s ratio, without the load of a shared machine in it.
// It runs only when turnEnv is set (e.g. 2048; the agent loop's last turn
// starts at depth 14,528).
func BenchmarkPrefillTurn(b *testing.B) {
	lengths := intList(turnEnv, nil, 1)
	if len(lengths) == 0 {
		b.Skipf("set %s to the new tokens of a turn, e.g. 2048", turnEnv)
	}
	for _, format := range benchFormats {
		for _, threads := range benchThreads {
			for _, n := range lengths {
				for _, depth := range benchDepths {
					b.Run(fmt.Sprintf("synth/%s/threads=%d/tokens=%d/chunk=%d/depth=%d%s", format, threads, n, promptChunk, depth, kvName()), func(b *testing.B) {
						dir := benchModel(b, "synth", format)
						m := loadBench(b, dir, threads)
						defer m.Close()
						ids := benchPrompt(b, m, "synth", n)
						ctx := withContext(b, m, depth)
						fresh := func() *model.Sequence {
							b.StopTimer()
							defer b.StartTimer()
							return ctx.Clone()
						}
						turn := func(s *model.Sequence) { feedChunks(b, m, s, ids) }
						// Map the weights in with one chunk.
						feedChunks(b, m, m.NewSequence(), ids[:min(promptChunk, n)])
						var cpu time.Duration
						for b.Loop() {
							s := fresh()
							c0 := cputime.Process()
							turn(s)
							cpu += cputime.Process() - c0
						}
						b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tokens/s")
						if cpu > 0 {
							b.ReportMetric(float64(b.N*n)/cpu.Seconds(), "tokens/cpu-s")
						}
					})
				}
			}
		}
	}
}

// BenchmarkMemRead is the bandwidth baseline on its own: readGB/s is the
// rate at which 1 and 2 goroutines read a buffer far larger than the
// caches (kernels.ReadXor, AVX2 loads), the denominator of the decode
// benchmarks' bw_frac. copyGB/s, from copy() between two such buffers, is
// reported beside it: copying also writes, so it understates what the
// machine can read.
func BenchmarkMemRead(b *testing.B) {
	for _, threads := range benchThreads {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			r := newReadProbe(threads)
			defer r.free()
			c := newCopyProbe(threads)
			defer c.free()
			c.pass() // the first pass also maps the destination's pages
			c.bytes, c.time = 0, 0
			for b.Loop() {
				r.pass()
				c.pass()
			}
			b.ReportMetric(r.bandwidth()/1e9, "readGB/s")
			b.ReportMetric(c.bandwidth()/1e9, "copyGB/s")
		})
	}
}

// probeBytes is the size of a probe buffer: eight times the largest
// last-level cache of current server CPUs per core complex (32 MiB), so
// that every pass runs from memory.
const probeBytes = 256 << 20

// rateSample is how long one rate probe pass runs each format's products
// on each shape: 80 ms in all, a few read probe passes' time.
const rateSample = 10 * time.Millisecond

// probeEvery is how many decode steps run between two probe passes: a
// pass takes about as long as a few steps of the synthetic model, so the
// probe samples the bandwidth throughout the benchmark at a small cost in
// time.
const probeEvery = 4

// readProbe measures the memory's read bandwidth: goroutines read equal
// contiguous parts of one buffer with kernels.ReadXor.
type readProbe struct {
	threads int
	buf     []byte
	bytes   int64         // bytes read by the passes so far
	time    time.Duration // their wall time
	sink    atomic.Uint64 // keeps the reads from being optimised away
}

// newReadProbe allocates the buffer and writes every page, so that passes
// measure reading, not page faults.
func newReadProbe(threads int) *readProbe {
	p := &readProbe{threads: threads, buf: make([]byte, probeBytes)}
	for i := 0; i < probeBytes; i += 4096 {
		p.buf[i] = byte(i >> 12)
	}
	return p
}

// pass reads the buffer once and adds it to the totals.
func (p *readProbe) pass() {
	part := len(p.buf) / p.threads &^ 127
	t0 := time.Now()
	var wg sync.WaitGroup
	for t := range p.threads {
		wg.Go(func() { p.sink.Add(kernels.ReadXor(p.buf[t*part : (t+1)*part])) })
	}
	wg.Wait()
	p.time += time.Since(t0)
	p.bytes += int64(p.threads * part)
}

// bandwidth returns the bytes read per second over all passes.
func (p *readProbe) bandwidth() float64 { return float64(p.bytes) / p.time.Seconds() }

// size returns the resident bytes of the buffer (0 for a nil probe).
func (p *readProbe) size() int64 {
	if p == nil {
		return 0
	}
	return int64(len(p.buf))
}

// free drops the buffer and hands its memory back to the OS.
func (p *readProbe) free() {
	p.buf = nil
	debug.FreeOSMemory()
}

// copyProbe measures copy() between two buffers, split in equal contiguous
// parts over a number of goroutines: for comparison with the read probe.
type copyProbe struct {
	threads  int
	src, dst []byte
	bytes    int64         // bytes copied by the passes so far
	time     time.Duration // their wall time
}

// newCopyProbe allocates the buffers and writes every page of both.
func newCopyProbe(threads int) *copyProbe {
	p := &copyProbe{threads: threads, src: make([]byte, probeBytes), dst: make([]byte, probeBytes)}
	for i := 0; i < probeBytes; i += 4096 {
		p.src[i], p.dst[i] = byte(i>>12), 1
	}
	return p
}

// pass copies src to dst once and adds it to the totals.
func (p *copyProbe) pass() {
	part := len(p.src) / p.threads
	t0 := time.Now()
	var wg sync.WaitGroup
	for t := range p.threads {
		wg.Go(func() { copy(p.dst[t*part:(t+1)*part], p.src[t*part:(t+1)*part]) })
	}
	wg.Wait()
	p.time += time.Since(t0)
	p.bytes += int64(p.threads * part)
}

// bandwidth returns the bytes copied per second over all passes.
func (p *copyProbe) bandwidth() float64 { return float64(p.bytes) / p.time.Seconds() }

// free drops the buffers and hands their memory back to the OS.
func (p *copyProbe) free() {
	p.src, p.dst = nil, nil
	debug.FreeOSMemory()
}

// resetPeakRSS resets the kernel's record of the process's peak resident
// memory (Linux: writing 5 to /proc/self/clear_refs resets VmHWM), so that
// reportPeakRSS covers only what follows. Elsewhere it does nothing.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// reportPeakRSS reports VmHWM, the peak resident memory, less exclude
// bytes that were resident throughout (the copy probe's buffers), in MB
// (10^6 bytes), where /proc/self/status has it.
func reportPeakRSS(b *testing.B, exclude int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && slices.Contains(f, "kB") {
				b.ReportMetric(float64(kb*1024-exclude)/1e6, "peakRSS_MB")
			}
		}
	}
}

// BenchmarkVerifyStep measures what a speculative verify step costs: one
// sequence, 512 tokens in, fed width tokens in one step with every
// position's logits and conv snapshots (what the scheduler asks for),
// then rewound. rel is its time over the one-token step's, measured in
// the same run: the c(k+1) of the speculation policy
// (docs/serving.md §6). On a memory-bound model a wider step reads the
// same weights once, so rel grows far slower than width.
func BenchmarkVerifyStep(b *testing.B) {
	for _, which := range benchModels {
		b.Run(which, func(b *testing.B) {
			dir := benchModel(b, which, "lfmq1")
			m, err := load.Load(dir, load.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			n := 512
			if which == "tiny" {
				n = 300 // the fixture's longest prompt is 314 tokens
			}
			base, _ := forward(b, m, benchPrompt(b, m, which, n), model.ForwardOptions{Logits: model.NoLogits})
			rng := rand.New(rand.NewPCG(7, 7))
			var one float64
			for _, width := range []int{1, 2, 3, 4, 5, 6, 8} {
				b.Run(fmt.Sprintf("width=%d", width), func(b *testing.B) {
					s := base.Clone()
					L := s.Len()
					snaps := make([]int, width+1)
					for i := range snaps {
						snaps[i] = L + i
					}
					mode := model.AllLogits
					if width == 1 {
						// A plain decode step; the one snapshot (a copy of
						// the state before the step) lets it be rewound.
						mode, snaps = model.LastLogits, snaps[:1]
					}
					toks := make([]int, width)
					for b.Loop() {
						for i := range toks {
							toks[i] = rng.IntN(m.Config.VocabSize)
						}
						opts := model.ForwardOptions{Logits: mode, ConvSnapshots: [][]int{snaps}}
						if _, err := m.Forward(context.Background(), []*model.Sequence{s}, [][]int{toks}, opts); err != nil {
							b.Fatal(err)
						}
						conv, _ := s.ConvAt(L)
						if err := s.Rewind(L, conv); err != nil {
							b.Fatal(err)
						}
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					if width == 1 {
						one = sec
					}
					b.ReportMetric(sec*1000, "ms/step")
					if one > 0 {
						b.ReportMetric(sec/one, "rel")
					}
				})
			}
		})
	}
}

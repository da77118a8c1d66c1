package model_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/format/dtype"
)

// A decode step's roofline (issue 44's "decode at each depth at ≥ 0.8× of
// its roofline"): the larger of two lower bounds on its time, the bytes it
// must read (every weight it multiplies, once, and every key and value its
// attention layers read) over the read bandwidth measured beside it, and
// its multiply-adds over the rate the product kernels reach on weights
// already in the caches (rateProbe, sampled between the steps as the
// read probe is). BenchmarkDecode reports roof_frac, the
// roofline's time over the measured time: 1 is the bound itself. Beside it,
// prodroof_frac holds the step to a tighter bound, the products' own
// rooflines summed (productSeconds): the roofline assumes one product's
// spare bandwidth serves another's multiply-adds, which products run one
// after another cannot do.

// Weight formats by index in stepCost's and rateProbe's arrays.
const (
	fmtF32 = iota
	fmtBF16
	fmtBFP8
	fmtBFP4
	numFormats
)

// stepCost is what one sequence's decode step at one position reads and
// multiplies: KV bytes, and multiply-adds by the format they use (the
// weights' by theirs, Model.DecodeMACs; attention's dot products by the KV
// cache's).
type stepCost struct {
	kvBytes float64
	macs    [numFormats]float64
	bytes   [numFormats]float64 // weight bytes by format (weightCost)
}

// formatIndex maps a weight format to its index in stepCost.macs.
var formatIndex = map[kernels.Format]int{kernels.F32: fmtF32, kernels.BF16: fmtBF16, kernels.BFP8: fmtBFP8, kernels.BFP4: fmtBFP4}

// kvFormatIndex maps a KV cache format to the index its dot products are
// counted at in stepCost.macs.
var kvFormatIndex = map[kv.DType]int{kv.F32: fmtF32, kv.BF16: fmtBF16, kv.BFP8: fmtBFP8}

// weightCost returns m's decode step's weight multiply-adds and bytes by
// format.
func weightCost(m *model.Model) stepCost {
	var sc stepCost
	for f, n := range m.DecodeMACs() {
		sc.macs[formatIndex[f]] += float64(n)
	}
	for f, n := range m.DecodeWeightBytesByFormat() {
		sc.bytes[formatIndex[f]] += float64(n)
	}
	return sc
}

// attentionCost returns the attention part of decoding the token at
// position pos with a model of config c and a KV cache of format dt: its
// attention reads positions [0, pos] of each attention layer, a sliding
// layer only the last window of them, keys and values, and multiplies
// each query head's q·k and p·v over them.
func attentionCost(c *config.Config, dt kv.DType, pos int) stepCost {
	var sc stepCost
	kvFmt := kvFormatIndex[dt]
	for l, k := range c.LayerKinds {
		if k == config.Conv {
			continue
		}
		keys := pos + 1
		if w := c.LayerWindow(l); w > 0 {
			keys = min(keys, w)
		}
		sc.macs[kvFmt] += 2 * float64(keys*c.NumHeads*c.HeadDim)
		sc.kvBytes += 2 * float64(keys*dt.RowBytes(c.NumKVHeads*c.HeadDim))
	}
	return sc
}

// roofSeconds returns the two bounds of the roofline of steps decode steps
// whose weights cost weights a step and whose attention cost attn in all:
// their weight and KV bytes at read bandwidth bw (bytes/s), and their
// multiply-adds at the product rates rates (multiply-adds/s per format).
// The roofline is the larger.
func roofSeconds(steps float64, weights, attn stepCost, bw float64, rates [numFormats]float64) (memory, compute float64) {
	bytes := attn.kvBytes
	for f := range numFormats {
		bytes += steps * weights.bytes[f]
		if n := steps*weights.macs[f] + attn.macs[f]; n > 0 {
			compute += n / rates[f]
		}
	}
	return bytes / bw, compute
}

// productSeconds returns the sum of the products' own rooflines over steps
// decode steps whose weights cost weights a step and whose attention cost
// attn in all: each weight format's products at the larger of their bytes
// at read bandwidth bw and their multiply-adds at that format's rate, and
// attention at the larger of its KV bytes and its dot products'. (The
// products of one format read the same bytes per multiply-add, so one
// format's sum of larger bounds is the larger of its sums.) A step runs
// its products one after another, so none can lend another its spare
// bandwidth or arithmetic: no step that does so is faster than this sum,
// which is at least the roofline's larger bound and, where compute-bound
// products alternate with memory-bound ones, above it.
func productSeconds(steps float64, weights, attn stepCost, bw float64, rates [numFormats]float64) float64 {
	var s, dots float64
	for f := range numFormats {
		if weights.macs[f] > 0 {
			s += steps * max(weights.bytes[f]/bw, weights.macs[f]/rates[f])
		}
		if attn.macs[f] > 0 {
			dots += attn.macs[f] / rates[f]
		}
	}
	return s + max(attn.kvBytes/bw, dots)
}

// rateProbe measures the multiply-adds per second the product kernels
// reach on threads threads, per weight format, on weights in the caches:
// each thread multiplies one vector by its own matrix of each format and
// each of rateShapes (at most 2 MiB, in its core's caches) over and over,
// and a format's rate is the faster shape's. Its passes interleave with
// the decode steps like the read probe's, so that the roofline's two
// bounds follow the same drift: measured once at the start of a run, on
// the shared VM of docs/lfm3.md the rates moved by a third between runs
// minutes apart.
type rateProbe struct {
	threads int
	cells   [numFormats][len(rateShapes)]rateCell
}

// rateCell is one format's products on one of rateShapes: a matrix per
// thread, and the multiply-adds done so far over their wall time.
type rateCell struct {
	mats []*kernels.Matrix
	macs float64
	time time.Duration
}

// rate returns the cell's multiply-adds per second, 0 before it has run.
func (c *rateCell) rate() float64 {
	if c.time <= 0 {
		return 0
	}
	return c.macs / c.time.Seconds()
}

// rateShapes are the [out, in] shapes of a rate probe's matrices. Each
// format has its fast shape: a dense row's dot product runs longer over
// 2,048 inputs, and the BFP row kernels run longer over 2,048 outputs
// (64 tile columns a call, as a decode product's ranges of 32 or more
// do, where 256 outputs give calls of 8). Measured on 256×2048 alone, the
// BFP rates were a fifth below what the kernels reach in a decode step,
// and the compute bound that much too loose (docs/lfm3.md).
var rateShapes = [...][2]int{{256, 2048}, {2048, 256}}

// newRateProbe makes each thread's matrices, seeded per thread with
// synth's weight distribution: the same weights in every format.
func newRateProbe(threads int) *rateProbe {
	p := &rateProbe{threads: threads}
	for s, sh := range rateShapes {
		for t := range threads {
			rng := rand.New(rand.NewPCG(9, uint64(t)))
			w := make([]float32, sh[0]*sh[1])
			for i := range w {
				w[i] = float32(rng.NormFloat64() / 45) // N(0, 1/2048), as synth's
			}
			for f := range numFormats {
				c := &p.cells[f][s]
				c.mats = append(c.mats, rateMatrix(f, w, sh[0], sh[1]))
			}
		}
	}
	return p
}

// pass runs each format's products on each shape for about d on every
// thread and adds them to the totals.
func (p *rateProbe) pass(d time.Duration) {
	for f := range numFormats {
		for s, sh := range rateShapes {
			c := &p.cells[f][s]
			var wg sync.WaitGroup
			counts := make([]int, p.threads)
			t0 := time.Now()
			for t := range p.threads {
				wg.Go(func() {
					x, y := make([]float32, sh[1]), make([]float32, sh[0])
					for i := range x {
						x[i] = float32(i%7) - 3
					}
					for time.Since(t0) < d {
						c.mats[t].MatVec(y, x)
						counts[t]++
					}
				})
			}
			wg.Wait()
			c.time += time.Since(t0)
			for _, n := range counts {
				c.macs += float64(n) * float64(sh[0]*sh[1])
			}
		}
	}
}

// rates returns the multiply-adds per second of each format over all
// passes, on its faster shape.
func (p *rateProbe) rates() [numFormats]float64 {
	var r [numFormats]float64
	for f := range r {
		for s := range rateShapes {
			r[f] = max(r[f], p.cells[f][s].rate())
		}
	}
	return r
}

// size returns the bytes of the probe's matrices (0 for a nil probe), for
// peakRSS_MB to leave out.
func (p *rateProbe) size() int64 {
	if p == nil {
		return 0
	}
	var n int64
	for f := range numFormats {
		for s := range rateShapes {
			for _, m := range p.cells[f][s].mats {
				n += int64(m.WeightBytes())
			}
		}
	}
	return n
}

// String gives each format's rate in GMAC/s on each of rateShapes, for
// the benchmark's log; the roofline takes the faster (rates).
func (p *rateProbe) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "product kernels in cache, %d threads, GMAC/s on", p.threads)
	for _, sh := range rateShapes {
		fmt.Fprintf(&b, " %dx%d", sh[0], sh[1])
	}
	for f, name := range [numFormats]string{fmtF32: "f32", fmtBF16: "bf16", fmtBFP8: "bfp8", fmtBFP4: "bfp4"} {
		fmt.Fprintf(&b, "; %s", name)
		for s := range rateShapes {
			fmt.Fprintf(&b, " %.1f", p.cells[f][s].rate()/1e9)
		}
	}
	return b.String()
}

// rateMatrix returns w [out, in] as a matrix of format f.
func rateMatrix(f int, w []float32, out, in int) *kernels.Matrix {
	var m *kernels.Matrix
	var err error
	switch f {
	case fmtF32:
		m, err = kernels.NewF32(out, in, w)
	case fmtBF16:
		u := make([]uint16, len(w))
		for i, v := range w {
			u[i] = dtype.Float32ToBF16(v)
		}
		m, err = kernels.NewBF16(out, in, u)
	default:
		bf, kf := bfp.BFP8, kernels.BFP8
		if f == fmtBFP4 {
			bf, kf = bfp.BFP4, kernels.BFP4
		}
		var tiles []byte
		if tiles, err = bfp.PackMatrixRule(bf, bfp.RuleMax, w, out, in); err == nil {
			m, err = kernels.NewBFP(kf, out, in, tiles)
		}
	}
	if err != nil {
		panic(err)
	}
	return m
}

// TestAttentionCost holds attentionCost to bytes and multiply-adds
// counted by hand for a model of LFM3-1.7B's attention shapes (a full and
// a sliding attention layer of 16 query and 4 KV heads of 128, window 256)
// at position 1,000 with a bf16 KV cache.
func TestAttentionCost(t *testing.T) {
	cfg, err := config.Parse("config.json", []byte(`{"model_type": "lfm3", "vocab_size": 128000, "hidden_size": 2048,
		"intermediate_size": 7680, "num_hidden_layers": 4, "layer_types": ["conv", "full_attention", "sliding_attention", "conv"],
		"num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128, "conv_L_cache": 7, "sliding_window": 256,
		"max_position_embeddings": 262144, "norm_eps": 1e-5, "conv_bias": false, "tie_word_embeddings": true,
		"rope_parameters": {"full_attention": {"rope_theta": 1e6, "rope_type": "default", "partial_rotary_factor": 0.5},
		"sliding_attention": {"rope_theta": 1e4, "rope_type": "default"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := attentionCost(cfg, kv.BF16, 1000)
	// Full layer: 1,001 keys and values of 4 heads of 128 in bf16 (1,024
	// bytes a row); sliding layer: its 256. q·k and p·v over 16 heads of
	// 128.
	want := stepCost{kvBytes: 2*1001*1024 + 2*256*1024}
	want.macs[fmtBF16] = 2*1001*2048 + 2*256*2048
	if got != want {
		t.Errorf("attentionCost = %+v\nwant            %+v", got, want)
	}
}

// TestDecodeMACs: a decode step of the BF16 LFM3 fixture multiplies each
// of its 3,125,888 parameters (its README) once, but for those no product
// reads: the 6 conv kernels (128·7 each), the norms (4 of 128 in each of
// its 10 layers, q and k norms of 32 in its 4 attention layers, the final
// norm of 128) — 3,115,008
// multiply-adds, all of BF16 weights, two bytes each.
func TestDecodeMACs(t *testing.T) {
	const params, kernels7, norms = 3125888, 6 * 128 * 7, 10*4*128 + 4*2*32 + 128
	m := lfm3(t)
	got := m.DecodeMACs()
	if want := map[kernels.Format]int64{kernels.BF16: params - kernels7 - norms}; !maps.Equal(got, want) {
		t.Errorf("DecodeMACs = %v, want %v", got, want)
	}
	if bytes, want := m.DecodeWeightBytesByFormat(), map[kernels.Format]int64{kernels.BF16: 2 * (params - kernels7 - norms)}; !maps.Equal(bytes, want) {
		t.Errorf("DecodeWeightBytesByFormat = %v, want %v", bytes, want)
	}
}

// TestProductSeconds holds productSeconds and roofSeconds to sums worked
// by hand: a compute-bound format beside a memory-bound one sums each
// one's larger bound, which passes the roofline's larger bound by the sum
// of the smaller ones' slack.
func TestProductSeconds(t *testing.T) {
	var rates [numFormats]float64
	rates[fmtBF16], rates[fmtBFP8], rates[fmtBFP4] = 40, 25, 30
	const bw = 20.0
	for _, c := range []struct {
		name           string
		steps          float64
		weights, attn  stepCost
		want, wantRoof float64
	}{
		{
			// BFP4: 60 multiply-adds at 30 (2 s) over 30 bytes at 20
			// (1.5 s); BFP8: 25 multiply-adds at 25 (1 s) over 50 bytes
			// (2.5 s): 4.5 s a step, against a roofline of max(4, 3) = 4.
			name:    "weights",
			steps:   1,
			weights: stepCost{macs: [numFormats]float64{fmtBFP4: 60, fmtBFP8: 25}, bytes: [numFormats]float64{fmtBFP4: 30, fmtBFP8: 50}},
			want:    4.5, wantRoof: 4,
		},
		{
			// Two steps of the above (9 s), and attention's 80 dot
			// products at BF16's 40 (2 s) over 60 KV bytes (3 s): 12 s,
			// against max((160+60)/20, 6+2) = 11.
			name:    "steps and attention",
			steps:   2,
			weights: stepCost{macs: [numFormats]float64{fmtBFP4: 60, fmtBFP8: 25}, bytes: [numFormats]float64{fmtBFP4: 30, fmtBFP8: 50}},
			attn:    stepCost{kvBytes: 60, macs: [numFormats]float64{fmtBF16: 80}},
			want:    12, wantRoof: 11,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := productSeconds(c.steps, c.weights, c.attn, bw, rates)
			memory, compute := roofSeconds(c.steps, c.weights, c.attn, bw, rates)
			if math.Abs(got-c.want) > 1e-12 || math.Abs(max(memory, compute)-c.wantRoof) > 1e-12 {
				t.Errorf("productSeconds = %g, roofline %g; want %g and %g", got, max(memory, compute), c.want, c.wantRoof)
			}
		})
	}
}

// TestRateProbeRates: a format's rate is its faster shape's, each shape's
// multiply-adds over its own time, and a shape not yet run (no time)
// counts for nothing.
func TestRateProbeRates(t *testing.T) {
	var p rateProbe
	set := func(f int, macs [len(rateShapes)]float64, secs [len(rateShapes)]time.Duration) {
		for s := range rateShapes {
			p.cells[f][s].macs, p.cells[f][s].time = macs[s], secs[s]
		}
	}
	set(fmtBFP4, [len(rateShapes)]float64{4e9, 9e9}, [len(rateShapes)]time.Duration{time.Second, 3 * time.Second})
	set(fmtBF16, [len(rateShapes)]float64{6e9, 2e9}, [len(rateShapes)]time.Duration{2 * time.Second, 2 * time.Second})
	set(fmtBFP8, [len(rateShapes)]float64{0, 5e9}, [len(rateShapes)]time.Duration{0, time.Second})
	want := [numFormats]float64{fmtF32: 0, fmtBF16: 3e9, fmtBFP8: 5e9, fmtBFP4: 4e9}
	if got := p.rates(); got != want {
		t.Fatalf("rates() = %v, want %v", got, want)
	}
}

package model_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
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
// already in the caches (tileRates). BenchmarkDecode reports roof_frac, the
// roofline's time over the measured time: 1 is the bound itself.

// Weight formats by index in stepCost's and tileRates' arrays.
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
}

// formatIndex maps a weight format to its index in stepCost.macs.
var formatIndex = map[kernels.Format]int{kernels.F32: fmtF32, kernels.BF16: fmtBF16, kernels.BFP8: fmtBFP8, kernels.BFP4: fmtBFP4}

// kvFormatIndex maps a KV cache format to the index its dot products are
// counted at in stepCost.macs.
var kvFormatIndex = map[kv.DType]int{kv.F32: fmtF32, kv.BF16: fmtBF16, kv.BFP8: fmtBFP8}

// weightCost returns m's decode step's weight multiply-adds by format.
func weightCost(m *model.Model) stepCost {
	var sc stepCost
	for f, n := range m.DecodeMACs() {
		sc.macs[formatIndex[f]] += float64(n)
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

// roofSeconds returns the two bounds of the roofline of a step that reads
// weightBytes of weights and costs sc: its bytes at read bandwidth bw
// (bytes/s), and its multiply-adds at the product rates rates
// (multiply-adds/s per format). The roofline is the larger.
func roofSeconds(weightBytes float64, sc stepCost, bw float64, rates [numFormats]float64) (memory, compute float64) {
	for f, n := range sc.macs {
		if n > 0 {
			compute += n / rates[f]
		}
	}
	return (weightBytes + sc.kvBytes) / bw, compute
}

var tileRateMemo sync.Map // threads → [numFormats]float64

// tileRates returns the multiply-adds per second the product kernels reach
// on threads threads, per weight format: each thread multiplies one vector
// by its own 256×2048 matrix (at most 2 MiB, in its core's caches) over
// and over for 0.2 s. Measured once per thread count and process.
func tileRates(threads int) [numFormats]float64 {
	if r, ok := tileRateMemo.Load(threads); ok {
		return r.([numFormats]float64)
	}
	const out, in = 256, 2048
	var rates [numFormats]float64
	for f := range numFormats {
		mats := make([]*kernels.Matrix, threads)
		for t := range mats {
			rng := rand.New(rand.NewPCG(9, uint64(t)))
			w := make([]float32, out*in)
			for i := range w {
				w[i] = float32(rng.NormFloat64() / 45) // N(0, 1/in), as synth's
			}
			mats[t] = rateMatrix(f, w, out, in)
		}
		var wg sync.WaitGroup
		counts := make([]int, threads)
		t0 := time.Now()
		for t := range threads {
			wg.Go(func() {
				x, y := make([]float32, in), make([]float32, out)
				for i := range x {
					x[i] = float32(i%7) - 3
				}
				for time.Since(t0) < 200*time.Millisecond {
					mats[t].MatVec(y, x)
					counts[t]++
				}
			})
		}
		wg.Wait()
		el := time.Since(t0).Seconds()
		var n int
		for _, c := range counts {
			n += c
		}
		rates[f] = float64(n) * out * in / el
	}
	tileRateMemo.Store(threads, rates)
	fmt.Fprintf(os.Stderr, "product kernels in cache, %d threads: f32 %.1f, bf16 %.1f, bfp8 %.1f, bfp4 %.1f GMAC/s\n",
		threads, rates[fmtF32]/1e9, rates[fmtBF16]/1e9, rates[fmtBFP8]/1e9, rates[fmtBFP4]/1e9)
	return rates
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
// multiply-adds, all of BF16 weights.
func TestDecodeMACs(t *testing.T) {
	const params, kernels7, norms = 3125888, 6 * 128 * 7, 10*4*128 + 4*2*32 + 128
	got := lfm3(t).DecodeMACs()
	if want := map[kernels.Format]int64{kernels.BF16: params - kernels7 - norms}; !maps.Equal(got, want) {
		t.Errorf("DecodeMACs = %v, want %v", got, want)
	}
}

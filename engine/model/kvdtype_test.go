package model_test

import (
	"errors"
	"math"
	"testing"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// tinyAs loads the fixture with its KV cache in format dt.
func tinyAs(t *testing.T, dt kv.DType, threads int) *model.Model {
	t.Helper()
	m, err := load.Load(tinyDir, load.Options{KVCacheDType: dt, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestKVCacheDTypeInvariance: in every KV format, decoding token by token,
// prefilling in chunks, batching with other sequences and changing the
// thread count give the same bits, also past attention's first split; a
// span of the format round-trips through its bytes.
func TestKVCacheDTypeInvariance(t *testing.T) {
	for _, dt := range []kv.DType{kv.BF16, kv.BFP8} {
		t.Run(dt.String(), func(t *testing.T) {
			m := tinyAs(t, dt, 0)
			if m.KVCacheDType() != dt {
				t.Fatalf("KVCacheDType %s, want %s", m.KVCacheDType(), dt)
			}
			checkIncrementalEqualsFull(t, m, prompts(t)[:2])
			checkBatchInvariance(t, m, batchInputs(t))
			want := longRun(t, m, 0)
			requireSame(t, "chunks of 100", longRun(t, m, 100), want)
			requireSame(t, "3 threads, chunks of 300", longRun(t, tinyAs(t, dt, 3), 300), want)
			checkSpanRoundTrip(t, m)
		})
	}
}

// TestKVCacheDTypeBytes: a position's KV state in bf16 is half of
// float32's, in bfp8 at most 0.27 of it, as Sequence.StateBytes counts.
func TestKVCacheDTypeBytes(t *testing.T) {
	ids := prompts(t)[0].InputIDs
	perToken := map[kv.DType]float64{}
	for _, dt := range kv.DTypes {
		m := tinyAs(t, dt, 0)
		s1, _ := forward(t, m, ids[:1], model.ForwardOptions{Logits: model.NoLogits})
		s2, _ := forward(t, m, ids[:11], model.ForwardOptions{Logits: model.NoLogits})
		perToken[dt] = float64(s2.StateBytes()-s1.StateBytes()) / 10
	}
	f32 := perToken[kv.F32]
	if r := perToken[kv.BF16] / f32; r != 0.5 {
		t.Errorf("bf16: %.4g of float32's bytes per token, want 0.5", r)
	}
	if r := perToken[kv.BFP8] / f32; r > 0.27 {
		t.Errorf("bfp8: %.4g of float32's bytes per token, want at most 0.27", r)
	}
}

// TestKVCacheDTypeAccuracy: against the float32 cache, over the fixture's
// reference prompts (each position predicting the next prompt token), the
// rounded caches stay close: mean KL divergence, top-1 agreement and the
// change in perplexity, logged, with bounds about ten times the values
// measured when this test was written (bf16: KL 4.1e-5, top-1 1.0, PPL
// ratio 0.99966; bfp8: 2.7e-4, 0.995, 1.0012), so that a broken codec or
// a cache read at the wrong place fails.
func TestKVCacheDTypeAccuracy(t *testing.T) {
	base := tiny(t)
	V := base.Config.VocabSize
	ps := prompts(t)
	ref := make([][]float32, len(ps))
	for i, p := range ps {
		_, ref[i] = forward(t, base, p.InputIDs, model.ForwardOptions{Logits: model.AllLogits})
	}
	for _, tc := range []struct {
		dt          kv.DType
		kl, top1, d float64 // bounds: mean KL, top-1 disagreement, |ΔPPL|/PPL
	}{{kv.BF16, 5e-4, 0.01, 0.005}, {kv.BFP8, 3e-3, 0.05, 0.012}} {
		m := tinyAs(t, tc.dt, 0)
		var kl, nll0, nll1 float64
		agree, n := 0, 0
		for i, p := range ps {
			_, got := forward(t, m, p.InputIDs, model.ForwardOptions{Logits: model.AllLogits})
			for pos := 0; pos+1 < len(p.InputIDs); pos++ {
				a, b := logSoftmax(ref[i][pos*V:(pos+1)*V]), logSoftmax(got[pos*V:(pos+1)*V])
				for j := range a {
					kl += math.Exp(a[j]) * (a[j] - b[j])
				}
				if argmax64(a) == argmax64(b) {
					agree++
				}
				next := p.InputIDs[pos+1]
				nll0, nll1 = nll0-a[next], nll1-b[next]
				n++
			}
		}
		kl /= float64(n)
		top1 := float64(agree) / float64(n)
		dppl := math.Exp(nll1/float64(n)) / math.Exp(nll0/float64(n))
		t.Logf("%s vs f32 over %d positions: mean KL %.3g, top-1 agreement %.4f, PPL ratio %.5f", tc.dt, n, kl, top1, dppl)
		if kl > tc.kl || 1-top1 > tc.top1 || math.Abs(dppl-1) > tc.d {
			t.Errorf("%s: mean KL %.3g (bound %g), top-1 %.4f (bound %g), PPL ratio %.5f (bound ±%g)", tc.dt, kl, tc.kl, top1, 1-tc.top1, dppl, tc.d)
		}
	}
}

func logSoftmax(x []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - mx - math.Log(s)
	}
	return out
}

func argmax64(x []float64) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestKVCacheDTypeRefusals: a span of one format does not extend a model
// of another, a version 1 span is refused by name, an unknown name or
// format is an *InputError.
func TestKVCacheDTypeRefusals(t *testing.T) {
	f32, b8 := tiny(t), tinyAs(t, kv.BFP8, 0)
	ids := prompts(t)[0].InputIDs[:8]
	s, _ := forward(t, f32, ids, model.ForwardOptions{Logits: model.NoLogits})
	conv, _ := s.ConvAt(len(ids))
	sp, err := s.CopySpan(0, len(ids), conv)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := sp.MarshalBinary()
	var ie *model.InputError
	if _, err := b8.UnmarshalSpan(data); !errors.As(err, &ie) {
		t.Errorf("a float32 span read by a bfp8 model: %v, want an *InputError", err)
	}
	if err := b8.NewSequence().Extend(sp); !errors.As(err, &ie) {
		t.Errorf("a float32 span extending a bfp8 sequence: %v, want an *InputError", err)
	}
	if _, err := model.ParseKVDType("fp8"); !errors.As(err, &ie) {
		t.Errorf("ParseKVDType(fp8): %v", err)
	}
	for _, dt := range kv.DTypes {
		if got, err := model.ParseKVDType(dt.String()); err != nil || got != dt {
			t.Errorf("ParseKVDType(%s) = %v, %v", dt, got, err)
		}
	}
	if _, err := load.Load(tinyDir, load.Options{KVCacheDType: 9}); !errors.As(err, &ie) {
		t.Errorf("format 9: %v", err)
	}
	v1 := append([]byte("lfmq-span-1\x00"), data[len("lfmq-span-2\x00"):]...)
	if _, err := f32.UnmarshalSpan(v1); err == nil || !errors.As(err, &ie) {
		t.Errorf("a version 1 span: %v", err)
	} else {
		t.Log(err)
	}
}

// TestDeviceKVCacheDType: a device engine keeps its sequences' KV cache in
// the format asked for, reports it, and holds the same bytes of state per
// sequence as the CPU engine in that format.
func TestDeviceKVCacheDType(t *testing.T) {
	ids := prompts(t)[0].InputIDs[:11]
	for _, dt := range kv.DTypes {
		dev, cpu := tinyOnDeviceAs(t, dt), tinyOnCPUAs(t, dt)
		if dev.KVCacheDType() != dt || dev.KVBytesPerToken() != cpu.KVBytesPerToken() {
			t.Errorf("%s on the device: KVCacheDType %s, %d bytes per token (CPU: %d)", dt, dev.KVCacheDType(), dev.KVBytesPerToken(), cpu.KVBytesPerToken())
		}
		sd, _ := forward(t, dev, ids, model.ForwardOptions{Logits: model.NoLogits})
		sc, _ := forward(t, cpu, ids, model.ForwardOptions{Logits: model.NoLogits})
		if sd.StateBytes() != sc.StateBytes() {
			t.Errorf("%s: a %d-token sequence holds %d bytes on the device, %d on the CPU", dt, len(ids), sd.StateBytes(), sc.StateBytes())
		}
	}
}

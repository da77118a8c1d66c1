package model_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/safetensors"
)

// The LFM3 fixture (testdata/tiny-lfm3/README.md): sliding-window and full
// attention, the attention output gate, the post norms, partial RoPE and a
// 7-tap conv, with an independent float32 reference.
const (
	lfm3Fixture = "../../testdata/tiny-lfm3"
	lfm3Dir     = lfm3Fixture + "/model"
	lfm3RefDir  = lfm3Fixture + "/reference"
	// lfm3LogitTol bounds |Δlogit| against the reference's full-sequence
	// and decode logits (issue 44's bound). Measured on linux/amd64 with
	// the AVX-512 kernels: at most 1.43e-5 over the full sequences
	// (chat_long_300) and 9.5e-6 over the decode steps; the fixture's
	// README measures the reference's own two paths 1.1e-5 and 1.5e-5
	// apart, and a float64 implementation within 1.4e-5 of it.
	lfm3LogitTol = 1e-4
	// lfm3HiddenTol bounds |Δ| of each layer's residual stream and of the
	// final norm of chat_tools against the reference: measured at most
	// 4.3e-6 (layers 7–9) and 5.4e-6 (final norm); this is about 4x that.
	lfm3HiddenTol = 2e-5
)

var (
	lfm3Once  sync.Once
	lfm3Model *model.Model
	lfm3Err   error
)

// lfm3 returns the LFM3 fixture model, loaded once per test binary.
func lfm3(t testing.TB) *model.Model {
	t.Helper()
	lfm3Once.Do(func() { lfm3Model, lfm3Err = load.Load(lfm3Dir, load.Options{}) })
	if lfm3Err != nil {
		t.Fatal(lfm3Err)
	}
	return lfm3Model
}

func lfm3Prompts(t testing.TB) []prompt { return promptsIn(t, lfm3RefDir) }

// TestLFM3ReferenceLogits: every prompt's full-sequence logits and the
// logits of each of its 32 greedy decode steps (one token at a time after
// the prompt) within lfm3LogitTol of the float32 reference, and the same
// greedy ids. Four prompts are longer than the 32-position window, so the
// sliding layers drop keys in prefill and in every decode step.
func TestLFM3ReferenceLogits(t *testing.T) {
	m := lfm3(t)
	if m.Config.ModelType != "lfm3" || m.Config.SlidingWindow != 32 {
		t.Fatalf("the fixture loaded as model_type %q, window %d", m.Config.ModelType, m.Config.SlidingWindow)
	}
	checkReferenceLogitsTol(t, m, lfm3Prompts(t), openRefIn(t, lfm3RefDir, "logits.safetensors"), lfm3LogitTol)
}

// TestLFM3ReferenceHiddenStates: the residual stream after the embedding
// and after every layer, and the final norm, of chat_tools (143 tokens,
// 111 past the window) against the reference, prefilled in chunks of 16
// so that the observer sees several steps.
func TestLFM3ReferenceHiddenStates(t *testing.T) {
	m := lfm3(t)
	ref := openRefIn(t, lfm3RefDir, "hidden_states.safetensors")
	ids := ref.ints(t, "input_ids")
	T, H := len(ids), m.Config.HiddenSize
	rec := newRecorder()
	forward(t, m, ids, model.ForwardOptions{Logits: model.AllLogits, Observer: rec, ChunkSize: 16})
	hs := ref.get(t, "hidden_states")
	if len(hs) != (m.Config.NumLayers+1)*T*H {
		t.Fatalf("hidden_states has %d values, want %d layers of [%d, %d]", len(hs), m.Config.NumLayers+1, T, H)
	}
	for i := 0; i <= m.Config.NumLayers; i++ {
		want := hs[i*T*H : (i+1)*T*H]
		d := maxAbsDiff(rec.hidden[i], want)
		t.Logf("hidden_states[%d]: max |Δ| %.3g, 1−cosine %.2g", i, d, 1-cosine(rec.hidden[i], want))
		if d > lfm3HiddenTol {
			t.Errorf("hidden_states[%d] (after layer %d, %s): max |Δ| %.3g, tolerance %g", i, i-1, layerType(m, i-1), d, lfm3HiddenTol)
		}
	}
	fn := ref.get(t, "final_norm")
	d := maxAbsDiff(rec.final, fn)
	t.Logf("final_norm: max |Δ| %.3g", d)
	if d > lfm3HiddenTol {
		t.Errorf("final_norm: max |Δ| %.3g, tolerance %g", d, lfm3HiddenTol)
	}
}

func layerType(m *model.Model, l int) string {
	if l < 0 {
		return "embedding"
	}
	return m.Config.LayerType(l)
}

// TestLFM3IncrementalEqualsFull: token by token, in chunks of 1, 3, 7 and
// 64 (chunks that cut the window anywhere) and whole, the same bits.
func TestLFM3IncrementalEqualsFull(t *testing.T) {
	checkIncrementalEqualsFull(t, lfm3(t), lfm3Prompts(t))
}

func TestLFM3BatchInvariance(t *testing.T) {
	checkBatchInvariance(t, lfm3(t), batchInputsOf(lfm3Prompts(t)))
}

func TestLFM3ThreadInvariance(t *testing.T) {
	checkThreadInvariance(t, lfm3Dir, lfm3(t), batchInputsOf(lfm3Prompts(t)))
}

// TestLFM3LongContextInvariance: past attention's first split (1,024
// positions), where the sliding layers' windows of rows 1,024 to 1,054
// straddle the split boundary, prefilled whole, in chunks or on other
// thread counts, the same bits.
func TestLFM3LongContextInvariance(t *testing.T) {
	base := lfm3(t)
	want := longRun(t, base, 0)
	for _, chunk := range []int{100, 1023} {
		requireSame(t, fmt.Sprintf("chunks of %d", chunk), longRun(t, base, chunk), want)
	}
	m, err := load.Load(lfm3Dir, load.Options{Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	requireSame(t, "3 threads, chunks of 300", longRun(t, m, 300), want)
}

// TestLFM3KVCacheDTypeInvariance: with a bf16 or bfp8 cache, the sliding
// window's reads (which start inside a page) keep the bits at any chunking,
// batch and thread count, and the logits stay near the float32 cache's.
func TestLFM3KVCacheDTypeInvariance(t *testing.T) {
	ps := lfm3Prompts(t)
	for _, dt := range []kv.DType{kv.BF16, kv.BFP8} {
		t.Run(dt.String(), func(t *testing.T) {
			m, err := load.Load(lfm3Dir, load.Options{KVCacheDType: dt})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkIncrementalEqualsFull(t, m, []prompt{ps[1], ps[4]})
			checkBatchInvariance(t, m, batchInputsOf(ps))
			want := longRun(t, m, 0)
			requireSame(t, "chunks of 100", longRun(t, m, 100), want)
			m3, err := load.Load(lfm3Dir, load.Options{KVCacheDType: dt, Threads: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer m3.Close()
			requireSame(t, "3 threads, chunks of 300", longRun(t, m3, 300), want)
			// A cache read at the wrong positions would be far off.
			_, got := forward(t, m, ps[3].InputIDs, model.ForwardOptions{Logits: model.AllLogits})
			_, f32 := forward(t, lfm3(t), ps[3].InputIDs, model.ForwardOptions{Logits: model.AllLogits})
			d := maxAbsDiff(got, f32)
			t.Logf("%s cache: max |Δlogit| %.3g against the float32 cache over chat_tools", dt, d)
			if d > 0.5 {
				t.Errorf("%s cache: max |Δlogit| %.3g against the float32 cache", dt, d)
			}
		})
	}
}

// TestLFM3LoadFindings: a checkpoint whose tensors do not fit the lfm3
// config is refused with one finding per tensor: a missing gate and post
// norm, LFM2's name for the output projection, an element-wise gate's
// shape.
func TestLFM3LoadFindings(t *testing.T) {
	f, err := safetensors.Open(filepath.Join(lfm3Dir, hf.SingleFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var list []safetensors.Tensor
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		data, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		tn := safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: slices.Clone(data)}
		switch name {
		case "model.layers.2.self_attn.gate_proj.weight", "model.layers.0.post_ffn_norm.weight":
			continue
		case "model.layers.4.self_attn.o_proj.weight":
			tn.Name = "model.layers.4.self_attn.out_proj.weight"
		case "model.layers.6.self_attn.gate_proj.weight":
			tn.Shape, tn.Data = []int64{128, 128}, make([]byte, 128*128*2)
		}
		list = append(list, tn)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	dir := t.TempDir()
	if err := safetensors.Write(filepath.Join(dir, hf.SingleFile), list, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(lfm3Dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = load.Load(dir, load.Options{})
	var fe *load.FindingsError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a FindingsError", err)
	}
	var got []string
	for _, e := range fe.Findings {
		var te *load.TensorError
		if !errors.As(e, &te) {
			t.Fatalf("finding %v is not a TensorError", e)
		}
		got = append(got, te.Problem+" "+te.Tensor)
	}
	sort.Strings(got)
	want := []string{
		"missing model.layers.0.post_ffn_norm.weight",
		"missing model.layers.2.self_attn.gate_proj.weight",
		"missing model.layers.4.self_attn.o_proj.weight",
		"shape model.layers.6.self_attn.gate_proj.weight",
		"unexpected model.layers.4.self_attn.out_proj.weight",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(err.Error(), "[4 128]") {
		t.Errorf("err = %q; want the gate's expected shape [4 128] named", err)
	}
}

// TestLFM3SequenceState: what the LFM2 fixtures' sequences promise holds
// with sliding layers: a rewind after a draft continues bit for bit as a
// cold run of the kept tokens, a span round-trips, and running the layers
// in two ranges (StartLayer) or stopping inside the last (LastLayer) gives
// a whole run's bits, on prompts longer than the window.
func TestLFM3SequenceState(t *testing.T) {
	m := lfm3(t)
	ids := lfm3Prompts(t)[4].InputIDs // 66 tokens
	t.Run("rewind", func(t *testing.T) { checkRewind(t, m, m, []int{0, 3, 6}) })
	t.Run("span", func(t *testing.T) { checkSpanRoundTrip(t, m) })
	t.Run("start layer", func(t *testing.T) { checkSplit(t, "lfm3", m, ids) })
	t.Run("last layer", func(t *testing.T) { checkLastLayer(t, "lfm3", m, ids) })
}

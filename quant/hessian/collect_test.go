package hessian

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
)

const (
	tinyModel = "../../testdata/tiny-lfm2-moe/model"
	tinyCalib = "../../testdata/tiny-lfm2-moe/calibration/calibration.jsonl"
)

// calibWindows returns the first n fixture windows cut to length l.
func calibWindows(t testing.TB, n, l int) [][]int {
	t.Helper()
	f, err := os.Open(tinyCalib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var out [][]int
	for sc.Scan() && len(out) < n {
		var rec struct {
			InputIDs []int `json:"input_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.InputIDs[:l])
	}
	return out
}

// recorder keeps what the engine hands to each expert of one layer.
type recorder struct {
	model.BaseObserver
	layer    int
	up, down map[int][][]float32
	g        map[int][]float32
}

func (r *recorder) Expert(layer, e int, rows model.Rows, x *model.ExpertRows) {
	if layer != r.layer {
		return
	}
	H, F := len(x.Up)/len(x.Rows), len(x.Down)/len(x.Rows)
	for i := range x.Rows {
		r.up[e] = append(r.up[e], append([]float32(nil), x.Up[i*H:(i+1)*H]...))
		r.down[e] = append(r.down[e], append([]float32(nil), x.Down[i*F:(i+1)*F]...))
		r.g[e] = append(r.g[e], x.Weights[i])
	}
}

// TestCollectMatchesEngine: the cached expert inputs and the recomputed w2
// inputs are bit-identical to the rows the engine's forward hands each
// expert, and the statistics built from either are identical.
func TestCollectMatchesEngine(t *testing.T) {
	m, err := load.Load(tinyModel, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	windows := calibWindows(t, 6, 96)
	const layer = 3
	c, err := Collect(context.Background(), m, layer, windows, CollectOptions{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := c.Route(m.Config.NumExperts)
	if err != nil {
		t.Fatal(err)
	}
	// The engine, one window per call (another batching than Collect's).
	rec := &recorder{layer: layer, up: map[int][][]float32{}, down: map[int][][]float32{}, g: map[int][]float32{}}
	for _, w := range windows {
		if _, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{w}, model.ForwardOptions{Logits: model.NoLogits, Observer: rec}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := hf.Open(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bf16 := func(name string) *kernels.Matrix {
		info, _ := src.Info(name)
		raw, err := src.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(raw)/2)
		if err := dtype.ToFloat32(dtype.BF16, raw, v); err != nil {
			t.Fatal(err)
		}
		mat, err := kernels.NewF32(int(info.Shape[0]), int(info.Shape[1]), v)
		if err != nil {
			t.Fatal(err)
		}
		return mat
	}
	experts := make([]Expert, m.Config.NumExperts)
	for e := range experts {
		p := fmt.Sprintf("model.layers.%d.feed_forward.experts.%d.", layer, e)
		experts[e] = Expert{W1: bf16(p + "w1.weight"), W3: bf16(p + "w3.weight")}
	}
	up, err := UpStats(context.Background(), c, rt, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	down, err := DownStats(context.Background(), c, rt, experts, WeightG, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	H := c.Hidden
	for e := range experts {
		if len(rec.up[e]) != len(rt.Tokens[e]) {
			t.Fatalf("expert %d: engine routed %d tokens, the cache %d", e, len(rec.up[e]), len(rt.Tokens[e]))
		}
		wantUp, wantDown := NewStat(H), NewStat(experts[e].W1.Out)
		for i, tok := range rt.Tokens[e] {
			z := c.Z[int(tok)*H:][:H]
			for j := range z {
				if z[j] != rec.up[e][i][j] {
					t.Fatalf("expert %d row %d: cached z differs from the engine's expert input", e, i)
				}
			}
			if rt.Weights[e][i] != rec.g[e][i] {
				t.Fatalf("expert %d row %d: weight %v, engine %v", e, i, rt.Weights[e][i], rec.g[e][i])
			}
			wantUp.Add(rec.up[e][i], float64(rec.g[e][i]))
			wantDown.Add(rec.down[e][i], float64(rec.g[e][i]))
		}
		wantUp.Finish()
		wantDown.Finish()
		for i, v := range wantUp.S() {
			if up[e].S()[i] != v {
				t.Fatalf("expert %d: up statistics differ from the engine's rows at %d", e, i)
			}
		}
		for i, v := range wantDown.S() {
			if down[e].S()[i] != v {
				t.Fatalf("expert %d: w2 statistics differ from the engine's w2 inputs at %d", e, i)
			}
		}
	}
	t.Logf("%d tokens; tokens per expert %v", c.Tokens, func() []int {
		var n []int
		for _, tk := range rt.Tokens {
			n = append(n, len(tk))
		}
		return n
	}())
}

// TestCollectStream: calibrating layers 2, 3 and 5 through one Stream (each
// Collect starting where the previous one left the stream, keeping its
// input or its output) gives caches bit-identical to forwards from the
// embedding, and bad streams are refused.
func TestCollectStream(t *testing.T) {
	m, err := load.Load(tinyModel, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	windows := calibWindows(t, 5, 64)
	bg := context.Background()
	var st Stream
	for i, layer := range []int{2, 3, 5} {
		past := i%2 == 0
		got, err := Collect(bg, m, layer, windows, CollectOptions{Batch: 2, Stream: &st, Past: past})
		if err != nil {
			t.Fatal(err)
		}
		want, err := Collect(bg, m, layer, windows, CollectOptions{Batch: 3})
		if err != nil {
			t.Fatal(err)
		}
		if wl := layer + map[bool]int{false: 0, true: 1}[past]; st.Layer != wl {
			t.Fatalf("layer %d: stream left at layer %d, want %d", layer, st.Layer, wl)
		}
		for name, p := range map[string][2][]float32{"z": {got.Z, want.Z}, "weights": {got.Weights, want.Weights}} {
			for j := range p[1] {
				if math.Float32bits(p[0][j]) != math.Float32bits(p[1][j]) {
					t.Fatalf("layer %d: %s[%d] = %v from the stream, %v from the embedding", layer, name, j, p[0][j], p[1][j])
				}
			}
		}
		for j := range want.Experts {
			if got.Experts[j] != want.Experts[j] {
				t.Fatalf("layer %d: experts differ at %d", layer, j)
			}
		}
	}
	var ie *InputError
	for _, bad := range []Stream{{Layer: 6}, {Layer: 1, H: make([]float32, 3)}} {
		if _, err := Collect(bg, m, 5, windows, CollectOptions{Stream: &bad}); !errors.As(err, &ie) {
			t.Errorf("stream at layer %d with %d floats: %v", bad.Layer, len(bad.H), err)
		}
	}
}

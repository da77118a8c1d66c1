package synth

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
)

// TestDenseShapes: each published dense shape's config.json, written in the
// legacy key style, parses to the FFN width of the published model (the
// width Hugging Face derives from block_ff_dim), and its tensors count the
// parameters of the model cards.
func TestDenseShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		width  int
		params string // as the model cards round them
	}{
		{"LFM2-350M", 4608, "0.35B"},
		{"LFM2-1.2B", 8192, "1.17B"},
		{"LFM2-2.6B", 10752, "2.57B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DenseShape(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			cfg := parsedConfig(t, s)
			if !cfg.Dense() || cfg.IntermediateSize != tc.width || len(cfg.Unknown) != 0 || len(cfg.Defaulted) != 0 {
				t.Errorf("dense %v, width %d (want %d), unknown %v, defaulted %v", cfg.Dense(), cfg.IntermediateSize, tc.width, cfg.Unknown, cfg.Defaulted)
			}
			params := paramCount(cfg)
			t.Logf("%s: %d parameters, %.2f GB in BF16", tc.name, params, float64(2*params)/1e9)
			if got := fmt.Sprintf("%.2fB", float64(params)/1e9); got != tc.params {
				t.Errorf("%s parameters, the model card says %s", got, tc.params)
			}
		})
	}
	if _, err := DenseShape("LFM2-9B"); err == nil {
		t.Error("an unknown name gave a shape")
	}
}

// TestTinyDense writes the tiny dense shape and runs it with the engine: the
// checkpoint passes the loader's checks as a dense LFM2 and gives finite
// logits.
func TestTinyDense(t *testing.T) {
	m := loadTiny(t, TinyDenseShape())
	if !m.Config.Dense() || m.Config.IntermediateSize != 256 {
		t.Fatalf("loaded as %q with FFN width %d", m.Config.ModelType, m.Config.IntermediateSize)
	}
	checkFiniteLogits(t, m, []int{1, 2, 3, 4, 5})
	// A shape whose block_ff_dim does not give its width is refused.
	bad := TinyDenseShape()
	bad.FFBase = 1000
	if _, err := Write(t.Context(), t.TempDir(), Options{Shape: bad}); err == nil || !strings.Contains(err.Error(), "block_ff_dim 1000") {
		t.Errorf("inconsistent width: %v", err)
	}
}

// parsedConfig is the config.json that shape s writes, as engine/config
// reads it.
func parsedConfig(t *testing.T, s Shape) *config.Config {
	t.Helper()
	raw, err := configJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("config.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// paramCount is the number of parameters in the tensors cfg expects.
func paramCount(cfg *config.Config) int64 {
	var params int64
	for _, shape := range cfg.ExpectedTensors() {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		params += n
	}
	return params
}

// loadTiny writes shape s (seed 1) and loads it with the engine, one
// thread; the model is closed when the test ends.
func loadTiny(t *testing.T, s Shape) *model.Model {
	t.Helper()
	dir := t.TempDir()
	if _, err := Write(t.Context(), dir, Options{Shape: s, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	m, err := load.Load(dir, load.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// checkFiniteLogits runs ids through m in one new sequence and fails at the
// first logit that is NaN or infinite.
func checkFiniteLogits(t *testing.T, m *model.Model, ids []int) {
	t.Helper()
	out, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{ids}, model.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out[0] {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("logit %d is %v", i, v)
		}
	}
}

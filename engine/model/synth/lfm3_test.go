package synth

import (
	"fmt"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
)

// TestLFM3Shape: LFM3-1.7B's shape writes a config.json that engine/config
// reads as the published model (docs/lfm3.md): 13 conv, 6 full and 5
// sliding attention layers, window 256, conv kernel 7, no key unknown or
// left to a default, and tensors that count the 1.7B of its name.
func TestLFM3Shape(t *testing.T) {
	cfg := parsedConfig(t, LFM3Shape())
	if len(cfg.Unknown) != 0 || len(cfg.Defaulted) != 0 {
		t.Errorf("unknown %v, defaulted %v", cfg.Unknown, cfg.Defaulted)
	}
	var conv, full, sliding int
	for i, k := range cfg.LayerKinds {
		switch {
		case k == config.Conv:
			conv++
		case cfg.LayerWindow(i) > 0:
			sliding++
		default:
			full++
		}
	}
	if conv != 13 || full != 6 || sliding != 5 || cfg.SlidingWindow != 256 || cfg.ConvLCache != 7 || cfg.MaxPositionEmbeddings != 262144 {
		t.Errorf("%d conv, %d full, %d sliding layers, window %d, conv kernel %d, %d positions; want 13, 6, 5, 256, 7, 262144",
			conv, full, sliding, cfg.SlidingWindow, cfg.ConvLCache, cfg.MaxPositionEmbeddings)
	}
	params := paramCount(cfg)
	t.Logf("LFM3-1.7B: %d parameters, %.2f GB in BF16", params, float64(2*params)/1e9)
	if got := fmt.Sprintf("%.1fB", float64(params)/1e9); got != "1.7B" {
		t.Errorf("%s parameters, the model's name says 1.7B", got)
	}
}

// TestTinyLFM3 writes the tiny LFM3 shape and runs it with the engine past
// its sliding window: the checkpoint passes the loader's checks as an lfm3
// and gives finite logits.
func TestTinyLFM3(t *testing.T) {
	m := loadTiny(t, TinyLFM3Shape())
	if m.Config.ModelType != "lfm3" || m.Config.SlidingWindow != 16 {
		t.Fatalf("loaded as %q with window %d", m.Config.ModelType, m.Config.SlidingWindow)
	}
	ids := make([]int, 40)
	for i := range ids {
		ids[i] = 1 + i*13%500
	}
	checkFiniteLogits(t, m, ids)
}

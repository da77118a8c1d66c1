package sample

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPresets: the presets give docs/serving.md §2's table, field by
// field, over the neutral defaults.
func TestPresets(t *testing.T) {
	tests := []struct {
		name string
		want Params
	}{
		{"liquid", Params{Temperature: 0.1, TopK: 50, TopP: 1, RepetitionPenalty: 1.05}},
		{"agentic", Params{Temperature: 0.6, TopP: 0.95, RepetitionPenalty: 1}},
		{"reasoning", Params{Temperature: 0.6, TopP: 1, RepetitionPenalty: 1}},
		{"greedy", Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}},
		{"none", Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Preset(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			p := Neutral()
			d.Apply(&p)
			if p.Temperature != tt.want.Temperature || p.TopK != tt.want.TopK || p.TopP != tt.want.TopP ||
				p.MinP != tt.want.MinP || p.RepetitionPenalty != tt.want.RepetitionPenalty {
				t.Errorf("got %+v, want %+v", p, tt.want)
			}
		})
	}
	if _, err := Preset("creative"); err == nil {
		t.Error("unknown preset accepted")
	}
	if got := len(PresetNames()); got != 5 {
		t.Errorf("%d presets", got)
	}
}

// TestOverride: --default-sampling sets fields over a preset and refuses
// unknown keys and bad values, naming the key.
func TestOverride(t *testing.T) {
	base, _ := Preset("liquid")
	d, err := base.Override([]byte(`{"temperature": 0.3, "min_p": 0.15, "max_new_tokens": 256, "top_k": null}`))
	if err != nil {
		t.Fatal(err)
	}
	p := Neutral()
	d.Apply(&p)
	if p.Temperature != 0.3 || p.MinP != 0.15 || p.TopK != 50 || p.RepetitionPenalty != 1.05 || *d.MaxNewTokens != 256 {
		t.Errorf("got %+v max %v", p, *d.MaxNewTokens)
	}
	if *base.Temperature != 0.1 {
		t.Error("Override changed the preset it was called on")
	}
	got, _ := json.Marshal(d)
	if want := `{"temperature":0.3,"top_k":50,"min_p":0.15,"repetition_penalty":1.05,"max_new_tokens":256}`; string(got) != want {
		t.Errorf("MarshalJSON = %s, want %s", got, want)
	}
	bad := []struct{ in, key string }{
		{`{"temprature": 0.3}`, "temprature"},
		{`{"temperature": 3}`, "temperature"},
		{`{"temperature": "hot"}`, "temperature"},
		{`{"top_k": 2.5}`, "top_k"},
		{`{"top_k": -2}`, "top_k"},
		{`{"top_p": 0}`, "top_p"},
		{`{"min_p": 1.5}`, "min_p"},
		{`{"repetition_penalty": 0}`, "repetition_penalty"},
		{`{"max_new_tokens": 0}`, "max_new_tokens"},
		{`{"seed": 1}`, "seed"},
		{`{"top_k": 1, "top_k": 2}`, "top_k"},
		{`[1]`, ""},
		{`{"top_k": 1} x`, ""},
		{``, ""},
	}
	for _, b := range bad {
		_, err := base.Override([]byte(b.in))
		var pe *PresetError
		if !errors.As(err, &pe) || pe.Key != b.key {
			t.Errorf("%s: got %v, want a PresetError on key %q", b.in, err, b.key)
		}
	}
}

// TestLogProbs: hand-computed rows; the row is normalised and NaN for
// non-finite logits.
func TestLogProbs(t *testing.T) {
	// softmax(0, ln 3) = (1/4, 3/4).
	got := LogProbs(nil, []float32{0, float32(math.Log(3))})
	want := []float32{float32(math.Log(0.25)), float32(math.Log(0.75))}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-7 {
			t.Errorf("row[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	// Shift invariance at large logits: the max is subtracted first.
	a := LogProbs(nil, []float32{1000, 1001, 999})
	b := LogProbs(nil, []float32{0, 1, -1})
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("shifted row[%d] = %v, want %v", i, a[i], b[i])
		}
	}
	var sum float64
	for _, x := range b {
		sum += math.Exp(float64(x))
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Errorf("probabilities sum to %v", sum)
	}
	dst := make([]float32, 8)
	if r := LogProbs(dst, []float32{1, float32(math.Inf(1))}); !math.IsNaN(float64(r[0])) || &r[0] != &dst[0] {
		t.Errorf("non-finite logits: %v (reused dst: %v)", r, &r[0] == &dst[0])
	}
}

// TestLogProbOfOne: LogProb gives each id's entry of LogProbs' row bit for
// bit, on random rows at several scales and on rows with non-finite
// logits (NaN).
func TestLogProbOfOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rows := map[string][]float32{"non-finite +Inf": {1, float32(math.Inf(1)), 2}, "NaN": {0, float32(math.NaN())}, "all -Inf": {float32(math.Inf(-1)), float32(math.Inf(-1))}}
	for _, scale := range []float64{0.01, 1, 30, 1e4} {
		row := make([]float32, 1000)
		for i := range row {
			row[i] = float32(rng.NormFloat64() * scale)
		}
		rows[fmt.Sprintf("scale %g", scale)] = row
	}
	for name, row := range rows {
		want := LogProbs(nil, row)
		for id := range row {
			got := LogProb(row, id)
			if math.Float32bits(got) != math.Float32bits(want[id]) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want[id]))) {
				t.Errorf("%s: LogProb(row, %d) = %v, the row says %v", name, id, got, want[id])
			}
		}
	}
}

// BenchmarkLogProb: a sampled token's log-prob over a 65,536-token
// vocabulary, alone (LogProb) and through the whole row (LogProbs), as a
// server computes it without and with alternatives. The two alternate
// within each iteration, so that a loaded machine weighs on both alike:
// one_ms and row_ms are their mean times, one/row their ratio.
func BenchmarkLogProb(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	row := make([]float32, 65536)
	for i := range row {
		row[i] = float32(rng.NormFloat64() * 4)
	}
	var one, whole time.Duration
	var dst []float32
	for b.Loop() {
		t0 := time.Now()
		LogProb(row, 123)
		t1 := time.Now()
		dst = LogProbs(dst, row)
		_ = dst[123]
		whole += time.Since(t1)
		one += t1.Sub(t0)
	}
	b.ReportMetric(one.Seconds()*1000/float64(b.N), "one_ms")
	b.ReportMetric(whole.Seconds()*1000/float64(b.N), "row_ms")
	b.ReportMetric(one.Seconds()/whole.Seconds(), "one/row")
}

package sample

import (
	"math"
	"testing"
)

func TestPhiloxKnownAnswers(t *testing.T) {
	// Random123's published known-answer vectors (docs/serving.md §4).
	tests := []struct {
		c    [4]uint32
		k    [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)}, [2]uint32{^uint32(0), ^uint32(0)}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, tt := range tests {
		if got := Philox4x32(tt.c, tt.k); got != tt.want {
			t.Errorf("Philox4x32(%08x, %08x) = %08x, want %08x", tt.c, tt.k, got, tt.want)
		}
	}
}

func TestLn(t *testing.T) {
	xs := []float64{1, 2, 0.5, math.E, 10, 1e-300, 1e300, math.MaxFloat64, 0.7071067811865476, 1.4142135623730951, 1 + 1e-15, 1 - 1e-16}
	for i := 0; i < 10000; i++ {
		xs = append(xs, math.Exp(float64(i-5000)/97.3))
	}
	for _, x := range xs {
		got, want := Ln(x), math.Log(x)
		// One ulp either way: both are correctly rounded to within 1 ulp.
		if d := math.Abs(got - want); d > 4.5e-16*math.Max(1, math.Abs(want)) {
			t.Errorf("Ln(%v) = %v, math.Log = %v (diff %g)", x, got, want, d)
		}
	}
	// Subnormals: ln(2^-1074) = -1074·ln 2 (math.Log on amd64 does not
	// handle subnormal inputs, so compare with the exact product).
	if got, want := Ln(5e-324), -1074*math.Ln2; math.Abs(got-want) > 1e-12 {
		t.Errorf("Ln(5e-324) = %v, want %v", got, want)
	}
	if !math.IsInf(Ln(0), -1) || !math.IsNaN(Ln(-1)) || !math.IsInf(Ln(math.Inf(1)), 1) {
		t.Error("special values")
	}
}

func TestUniformRange(t *testing.T) {
	for pos := 0; pos < 100; pos++ {
		for v := 0; v < 100; v++ {
			u := uniform(42, pos, v)
			if !(u > 0 && u < 1) {
				t.Fatalf("u = %v", u)
			}
		}
	}
}

// TestStages checks each pipeline stage on hand-computed examples.
func TestStages(t *testing.T) {
	logits := []float32{2, -1, 0.5, 3, -2}
	var s Sampler
	t.Run("repetition sign rule", func(t *testing.T) {
		p := Neutral()
		p.RepetitionPenalty = 2
		z := s.process(p, logits, History{Prompt: []int{0, 1}, Output: []int{1}})
		want := []float64{1, -2, 0.5, 3, -2}
		for i := range want {
			if z[i] != want[i] {
				t.Fatalf("z = %v, want %v", z, want)
			}
		}
	})
	t.Run("frequency and presence on output only", func(t *testing.T) {
		p := Neutral()
		p.FrequencyPenalty, p.PresencePenalty = 0.5, 0.25
		z := s.process(p, logits, History{Prompt: []int{2, 2, 2}, Output: []int{3, 3, 0}})
		want := []float64{2 - 0.5 - 0.25, -1, 0.5, 3 - 1 - 0.25, -2}
		for i := range want {
			if z[i] != want[i] {
				t.Fatalf("z = %v, want %v", z, want)
			}
		}
	})
	t.Run("min_tokens blocks stops", func(t *testing.T) {
		p := Neutral()
		p.Temperature = 0
		p.MinTokens, p.StopIDs = 2, []int{3}
		if got := s.Next(p, logits, History{Output: []int{1}}, 5); got != 0 {
			t.Errorf("got %d, want 0 (stop id 3 suppressed)", got)
		}
		if got := s.Next(p, logits, History{Output: []int{1, 1}}, 5); got != 3 {
			t.Errorf("got %d, want 3 once min_tokens is reached", got)
		}
	})
	t.Run("greedy on penalised logits, ties lowest id", func(t *testing.T) {
		p := Neutral()
		p.Temperature, p.RepetitionPenalty = 0, 1.5
		// 3/1.5 = 2 ties with token 0's logit 2: the lower id wins.
		if got := s.Next(p, logits, History{Prompt: []int{3}}, 0); got != 0 {
			t.Errorf("got %d, want 0", got)
		}
		if got := s.Next(p, []float32{1, 5, 5}, History{}, 0); got != 1 {
			t.Errorf("tie: got %d, want 1", got)
		}
	})
	t.Run("min_p before top-k", func(t *testing.T) {
		p := Neutral()
		p.MinP = 0.3 // ln 0.3 = −1.204: keep z ≥ 3 − 1.204
		z := []float64{2, -1, 0.5, 3, -2}
		if got := s.filter(p, z); len(got) != 2 || got[0] != 0 || got[1] != 3 {
			t.Errorf("min_p kept %v, want [0 3]", got)
		}
	})
	t.Run("top-k ties kept", func(t *testing.T) {
		p := Neutral()
		p.TopK = 2
		z := []float64{1, 3, 1, 3, 3, 0}
		if got := s.filter(p, z); len(got) != 3 {
			t.Errorf("top-k=2 kept %v, want the three tied 3s", got)
		}
	})
	t.Run("top-p keeps the crossing token after top-k renormalisation", func(t *testing.T) {
		p := Neutral()
		p.TopK, p.TopP = 3, 0.6
		// softmax over survivors {3, 2, 1}: 0.665, 0.245, 0.090: mass before
		// token 1 (z=2) is 0.665 ≥ 0.6, so only the first survives.
		z := []float64{3, 2, 1, 0, -5}
		if got := s.filter(p, z); len(got) != 1 || got[0] != 0 {
			t.Errorf("kept %v, want [0]", got)
		}
		p.TopP = 0.7 // mass before token 1 is 0.665 < 0.7: kept; before token 2 is 0.91: dropped
		if got := s.filter(p, z); len(got) != 2 {
			t.Errorf("kept %v, want [0 1]", got)
		}
	})
	t.Run("temperature clamp", func(t *testing.T) {
		p := Neutral()
		p.Temperature, p.Seed = 0.001, 7
		// T is raised to 0.01: a logit gap of 1 becomes 100, so the top
		// token wins every draw.
		for pos := 0; pos < 200; pos++ {
			if got := s.Next(p, []float32{0, 1}, History{}, pos); got != 1 {
				t.Fatalf("pos %d: got %d", pos, got)
			}
		}
	})
}

// TestDistribution: seeded Gumbel-max draws follow softmax(z/T) restricted
// to the survivors (χ² goodness of fit).
func TestDistribution(t *testing.T) {
	logits := []float32{1.0, 0.2, -0.5, 2.0, 0.0, -3.0}
	p := Neutral()
	p.Temperature, p.TopK, p.Seed = 0.8, 4, 12345
	var s Sampler
	const n = 50000
	counts := make([]int, len(logits))
	for pos := 0; pos < n; pos++ {
		counts[s.Next(p, logits, History{}, pos)]++
	}
	// Survivors of top-4: ids 0, 1, 3, 4.
	surv := []int{0, 1, 3, 4}
	var total float64
	for _, v := range surv {
		total += math.Exp(float64(logits[v]) / 0.8)
	}
	var chi2 float64
	for _, v := range surv {
		exp := n * math.Exp(float64(logits[v])/0.8) / total
		d := float64(counts[v]) - exp
		chi2 += d * d / exp
	}
	if counts[2] != 0 || counts[5] != 0 {
		t.Errorf("filtered tokens drawn: %v", counts)
	}
	// 3 degrees of freedom: P(χ² > 16.27) = 0.001.
	if chi2 > 16.27 {
		t.Errorf("χ² = %.2f over %v", chi2, counts)
	}
}

func TestSeededDeterminism(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	p := Neutral()
	p.Seed = 99
	var a, b Sampler
	for pos := 0; pos < 50; pos++ {
		if x, y := a.Next(p, logits, History{}, pos), b.Next(p, logits, History{}, pos); x != y {
			t.Fatalf("pos %d: %d vs %d", pos, x, y)
		}
	}
	q := p
	q.Seed = 100
	diff := 0
	for pos := 0; pos < 50; pos++ {
		if a.Next(p, logits, History{}, pos) != b.Next(q, logits, History{}, pos) {
			diff++
		}
	}
	if diff == 0 {
		t.Error("a different seed gave the same 50 tokens")
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		field string
		edit  func(*Params)
	}{
		{"temperature", func(p *Params) { p.Temperature = 2.5 }},
		{"temperature", func(p *Params) { p.Temperature = math.NaN() }},
		{"top_p", func(p *Params) { p.TopP = 0 }},
		{"top_k", func(p *Params) { p.TopK = -2 }},
		{"min_p", func(p *Params) { p.MinP = 1.5 }},
		{"repetition_penalty", func(p *Params) { p.RepetitionPenalty = 0 }},
		{"presence_penalty", func(p *Params) { p.PresencePenalty = 3 }},
		{"logit_bias", func(p *Params) { p.LogitBias = map[int]float64{100: 1} }},
		{"stop_token_ids", func(p *Params) { p.StopIDs = []int{-1} }},
	}
	for _, b := range bad {
		p := Neutral()
		b.edit(&p)
		err := p.Validate(100)
		pe, ok := err.(*ParamError)
		if !ok || pe.Field != b.field {
			t.Errorf("%s: err = %v", b.field, err)
		}
	}
	if err := Neutral().Validate(100); err != nil {
		t.Error(err)
	}
}

package sample

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// refNext is the sampler written as docs/serving.md §3 reads: every
// survivor's noise computed, top-k by a full sort, top-p by a full sort
// with the normaliser summed in id order. The fast paths (pruned Gumbel
// draw, heap top-k, partial top-p sort) must give the same token every time.
func refNext(p Params, logits []float32, h History, pos int) int {
	var s Sampler
	z := s.process(p, logits, h)
	if p.Greedy() {
		return argmax(z)
	}
	T := max(p.Temperature, 0.01)
	for i := range z {
		z[i] /= T
	}
	zmax := math.Inf(-1)
	for _, v := range z {
		zmax = max(zmax, v)
	}
	cut := math.Inf(-1)
	if p.MinP > 0 {
		cut = zmax + Ln(p.MinP)
	}
	var keep []int
	for v, x := range z {
		if x >= cut && !math.IsInf(x, -1) {
			keep = append(keep, v)
		}
	}
	if p.TopK > 0 && len(keep) > p.TopK {
		vals := make([]float64, len(keep))
		for i, v := range keep {
			vals[i] = z[v]
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(vals)))
		kappa := vals[p.TopK-1]
		var k2 []int
		for _, v := range keep {
			if z[v] >= kappa {
				k2 = append(k2, v)
			}
		}
		keep = k2
	}
	if p.TopP < 1 && len(keep) > 1 {
		order := append([]int(nil), keep...)
		sort.SliceStable(order, func(i, j int) bool {
			if z[order[i]] != z[order[j]] {
				return z[order[i]] > z[order[j]]
			}
			return order[i] < order[j]
		})
		top := z[order[0]]
		var total float64
		for _, v := range keep {
			total += math.Exp(z[v] - top)
		}
		var mass float64
		n := 0
		for _, v := range order {
			if mass >= p.TopP {
				break
			}
			n++
			mass += math.Exp(z[v]-top) / total
		}
		keep = append([]int(nil), order[:n]...)
		sort.Ints(keep)
	}
	best, bestScore := -1, math.Inf(-1)
	for _, v := range keep {
		score := z[v] + gumbel(p.Seed, pos, v)
		if score > bestScore || best < 0 {
			best, bestScore = v, score
		}
	}
	return best
}

// TestFastPathsMatchReference: thousands of draws over random logits
// (peaked and flat, with ties) and parameter sets agree token for token.
func TestFastPathsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s Sampler
	params := []func(p *Params){
		func(p *Params) {},
		func(p *Params) { p.Temperature = 0.6 },
		func(p *Params) { p.Temperature, p.TopP = 0.6, 0.95 },
		func(p *Params) { p.Temperature, p.TopK, p.RepetitionPenalty = 0.1, 50, 1.05 },
		func(p *Params) { p.Temperature, p.MinP = 1.3, 0.02 },
		func(p *Params) { p.Temperature, p.TopK, p.TopP = 2, 7, 0.5 },
		func(p *Params) { p.Temperature, p.TopP = 1, 0.999 },
	}
	for trial := range 3000 {
		V := 50 + rng.IntN(3000)
		logits := make([]float32, V)
		spread := []float64{0.5, 3, 12}[trial%3]
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * spread)
			if trial%7 == 0 {
				logits[i] = float32(math.Round(float64(logits[i]))) // ties
			}
		}
		p := Neutral()
		params[trial%len(params)](&p)
		p.Seed = rng.Uint64()
		h := History{Prompt: []int{1, 2, 3}, Output: []int{rng.IntN(V)}}
		pos := rng.IntN(5000)
		if got, want := s.Next(p, logits, h, pos), refNext(p, logits, h, pos); got != want {
			t.Fatalf("trial %d (V %d, %+v): fast %d, reference %d", trial, V, p, got, want)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	logits := make([]float32, 65536)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	for _, tc := range []struct {
		name string
		set  func(p *Params)
	}{
		{"T=0.6", func(p *Params) { p.Temperature = 0.6 }},
		{"agentic", func(p *Params) { p.Temperature, p.TopP = 0.6, 0.95 }},
		{"liquid", func(p *Params) { p.Temperature, p.TopK, p.RepetitionPenalty = 0.1, 50, 1.05 }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var s Sampler
			p := Neutral()
			tc.set(&p)
			for i := range b.N {
				p.Seed = uint64(i)
				s.Next(p, logits, History{}, i)
			}
		})
		b.Run(tc.name+"/reference", func(b *testing.B) {
			p := Neutral()
			tc.set(&p)
			for i := range b.N {
				p.Seed = uint64(i)
				refNext(p, logits, History{}, i)
			}
		})
	}
}

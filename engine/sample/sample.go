package sample

import (
	"fmt"
	"math"
	"sort"
)

// Params are the sampling parameters of docs/serving.md §1. The zero value
// is not neutral (Temperature 0 is greedy); start from Neutral.
type Params struct {
	Temperature       float64
	TopP              float64
	TopK              int // 0 or −1: off
	MinP              float64
	RepetitionPenalty float64
	PresencePenalty   float64
	FrequencyPenalty  float64
	// LogitBias adds a value per token id (clamped to [−100, 100]).
	LogitBias map[int]float64
	// MinTokens suppresses the stop ids while fewer tokens were generated.
	MinTokens int
	StopIDs   []int
	Seed      uint64
}

// Neutral returns parameters that leave the distribution unchanged
// (temperature 1, no filtering, no penalties).
func Neutral() Params {
	return Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}
}

// Greedy reports whether p selects the argmax (T < 1e-5).
func (p Params) Greedy() bool { return p.Temperature < 1e-5 }

// ParamError names an invalid sampling field.
type ParamError struct {
	Field string
	Msg   string
}

func (e *ParamError) Error() string { return fmt.Sprintf("sample: %s: %s", e.Field, e.Msg) }

// Validate checks every field against docs/serving.md §1; vocab
// bounds the token ids of LogitBias and StopIDs.
func (p Params) Validate(vocab int) error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !finite(p.Temperature) || p.Temperature < 0 || p.Temperature > 2:
		return &ParamError{"temperature", fmt.Sprintf("%v is outside [0, 2]", p.Temperature)}
	case !(p.TopP > 0 && p.TopP <= 1):
		return &ParamError{"top_p", fmt.Sprintf("%v is outside (0, 1]", p.TopP)}
	case p.TopK < -1:
		return &ParamError{"top_k", fmt.Sprintf("%d; use 0 or -1 for off, else >= 1", p.TopK)}
	case !(p.MinP >= 0 && p.MinP <= 1):
		return &ParamError{"min_p", fmt.Sprintf("%v is outside [0, 1]", p.MinP)}
	case !finite(p.RepetitionPenalty) || p.RepetitionPenalty <= 0:
		return &ParamError{"repetition_penalty", fmt.Sprintf("%v must be finite and > 0", p.RepetitionPenalty)}
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return &ParamError{"presence_penalty", fmt.Sprintf("%v is outside [-2, 2]", p.PresencePenalty)}
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return &ParamError{"frequency_penalty", fmt.Sprintf("%v is outside [-2, 2]", p.FrequencyPenalty)}
	case p.MinTokens < 0:
		return &ParamError{"min_tokens", fmt.Sprintf("%d is negative", p.MinTokens)}
	}
	for id, b := range p.LogitBias {
		if id < 0 || id >= vocab {
			return &ParamError{"logit_bias", fmt.Sprintf("token id %d is outside [0, %d)", id, vocab)}
		}
		if !finite(b) {
			return &ParamError{"logit_bias", fmt.Sprintf("bias %v for token %d is not finite", b, id)}
		}
	}
	for _, id := range p.StopIDs {
		if id < 0 || id >= vocab {
			return &ParamError{"stop_token_ids", fmt.Sprintf("token id %d is outside [0, %d)", id, vocab)}
		}
	}
	return nil
}

// History is what the penalties look at: the prompt's tokens and the tokens
// generated so far.
type History struct {
	Prompt []int
	Output []int
}

// Sampler applies the pipeline of docs/serving.md §3 with reusable
// scratch buffers. It is not safe for concurrent use; use one per sequence.
type Sampler struct {
	z      []float64
	keep   []int
	order  []int     // top-p's sorted head
	heap   []float64 // top-k's selection
	seen   map[int]bool
	counts map[int]int
}

// Next returns the token drawn from logits at absolute position pos (the
// index of the token being sampled in prompt + output).
func (s *Sampler) Next(p Params, logits []float32, h History, pos int) int {
	z := s.process(p, logits, h)
	if p.Greedy() {
		return argmax(z)
	}
	T := p.Temperature
	if T < 0.01 {
		T = 0.01 // docs/serving.md §1: 1e-5 ≤ T < 0.01 is raised to 0.01
	}
	for i := range z {
		z[i] /= T
	}
	keep := s.filter(p, z)
	return draw(p.Seed, pos, z, keep)
}

// draw returns argmax_v (z_v + G(seed, pos, v)) over keep (ascending ids),
// the lowest id on ties. It is exact but skips the noise of tokens that
// cannot win: the highest logit is scored first, and a token is passed
// over when its noise could not lift it to the best
// score so far: when its uniform draw lies below the one its noise would
// need (checked against a table, so the two logarithms of the noise are
// computed only for the few tokens that might win). Every token that could
// win, or tie, is scored exactly as a full pass would.
func draw(seed uint64, pos int, z []float64, keep []int) int {
	a := keep[0]
	for _, v := range keep {
		if z[v] > z[a] {
			a = v
		}
	}
	best, bestScore := a, z[a]+gumbel(seed, pos, a)
	for _, v := range keep {
		if v == a {
			continue
		}
		u := uniform(seed, pos, v)
		// It needs G > d, i.e. u > exp(−exp(−d)).
		if d := bestScore - z[v]; d >= 0 && u < noiseThreshold(d) {
			continue
		}
		score := z[v] - Ln(-Ln(u))
		if score > bestScore || (score == bestScore && v < best) {
			best, bestScore = v, score
		}
	}
	return best
}

// process runs stages 1–4 (min_tokens, logit bias, penalties) into float64
// scratch.
func (s *Sampler) process(p Params, logits []float32, h History) []float64 {
	if cap(s.z) < len(logits) {
		s.z = make([]float64, len(logits))
	}
	z := s.z[:len(logits)]
	for i, v := range logits {
		z[i] = float64(v)
	}
	if len(h.Output) < p.MinTokens {
		for _, id := range p.StopIDs {
			z[id] = math.Inf(-1)
		}
	}
	for id, b := range p.LogitBias {
		z[id] += max(-100, min(100, b))
	}
	if p.RepetitionPenalty != 1 {
		if s.seen == nil {
			s.seen = map[int]bool{}
		}
		clear(s.seen)
		for _, list := range [][]int{h.Prompt, h.Output} {
			for _, id := range list {
				if id < 0 || id >= len(z) || s.seen[id] {
					continue
				}
				s.seen[id] = true
				if z[id] > 0 {
					z[id] /= p.RepetitionPenalty
				} else {
					z[id] *= p.RepetitionPenalty
				}
			}
		}
	}
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		if s.counts == nil {
			s.counts = map[int]int{}
		}
		clear(s.counts)
		for _, id := range h.Output {
			if id >= 0 && id < len(z) {
				s.counts[id]++
			}
		}
		for id, c := range s.counts {
			z[id] -= p.FrequencyPenalty * float64(c)
			z[id] -= p.PresencePenalty
		}
	}
	return z
}

// filter applies min_p, top-k and top-p (stages 7–9) to temperature-scaled
// logits and returns the surviving ids in ascending order.
func (s *Sampler) filter(p Params, z []float64) []int {
	keep := s.keep[:0]
	zmax := math.Inf(-1)
	for _, v := range z {
		zmax = max(zmax, v)
	}
	cut := math.Inf(-1)
	if p.MinP > 0 {
		// p_v < min_p·max p  ⇔  z_v < max z + ln min_p.
		cut = zmax + Ln(p.MinP)
	}
	for v, x := range z {
		if x >= cut && !math.IsInf(x, -1) {
			keep = append(keep, v)
		}
	}
	if p.TopK > 0 && len(keep) > p.TopK {
		kappa := s.kthLargest(z, keep, p.TopK)
		n := 0
		for _, v := range keep {
			if z[v] >= kappa { // ties with κ are kept
				keep[n] = v
				n++
			}
		}
		keep = keep[:n]
	}
	if p.TopP < 1 && len(keep) > 1 {
		keep = s.topP(z, keep, p.TopP)
	}
	s.keep = keep
	return keep
}

// topP keeps the survivors (ascending ids) that docs/serving.md §3's
// top-p keeps. The normaliser is summed in id order; the tokens are then
// taken by z descending (ties by id) until the mass before the next one
// reaches topP. Only the head of that order is sorted: the tokens within
// c of the highest logit, c doubling until the crossing falls among them,
// which for a peaked distribution is a few dozen of a vocabulary of 65,536.
func (s *Sampler) topP(z []float64, keep []int, topP float64) []int {
	top := math.Inf(-1)
	for _, v := range keep {
		top = max(top, z[v])
	}
	var total float64
	for _, v := range keep {
		total += math.Exp(z[v] - top)
	}
	for c := 8.0; ; c *= 2 {
		head := s.order[:0]
		for _, v := range keep {
			if z[v] >= top-c {
				head = append(head, v)
			}
		}
		s.order = head
		all := len(head) == len(keep)
		sort.Slice(head, func(i, j int) bool {
			if z[head[i]] != z[head[j]] {
				return z[head[i]] > z[head[j]]
			}
			return head[i] < head[j]
		})
		var mass float64
		n := 0
		for _, v := range head {
			if mass >= topP {
				break
			}
			n++
			mass += math.Exp(z[v]-top) / total
		}
		// The tokens outside the head come after all of it, so the cut
		// is final once it falls inside the head (or the head is all).
		if n < len(head) || all || math.IsInf(c, 1) {
			keep = append(keep[:0], head[:n]...)
			sort.Ints(keep)
			return keep
		}
	}
}

// kthLargest returns the k-th largest of z over keep, duplicates counted
// (1 ≤ k < len(keep)): a min-heap of the k largest seen, O(n log k).
func (s *Sampler) kthLargest(z []float64, keep []int, k int) float64 {
	h := s.heap[:0]
	for _, v := range keep {
		x := z[v]
		if len(h) < k {
			h = append(h, x)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if h[p] <= h[i] {
					break
				}
				h[p], h[i] = h[i], h[p]
				i = p
			}
			continue
		}
		if x <= h[0] {
			continue
		}
		h[0] = x
		for i := 0; ; {
			l, m := 2*i+1, i
			if l < k && h[l] < h[m] {
				m = l
			}
			if r := l + 1; r < k && h[r] < h[m] {
				m = r
			}
			if m == i {
				break
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	s.heap = h
	return h[0]
}

// argmax returns the largest element's index, the lowest index on ties.
func argmax(z []float64) int {
	best := 0
	for i, v := range z {
		if v > z[best] {
			best = i
		}
	}
	return best
}

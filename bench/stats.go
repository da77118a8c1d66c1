package bench

import (
	"math"
	"slices"
)

// Dist summarises a sample: its size, mean, percentiles and extremes.
// Percentiles interpolate linearly between the two nearest ranks (the
// definition of NumPy's default, which vLLM's benchmark reports): the
// p-th percentile of a sorted sample x[0..n-1] is x at rank p/100·(n−1).
// An empty sample is all zeros with N 0.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Summarize returns the Dist of xs (xs is not changed).
func Summarize(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Dist{
		N: len(s), Mean: sum / float64(len(s)), Min: s[0], Max: s[len(s)-1],
		P50: Percentile(s, 50), P90: Percentile(s, 90), P99: Percentile(s, 99),
	}
}

// Percentile returns the p-th percentile (0 ≤ p ≤ 100) of the sorted
// sample s by linear interpolation between closest ranks; NaN when s is
// empty.
func Percentile(s []float64, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	r := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(r))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (r-float64(lo))*(s[hi]-s[lo])
}

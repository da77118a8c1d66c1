package score

import (
	"errors"
	"math"
	"slices"

	"github.com/lfmq/lfmq/evidence"
)

// minSE is the smallest sample for which standard errors are reported
// (docs/scoring.md, "Statistics": SEs are null for N ≤ 10).
const minSE = 11

// ErrNoTokens is returned by Summarize and Paired for an empty sample.
var ErrNoTokens = errors.New("score: no scored tokens")

// Quantile returns the q-quantile of sorted (ascending) by linear
// interpolation at position q·(N−1) (docs/scoring.md, "Statistics"). It
// returns NaN for an empty sample.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	pos := q * float64(n-1)
	i := int(math.Floor(pos))
	if i >= n-1 {
		return sorted[n-1]
	}
	if i < 0 {
		return sorted[0]
	}
	f := pos - float64(i)
	if f == 0 {
		return sorted[i]
	}
	return sorted[i] + f*(sorted[i+1]-sorted[i])
}

// Median returns the middle value of sorted, the mean of the two middle
// values for an even N. It returns NaN for an empty sample.
func Median(sorted []float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case n%2 == 1:
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Mean returns the mean of x summed in order, and the standard error of
// the mean sd/√N (sd with N−1), nil for N ≤ 10.
func Mean(x []float64) (mean float64, se *float64) {
	n := float64(len(x))
	var s float64
	for _, v := range x {
		s += v
	}
	mean = s / n
	if len(x) >= minSE {
		var ss float64
		for _, v := range x {
			d := v - mean
			ss += d * d
		}
		e := math.Sqrt(ss / (n * (n - 1)))
		se = &e
	}
	return mean, se
}

// Paired returns the mean of the paired differences b[t] − a[t] and its
// standard error sqrt(Σ(d − d̄)²/(N(N−1))), nil for N ≤ 10.
func Paired(a, b []float64) (mean float64, se *float64, err error) {
	if len(a) != len(b) {
		return 0, nil, errors.New("score: paired samples of different lengths")
	}
	if len(a) == 0 {
		return 0, nil, ErrNoTokens
	}
	d := make([]float64, len(a))
	for t := range a {
		d[t] = b[t] - a[t]
	}
	mean, se = Mean(d)
	return mean, se, nil
}

// Summarize computes the aggregates of docs/scoring.md, "Statistics" over
// the tokens of one variant on one corpus (or pooled).
func Summarize(toks []Token) (evidence.Stats, error) {
	n := len(toks)
	if n == 0 {
		return evidence.Stats{}, ErrNoTokens
	}
	nllR := make([]float64, n)
	nllC := make([]float64, n)
	kl := make([]float64, n)
	var same int
	var dp2 float64
	for t, k := range toks {
		nllR[t], nllC[t], kl[t] = k.NLLRef, k.NLLCand, k.KL
		if k.Same {
			same++
		}
		dp2 += k.DP * k.DP
	}
	meanR, _ := Mean(nllR)
	meanC, _ := Mean(nllC)
	dbar, seD, _ := Paired(nllR, nllC)
	st := evidence.Stats{
		Tokens:  n,
		PPLRef:  evidence.Float(math.Exp(meanR)),
		PPLCand: evidence.Float(math.Exp(meanC)),
		LnRatio: evidence.Float(dbar),
		DPPLPct: evidence.Float(100 * (math.Exp(dbar) - 1)),
		RMSDP:   evidence.Float(math.Sqrt(dp2 / float64(n))),
	}
	if seD != nil {
		st.LnRatioSE = evidence.Ptr(*seD)
		st.DPPLPctSE = evidence.Ptr(100 * math.Exp(dbar) * *seD)
	}
	top1 := float64(same) / float64(n)
	st.Top1 = evidence.Float(top1)
	if n >= minSE {
		st.Top1SE = evidence.Ptr(math.Sqrt(top1 * (1 - top1) / float64(n-1)))
	}
	klMean, klSE := Mean(kl)
	st.KLMean = evidence.Float(klMean)
	if klSE != nil {
		st.KLMeanSE = evidence.Ptr(*klSE)
	}
	slices.Sort(kl)
	st.KLMedian = evidence.Float(Median(kl))
	st.KLP90 = evidence.Float(Quantile(kl, 0.90))
	st.KLP99 = evidence.Float(Quantile(kl, 0.99))
	st.KLP999 = evidence.Float(Quantile(kl, 0.999))
	st.KLMin = evidence.Float(kl[0])
	st.KLMax = evidence.Float(kl[n-1])
	return st, nil
}

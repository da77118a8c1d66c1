package sample

import "math"

// Ln is the natural logarithm, written in plain Go so that every platform
// computes the same bits: math.Log is assembly on amd64 and Go elsewhere,
// and the Go compiler may fuse a·b+c into an FMA on arm64, ppc64 and
// s390x. Every product below is therefore rounded explicitly with
// float64(·) before it is added, which forbids fusion
// (docs/serving.md §4).
//
// Accuracy: x = m·2^e with m ∈ [√½, √2), s = (m−1)/(m+1), |s| ≤ 0.1716,
// ln m = 2·atanh(s) = 2(s + s³/3 + s⁵/5 + …); eleven terms leave a
// truncation error below 2^-53 relative.
func Ln(x float64) float64 {
	switch {
	case math.IsNaN(x) || x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return x
	}
	m, e := math.Frexp(x) // m ∈ [0.5, 1)
	if m < math.Sqrt2/2 {
		m *= 2
		e--
	}
	s := (m - 1) / (m + 1)
	s2 := float64(s * s)
	// Horner from the highest term; each step rounds its product.
	sum := 1.0 / 21
	for k := 19; k >= 1; k -= 2 {
		sum = float64(sum*s2) + 1.0/float64(k)
	}
	lnm := float64(2*s) * sum
	const ln2Hi = 6.93147180369123816490e-01 // ln 2 split so e·ln2Hi is exact
	const ln2Lo = 1.90821492927058770002e-10
	fe := float64(e)
	return float64(fe*ln2Hi) + (lnm + float64(fe*ln2Lo))
}

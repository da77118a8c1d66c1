package score

import "math"

// LogSoftmax writes lp[v] = z[v] − logsumexp(z) for every v, in float64, and
// returns logsumexp(z). With m = max z, it computes (z[v] − m) − log Σ
// exp(z[u] − m), the sum running in id order. lp
// must be as long as z. A non-finite logit makes the result NaN or ±Inf;
// callers check the returned value.
func LogSoftmax(lp []float64, z []float32) float64 {
	lp = lp[:len(z)]
	m := math.Inf(-1)
	for _, x := range z {
		if v := float64(x); v > m || v != v {
			m = v
		}
	}
	if math.IsInf(m, 0) || math.IsNaN(m) {
		return math.NaN()
	}
	var sum float64
	for _, x := range z {
		sum += math.Exp(float64(x) - m)
	}
	// (z − max) − log Σ rather than z − (max + log Σ): the same value,
	// without losing the low bits of z − max when the logits are large.
	ls := math.Log(sum)
	for v, x := range z {
		lp[v] = (float64(x) - m) - ls
	}
	return m + ls
}

// LogSumExp returns log Σ exp(x[v]) with max subtraction, summed in index
// order.
func LogSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		if v > m || v != v {
			m = v
		}
	}
	if math.IsInf(m, 0) || math.IsNaN(m) {
		return math.NaN()
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(v - m)
	}
	return m + math.Log(sum)
}

// Argmax returns the index of the largest value, the lowest index among
// ties (docs/scoring.md, "Per-token quantities").
func Argmax(z []float32) int {
	best := 0
	for v := 1; v < len(z); v++ {
		if z[v] > z[best] {
			best = v
		}
	}
	return best
}

// KL returns Σ_v p[v]·(lpR[v] − lpC[v]): KL(ref ‖ cand) given the reference
// probabilities p = exp(lpR) and both log-prob rows, summed in float64 in id
// order with no cut-off. It is not clamped at zero.
func KL(p, lpR, lpC []float64) float64 {
	lpR, lpC = lpR[:len(p)], lpC[:len(p)]
	var s float64
	for v, pv := range p {
		s += pv * (lpR[v] - lpC[v])
	}
	return s
}

// Ref is the reference side of one scored position: its full log-prob row,
// the probabilities, the target's NLL and the argmax.
type Ref struct {
	LP     []float64
	P      []float64
	NLL    float64
	Argmax int
}

// NewRef returns a Ref with rows for a vocabulary of v ids.
func NewRef(v int) *Ref {
	return &Ref{LP: make([]float64, v), P: make([]float64, v)}
}

// SetLogits fills r from the reference's row z at the position predicting
// target: logits, or (as Run passes it) the float32 log-prob row
// sample.LogProbs made of them, whose log-softmax here is a
// renormalisation in float64. It reports false if the row is not finite.
func (r *Ref) SetLogits(z []float32, target int) bool {
	lse := LogSoftmax(r.LP, z)
	if math.IsNaN(lse) || math.IsInf(lse, 0) {
		return false
	}
	r.fillP()
	r.NLL = -r.LP[target]
	r.Argmax = Argmax(z)
	return true
}

// SetStored fills r from a stored log-prob row
// (docs/scoring.md, "The reference cache"): r.LP is lp, already widened
// to float64, renormalised (lp − logsumexp(lp)); the NLL and argmax are
// the stored exact values. It reports false if the row is not finite.
func (r *Ref) SetStored(lp []float64, nll float64, argmax int) bool {
	lse := LogSumExp(lp)
	if math.IsNaN(lse) || math.IsInf(lse, 0) {
		return false
	}
	if cap(r.LP) < len(lp) {
		r.LP, r.P = make([]float64, len(lp)), make([]float64, len(lp))
	}
	r.LP, r.P = r.LP[:len(lp)], r.P[:len(lp)]
	for v, x := range lp {
		r.LP[v] = x - lse
	}
	r.fillP()
	r.NLL, r.Argmax = nll, argmax
	return true
}

func (r *Ref) fillP() {
	p := r.P[:len(r.LP)]
	for v, x := range r.LP {
		p[v] = math.Exp(x)
	}
}

// Token is what one candidate scores at one position.
type Token struct {
	NLLRef, NLLCand float64
	// KL is KL(ref ‖ cand) at this position.
	KL float64
	// DP is p_c(target) − p_r(target).
	DP float64
	// Same reports whether the argmaxes agree.
	Same bool
}

// Compare scores the candidate's row zc at a position predicting target
// against ref: logits, or (as Run passes it, and as a server returns it)
// the float32 log-prob row of sample.LogProbs. scratch receives the
// candidate's float64 log-probs and must be as long as the vocabulary. ok
// is false if the row is not finite.
func Compare(ref *Ref, zc []float32, target int, scratch []float64) (t Token, ok bool) {
	lse := LogSoftmax(scratch, zc)
	if math.IsNaN(lse) || math.IsInf(lse, 0) {
		return Token{}, false
	}
	lpC := scratch[:len(zc)]
	t.NLLRef = ref.NLL
	t.NLLCand = -lpC[target]
	t.KL = KL(ref.P, ref.LP, lpC)
	t.DP = math.Exp(lpC[target]) - math.Exp(-ref.NLL)
	t.Same = Argmax(zc) == ref.Argmax
	return t, true
}

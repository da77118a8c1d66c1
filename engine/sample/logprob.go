package sample

import "math"

// LogProbs writes the log-softmax of logits into dst (grown if too short)
// as float32 and returns it: with m = max z, dst[v] = float32((z[v] − m) −
// ln Σ exp(z[u] − m)), computed in float64 with the sum in id order. These
// are the raw log-probs of docs/serving.md §3 (before any penalty or
// filter), and the rows a server returns for prompt_logprobs.
//
// It is the one definition of a served log-prob row: the scorer turns an
// in-process candidate's logits into rows with this function too, so that
// scoring a running server and scoring the same checkpoint in process read
// bit-identical rows. A non-finite logit makes the row NaN.
func LogProbs(dst, logits []float32) []float32 {
	if cap(dst) < len(logits) {
		dst = make([]float32, len(logits))
	}
	dst = dst[:len(logits)]
	m, ls, ok := logSumExp(logits)
	if !ok {
		for v := range dst {
			dst[v] = float32(math.NaN())
		}
		return dst
	}
	for v, x := range logits {
		dst[v] = float32((float64(x) - m) - ls)
	}
	return dst
}

// LogProb returns LogProbs(nil, logits)[id], bit for bit, without forming
// the row: a token's own log-prob (what a server returns when no
// alternatives are asked for) costs the max and the exp-sum passes only.
func LogProb(logits []float32, id int) float32 {
	m, ls, ok := logSumExp(logits)
	if !ok {
		return float32(math.NaN())
	}
	return float32((float64(logits[id]) - m) - ls)
}

// logSumExp returns the max m of logits and ln Σ exp(z − m), the sum in
// id order in float64; ok is false when a logit is not finite (the row
// is then NaN).
func logSumExp(logits []float32) (m, ls float64, ok bool) {
	m = math.Inf(-1)
	for _, x := range logits {
		if v := float64(x); v > m || v != v {
			m = v
		}
	}
	if math.IsInf(m, 0) || math.IsNaN(m) {
		return 0, 0, false
	}
	var sum float64
	for _, x := range logits {
		sum += math.Exp(float64(x) - m)
	}
	return m, math.Log(sum), true
}

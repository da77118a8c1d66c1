package sample

import "math"

// LogProbs writes the log-softmax of logits into dst (grown if too short)
// as float32 and returns it: with m = max z, dst[v] = float32((z[v] − m) −
// ln Σ exp(z[u] − m)), computed in float64 with the sum in id order. These
// are the raw log-probs of serving.md §3 (before any penalty or filter),
// and the rows a server returns for prompt_logprobs.
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
	m := math.Inf(-1)
	for _, x := range logits {
		if v := float64(x); v > m || v != v {
			m = v
		}
	}
	if math.IsInf(m, 0) || math.IsNaN(m) {
		for v := range dst {
			dst[v] = float32(math.NaN())
		}
		return dst
	}
	var sum float64
	for _, x := range logits {
		sum += math.Exp(float64(x) - m)
	}
	ls := math.Log(sum)
	for v, x := range logits {
		dst[v] = float32((float64(x) - m) - ls)
	}
	return dst
}

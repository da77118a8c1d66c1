package model

import (
	"github.com/lfmq/lfmq/engine/kernels"
)

// The per-row operations of the forward pass. The arithmetic itself (norms,
// activations, RoPE, softmax, the causal conv) is engine/kernels', whose
// vector kernels each have one fixed order of operations; this file only
// arranges rows and heads. Nothing here looks at more than one token row,
// except attention, which reads its own sequence's cache in position order.

// ropeTablePositions bounds the precomputed RoPE table; positions beyond it
// are computed on the fly by kernels.RoPE with the same bits.
const ropeTablePositions = 16384

// rmsNormRows applies kernels.RMSNorm to each row of x (rows of len(w)).
func rmsNormRows(dst, x, w []float32, rows int, eps float32) {
	n := len(w)
	for r := range rows {
		kernels.RMSNorm(dst[r*n:][:n], x[r*n:][:n], w, eps)
	}
}

// addInto sets h += x element-wise (the residual connection).
func addInto(h, x []float32) {
	x = x[:len(h)]
	for i := range h {
		h[i] += x[i]
	}
}

// addBias adds b to every row of x (rows of len(b)).
func addBias(x, b []float32, rows int) {
	n := len(b)
	for r := range rows {
		row := x[r*n:][:n]
		for i, v := range b {
			row[i] += v
		}
	}
}

package model

import (
	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/engine/kernels"
)

// normTopKEps is added to the sum of the selected scores before they are
// renormalised, as HF and mlx do (docs/model.md §4.7 step 4).
const normTopKEps = 1e-6

// route selects the k experts of one token from its router logits r
// (docs/model.md §4.7): the largest sigmoid(r) + bias, ties to the lower
// id, weighted by the unbiased scores, renormalised and scaled. sel and w
// get k entries in selection order; scratch holds 2·len(r) floats.
func route(r, bias []float32, k int, norm bool, scale float32, sel []int, w []float32, scratch []float32) {
	E := len(r)
	s, b := scratch[:E], scratch[E:2*E]
	for e, x := range r {
		s[e] = kernels.Sigmoid(x)
		b[e] = s[e]
		if bias != nil {
			b[e] = s[e] + bias[e]
		}
	}
	for i := range k {
		best := -1
		for e := range E {
			if b[e] != b[e] || taken(sel[:i], e) { // NaN scores are never selected first
				continue
			}
			if best < 0 || b[e] > b[best] {
				best = e
			}
		}
		if best < 0 { // only NaN scores left: the lowest free id
			for e := 0; best < 0; e++ {
				if !taken(sel[:i], e) {
					best = e
				}
			}
		}
		sel[i], w[i] = best, s[best]
	}
	if norm {
		var sum float32
		for _, g := range w[:k] {
			sum += g
		}
		den := sum + normTopKEps
		for i := range w[:k] {
			w[i] /= den
		}
	}
	for i := range w[:k] {
		w[i] *= scale
	}
}

func taken(sel []int, e int) bool {
	for _, x := range sel {
		if x == e {
			return true
		}
	}
	return false
}

// moeBlock is the routed-expert feed-forward (docs/model.md §4.7).
// Tokens are grouped by expert so that each expert runs one batched
// product per projection; a token's output is then the sum of its
// experts' weighted outputs taken in ascending expert id, an order that
// does not depend on which other tokens share the batch. With part
// FFNInput or LinearInputs it returns after the routing, before any
// expert runs.
func (m *Model) moeBlock(l int, ly *Layer, ws *workspace, rows Rows, a, out []float32, obs Observer, part LayerPart) {
	c := m.Config
	R, H, E, K, Fe := rows.Len(), c.HiddenSize, c.NumExperts, c.NumExpertsPerTok, c.MoEIntermediateSize
	logits := ws.router[:R*E]
	if obs != nil {
		obs.Linear(l, config.LayerPrefix(l)+"feed_forward.gate.weight", rows, a)
	}
	m.pool.MatMul(ly.Gate, logits, a, R)
	sel, wts := ws.sel[:R*K], ws.wts[:R*K]
	for r := range R {
		route(logits[r*E:][:E], ly.ExpertBias, K, c.NormTopKProb, c.RoutedScalingFactor, sel[r*K:][:K], wts[r*K:][:K], ws.rScore)
	}
	if obs != nil {
		obs.Routing(l, rows, &Routing{K: K, Experts: sel, Weights: wts, Logits: logits})
	}
	if part != WholeLayer {
		return // FFNInput and LinearInputs end at the routing
	}

	// Counting sort of the (row, slot) pairs by expert, rows ascending
	// within each expert.
	start := make([]int, E+1)
	for _, e := range sel {
		start[e+1]++
	}
	for e := range E {
		start[e+1] += start[e]
	}
	fill := append([]int(nil), start[:E]...)
	pairRow := make([]int, R*K)
	pairW := make([]float32, R*K)
	for r := range R {
		for i := range K {
			e := sel[r*K+i]
			pairRow[fill[e]], pairW[fill[e]] = r, wts[r*K+i]
			fill[e]++
		}
	}
	x, y := ws.ex[:R*K*H], ws.ey[:R*K*H]
	g, u := ws.eg[:R*K*Fe], ws.eu[:R*K*Fe]
	for p, r := range pairRow {
		copy(x[p*H:][:H], a[r*H:][:H])
	}
	var active []int
	for e := range E {
		if start[e+1] > start[e] {
			active = append(active, e)
		}
	}
	run := func(pool *kernels.Pool, e int) {
		p0, n := start[e], start[e+1]-start[e]
		ex := ly.Experts[e]
		xe, ge, ue := x[p0*H:][:n*H], g[p0*Fe:][:n*Fe], u[p0*Fe:][:n*Fe]
		pool.MatMul(ex.W1, ge, xe, n)
		pool.MatMul(ex.W3, ue, xe, n)
		kernels.SwiGLU(ge, ge, ue)
		pool.MatMul(ex.W2, y[p0*H:][:n*H], ge, n)
	}
	// Enough experts to occupy every goroutine: one expert per task, each
	// product on one goroutine. Otherwise (a decode step's few experts on
	// many goroutines) every expert's w1 and w3 run as one parallel
	// region, then every w2: two waits for the layer instead of three per
	// expert, and the tile columns of all the experts to share out. The
	// kernels give the same bits either way.
	if len(active) >= m.pool.Threads() {
		m.pool.Run(len(active), func(lo, hi int) {
			for _, e := range active[lo:hi] {
				run(nil, e)
			}
		})
	} else {
		jobs := ws.mulJobs[:0]
		for _, e := range active {
			p0, n := start[e], start[e+1]-start[e]
			ex, xe := ly.Experts[e], x[p0*H:][:n*H]
			jobs = append(jobs, kernels.MulJob{M: ex.W1, Y: g[p0*Fe:][:n*Fe], X: xe, Batch: n},
				kernels.MulJob{M: ex.W3, Y: u[p0*Fe:][:n*Fe], X: xe, Batch: n})
		}
		m.pool.MatMulAll(jobs)
		jobs = jobs[:0]
		for _, e := range active {
			p0, n := start[e], start[e+1]-start[e]
			ge := g[p0*Fe:][:n*Fe]
			kernels.SwiGLU(ge, ge, u[p0*Fe:][:n*Fe])
			jobs = append(jobs, kernels.MulJob{M: ly.Experts[e].W2, Y: y[p0*H:][:n*H], X: ge, Batch: n})
		}
		m.pool.MatMulAll(jobs)
		ws.mulJobs = jobs[:0]
	}
	if obs != nil {
		for _, e := range active {
			p0, n := start[e], start[e+1]-start[e]
			obs.Expert(l, e, rows, &ExpertRows{
				Rows: pairRow[p0 : p0+n], Weights: pairW[p0 : p0+n],
				Up: x[p0*H:][:n*H], Down: g[p0*Fe:][:n*Fe],
			})
		}
	}
	out = out[:R*H]
	clear(out)
	for _, e := range active { // ascending expert id
		for p := start[e]; p < start[e+1]; p++ {
			kernels.Axpy(pairW[p], y[p*H:][:H], out[pairRow[p]*H:][:H])
		}
	}
}

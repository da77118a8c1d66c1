package model

import (
	"sync"

	"github.com/lfmq/lfmq/engine/kernels"
)

// attnTiles selects the tile kernels (kernels.AttnScores16 and its kin)
// for the row tiles of a prompt chunk, where they run on SIMD
// (kernels.TileFast); elsewhere each row runs reduceBlock, whose one-query
// kernels are faster there than the tile kernels' Go references. Both give
// the same bits: the tile path runs, for every (row, query head), the
// sequence of operations reduceBlock does, only side by side. Tests set it
// to run either.
var attnTiles = kernels.TileFast()

// tileScratch is one worker's buffers for the tile path: for a tile of up
// to attnWideRows rows of G query heads (the queries of one KV head, query
// i·G+g being row i's head g), the packed queries, the running and the
// split states in columns (m, l [queries], acc [queries·d]), and one
// block's scores, key-major with a row of query columns per key.
type tileScratch struct {
	G, d         int
	qp           []float32 // packed queries, kernels.PackQuery16's layout per 16
	total, split tileState
	sc           []float32 // attnBlock rows of up to roundUp16(attnWideRows·G)
	mx, mn, al   []float32 // per column: block maximum, new maximum, α
	sum          []float32 // per column: the block's Σ e_j
	states, sps  []attnState
}

// tileState is the (M, L, acc) of a tile's queries, column by column.
type tileState struct {
	m, l, acc []float32
}

func roundUp16(n int) int { return (n + 15) &^ 15 }

// roundUp64 pads a column count to ExpShift's SIMD step.
func roundUp64(n int) int { return (n + 63) &^ 63 }

// tileScratches keeps tileScratch buffers (about 330 KB for LFM2-8B-A1B's
// shapes) between attention calls instead of allocating them per call.
var tileScratches sync.Pool

// getTileScratch returns a tileScratch for G query heads of d values,
// from tileScratches when one of that shape is there.
func getTileScratch(G, d int) *tileScratch {
	if t, ok := tileScratches.Get().(*tileScratch); ok && t.G == G && t.d == d {
		return t
	}
	return newTileScratch(G, d)
}

func newTileScratch(G, d int) *tileScratch {
	nq := roundUp16(attnWideRows * G)
	newState := func() tileState {
		return tileState{m: make([]float32, nq), l: make([]float32, nq), acc: make([]float32, nq*d)}
	}
	return &tileScratch{
		G: G, d: d,
		qp:     make([]float32, nq*d),
		total:  newState(),
		split:  newState(),
		sc:     make([]float32, attnBlock*nq),
		mx:     make([]float32, nq),
		mn:     make([]float32, nq),
		al:     make([]float32, roundUp64(nq)),
		sum:    make([]float32, nq),
		states: make([]attnState, attnWideRows),
		sps:    make([]attnState, attnWideRows),
	}
}

// row returns row i's G queries of st as an attnState.
func (t *tileScratch) row(st tileState, i int) attnState {
	G, d := t.G, t.d
	return attnState{m: st.m[i*G:][:G], l: st.l[i*G:][:G], acc: st.acc[i*G*d:][:G*d]}
}

// run is attention for a tile of rows rows (rows ≤ attnWideRows) at
// positions pos0, pos0+1, … over the cache kv of one KV head, in a layer
// of window w (0: none): row i's G queries at q[i·qStride:][:G·d], its
// output at o[i·qStride:][:G·d]. It runs the loop of attend's tile path,
// split by split and block by block, each block's keys and values decoded
// once into kb, vb (compact formats), with all the tile's rows that reach
// a block stepping through it at once.
func (t *tileScratch) run(kv attnKV, q []float32, qStride, rows, pos0, w int, scale float32, kb, vb, o []float32) {
	G, d := t.G, t.d
	// Pack the queries. The last group of 16 is padded with whatever an
	// earlier tile left there: those columns' scores are computed, their
	// softmax steps run (a NaN among them stays in its own column), and
	// nothing reads them.
	for i := range rows {
		for g := range G {
			qi := i*G + g
			kernels.PackQuery16(t.qp[qi&^15*d:], qi&15, q[i*qStride+g*d:][:d])
		}
	}
	for i := range rows {
		t.states[i] = t.row(t.total, i)
		t.states[i].reset()
		t.sps[i] = t.row(t.split, i)
	}
	for s := firstSplit(pos0, w); s < splits(pos0+rows-1); s++ {
		lo := s * attnSplit
		first := max(0, lo-pos0)                      // the first row that reaches the split
		last := seeBelow(pos0, rows, lo+attnSplit, w) // the rows after it start their window past it
		for i := first; i < last; i++ {
			t.sps[i].reset()
		}
		hi := min(lo+attnSplit, pos0+rows)
		b := max(lo, winStart(pos0+first, w)/attnBlock*attnBlock) // no row reads a block before it
		for b0 := b; b0 < hi; b0 += attnBlock {
			cntMax := min(attnBlock, hi-b0)
			iLo, iHi := max(first, b0-pos0), seeBelow(pos0, last, b0+cntMax, w)
			if iLo >= iHi {
				continue
			}
			keys, ks, vals, vs := kv.block(b0, cntMax, kb, vb)
			t.block(keys, ks, vals, vs, cntMax, iLo, iHi, pos0-b0, w, scale)
		}
		for i := first; i < last; i++ {
			mergeSplit(t.states[i], t.sps[i])
		}
	}
	for i := range rows {
		t.states[i].finish(o[i*qStride:][:G*d])
	}
}

// block is one online-softmax step of the split states for rows [iLo,
// rows) over the cntMax keys and values of a block, row i taking the
// block's positions from its window's start (w; the block's first without
// a window) to its own, the first min(cntMax, rel+i+1) (rel: the tile's
// first position less the block's). Per query it computes what reduceBlock
// does: the scores (Dot's bits times scale), M' = max(M, the block's
// maximum), α (1 unless the maximum moved or is infinite), e_j = Exp(s_j −
// M'), L = fl(L·α) + Σ e_j in j order from +0, acc = fl(acc·α) (skipped
// for α = 1) and then fma(e_j, v_j, acc) in j order. A row's keys past its
// own position or before its window get the score −Inf: the maximum
// ignores them, their e is +0, which leaves every sum's bits alone (a sum
// from +0 stays +0 until its first key), and the values loop runs over the
// row's own keys only.
func (t *tileScratch) block(keys []float32, ks int, vals []float32, vs, cntMax, iLo, rows, rel, w int, scale float32) {
	G, d := t.G, t.d
	q0 := iLo * G
	qStart := q0 &^ 15 // columns start at a group of 16 queries
	cols := roundUp16(rows*G - qStart)
	sc := t.sc[:cntMax*cols]
	for c := 0; c < cols; c += 16 {
		kernels.AttnScores16(sc[c:], cols, keys, ks, cntMax, t.qp[(qStart+c)*d:], d, scale)
	}
	// The rows whose own position falls inside the block, and those whose
	// window starts inside it.
	for i := iLo; i < rows; i++ {
		cnt, off := min(cntMax, rel+i+1), t.winOff(rel, i, w)
		for j := range cntMax {
			if j >= off && j < cnt {
				continue
			}
			row := sc[j*cols+i*G-qStart:][:G]
			for g := range row {
				row[g] = negInf
			}
		}
	}
	mx, mn, al, sum := t.mx[:cols], t.mn[:cols], t.al[:roundUp64(cols)], t.sum[:cols]
	kernels.ColMax(mx, sc, cols, cntMax)
	sm := t.split.m
	copy(mn, mx) // columns of no query or of rows before iLo: never read
	clear(al)
	for qi := q0; qi < rows*G; qi++ {
		c := qi - qStart
		M0 := sm[qi]
		M := max(M0, mx[c])
		al[c] = M0 - M
		sm[qi], mn[c] = M, M
	}
	// α = Exp(M − M'), all columns at once: where the maximum did not move
	// (and is finite) M − M' is +0 and α exactly 1, reduceBlock's skip.
	kernels.ExpShift(al, al, 0)
	kernels.SubCols(sc, cols, cntMax, mn)
	kernels.ExpShift(sc, sc, 0)
	kernels.ColSum(sum, sc, cols, cntMax)
	sl := t.split.l
	for qi := q0; qi < rows*G; qi++ {
		c := qi - qStart
		sl[qi] = float32(sl[qi]*al[c]) + sum[c]
	}
	for i := iLo; i < rows; i++ {
		c := i*G - qStart
		off := t.winOff(rel, i, w)
		kernels.AccumRowsN(t.split.acc[i*G*d:][:G*d], G, al[c:c+G], sc[c+off*cols:], cols, vals[off*vs:], vs, min(cntMax, rel+i+1)-off)
	}
}

// winOff returns the first of a block's positions row i reads in a layer
// of window w: its window's start less the block's, or 0 (rel: the tile's
// first position less the block's).
func (t *tileScratch) winOff(rel, i, w int) int {
	if w <= 0 {
		return 0
	}
	return max(0, rel+i-w+1)
}

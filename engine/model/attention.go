package model

import (
	"math"
	"sync"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
)

// Attention over a sequence's KV cache (docs/model.md §4.5 step 4) in an
// order fixed by absolute positions alone, so that a row's output has the
// same bits whatever the batch, the chunking of the prompt and the thread
// count, while the work is shared out as each case needs:
//
//   - The keys of a query at position p (positions 0..p) fall into blocks
//     of attnBlock positions starting at multiples of attnBlock, and the
//     blocks into splits of attnSplit positions starting at multiples of
//     attnSplit; the last block and split end at p.
//   - A split is reduced by an online softmax over its blocks in order,
//     from (M, L, acc) = (−Inf, 0, 0): with s_j = (q·k_j)·scale, m the
//     block's maximum, M' = max(M, m), α = Exp(M − M'), e_j = Exp(s_j −
//     M'), L = fl(L·α) + Σ e_j (plain additions in j order from 0), acc =
//     fl(acc·α) and then acc = fma(e_j, v_j, acc) in j order, M = M'.
//   - The splits' results are merged in order into (−Inf, 0, 0): M' =
//     max(M, M_s), a = Exp(M − M'), b = Exp(M_s − M'), L = fl(L·a) +
//     fl(L_s·b), acc = fma(b, acc_s, fl(acc·a)).
//   - The output is acc / L.
//
// A sliding-window layer (LFM3's sliding_attention, window W) gives a query
// at p the keys from winStart(p) = max(0, p−W+1) to p instead: the blocks
// and splits stay on the same grid, the first block and split a query reads
// starting at winStart(p) instead of at their grid start, and the splits
// and blocks wholly before it are not read. Which keys a row reads, and in
// what order, still depends on its position alone.
//
// Exp(0) is exactly 1, so a factor of 1 may be skipped without changing a
// bit; the device kernels (attn_block_max, attn_split_out) compute the same
// sequence of operations. Each KV head's keys and values are read once for
// all the query heads of its group. A decode row (a short segment) shares
// its splits out over the threads and merges them afterwards; a prompt
// chunk's rows are long enough work on their own, taken in tiles of rows
// that read each split's keys while they are in cache. Where the tile
// kernels run on SIMD (attnTiles, attntile.go), a tile steps each block
// through all its (row, head) queries at once, each query still performing
// the operations above in their order.
const (
	// attnBlock is the online softmax's step: the positions whose maximum
	// is taken before their exponentials. It is a KV page, so that no
	// block crosses one.
	attnBlock = kv.PageTokens
	// attnSplit is the positions one task of a decode row reduces.
	attnSplit = 1024
	// attnShortRows is the most rows a segment may have to be shared out
	// by splits (decode, speculation's verification); longer ones run by
	// row tiles.
	attnShortRows = 8
	// attnTileRows is the rows of a prompt chunk one task takes.
	attnTileRows = 16
	// attnWideRows is the most rows a task takes on the tile kernels
	// (attnTiles), which step a block through all of them at once: the
	// more rows, the fewer times each block is read and decoded.
	attnWideRows = 64
)

// attnState is the (M, L, acc) of G query heads: m and l [G], acc [G·d].
type attnState struct {
	m, l, acc []float32
}

// newAttnState returns a state of G heads of d values over buf, which must
// hold G·(d+2) floats, reset to (−Inf, 0, 0).
func newAttnState(buf []float32, G, d int) attnState {
	s := attnState{m: buf[:G], l: buf[G : 2*G], acc: buf[2*G : 2*G+G*d]}
	s.reset()
	return s
}

func (s attnState) reset() {
	for g := range s.m {
		s.m[g] = negInf
	}
	clear(s.l)
	clear(s.acc)
}

var negInf = float32(math.Inf(-1))

// attnKV is one sequence's cache of one layer as attention reads it: the
// keys and values of one KV head, d values at offset off of rows of kvd,
// in format dt, in layer l of the sequence's pages (a block of attnBlock
// positions is one page).
type attnKV struct {
	dt             kv.DType
	pages          []*kv.Page
	l, kvd, off, d int
}

// block returns cnt positions from b0 (within one block) of a's keys and
// values as float32 rows ks and vs floats apart, decoded into kb and vb
// (attnBlock·d floats each) from a compact format, or read in place.
func (a attnKV) block(b0, cnt int, kb, vb []float32) (keys []float32, ks int, vals []float32, vs int) {
	pg := a.pages[b0/attnBlock]
	keys, ks = pg.K(a.l).Block(a.dt, a.kvd, a.off, a.d, b0%attnBlock, cnt, kb)
	vals, vs = pg.V(a.l).Block(a.dt, a.kvd, a.off, a.d, b0%attnBlock, cnt, vb)
	return keys, ks, vals, vs
}

// rowsBF16 returns the bfloat16 key and value rows of the block holding
// position b0 in place in its page, kvd elements apart, from b0 on; a's
// format is kv.BF16.
func (a attnKV) rowsBF16(b0 int) (keys, vals []uint16) {
	pg := a.pages[b0/attnBlock]
	o := b0 % attnBlock * a.kvd
	return pg.K(a.l).BF16()[o:], pg.V(a.l).BF16()[o:]
}

// winStart returns the first position a query at pos reads in a layer of
// window w: 0 when w is 0 (every earlier position), else the start of the
// last w positions, its own included.
func winStart(pos, w int) int {
	if w <= 0 {
		return 0
	}
	return max(0, pos-w+1)
}

// firstSplit returns the split holding winStart(pos, w).
func firstSplit(pos, w int) int { return winStart(pos, w) / attnSplit }

// blockEnd returns the end of the block holding position b0, cut at hi.
func blockEnd(b0, hi int) int { return min(b0-b0%attnBlock+attnBlock, hi) }

// seeBelow returns how many of the rows at positions pos0, pos0+1, …,
// pos0+rows−1 read some position below end (> 0) in a layer of window w:
// a prefix of them, since a later row's window starts later.
func seeBelow(pos0, rows, end, w int) int {
	if w <= 0 {
		return rows
	}
	return min(rows, max(0, end+w-1-pos0))
}

// reduceBlock is one step of the online softmax: it adds to s the cnt keys
// and values of one block, float32 rows ks and vs floats apart (as
// kv.Rows.Block returns them), for the G query heads q [G·d]. sc holds
// G·(attnBlock+1) floats of scratch: the scores, then the heads' factors α.
// next, for rows read in place from a page (nil otherwise), is the keys the
// caller reads after these, rows ks apart: the score kernel fetches them
// from memory, and this block's values, while it runs.
func reduceBlock(s attnState, q, keys []float32, ks int, vals []float32, vs, cnt int, scale float32, sc []float32, next []float32) {
	G := len(s.m)
	d := len(q) / G
	var pfVals []float32
	if next != nil && vs == ks {
		pfVals = vals
	}
	g := 0
	for ; g+4 <= G; g += 4 {
		kernels.AttnScores4(sc[g*attnBlock:], attnBlock, keys, ks, cnt, q[g*d:][:4*d], scale, next, pfVals)
		next, pfVals = nil, nil // fetched by the first four heads' scores
	}
	for ; g < G; g++ {
		for j := range cnt {
			sc[g*attnBlock+j] = kernels.Dot(q[g*d:][:d], keys[j*ks:][:d]) * scale
		}
	}
	alpha := softmaxBlock(s, sc, cnt)
	g = 0
	for ; g+4 <= G; g += 4 {
		kernels.AccumRows4(s.acc[g*d:][:4*d], (*[4]float32)(alpha[g:]), sc[g*attnBlock:], attnBlock, vals, vs, cnt)
	}
	for ; g < G; g++ {
		acc := s.acc[g*d:][:d]
		if alpha[g] != 1 {
			kernels.Scale(alpha[g], acc)
		}
		kernels.AccumRows(acc, sc[g*attnBlock:][:cnt], vals, vs)
	}
}

// rowKernels are what splitRows runs on key and value rows of T: rows
// gives a block's rows of every head from a splitSource, scores and accum
// are the score and weighted-sum kernels. T is uint16 for a bfloat16 cache
// read in place, whose kernels widen each value in a register (exact), or
// float32.
type rowKernels[T uint16 | float32] struct {
	rows   func(s *splitSource, b0, cnt int) (keys, vals []T, stride int)
	scores func(sc []float32, scStride int, keys []T, keyStride, cnt int, q []float32, scale float32, next, vals []T)
	accum  func(acc []float32, alpha *[4]float32, p []float32, pRow int, v []T, vStride, cnt int, next []T)
}

var (
	bf16RowKernels = rowKernels[uint16]{bf16PageRows, kernels.AttnScores4BF16Rows, kernels.AccumRows4BF16Rows}
	f32RowKernels  = rowKernels[float32]{f32BlockRows, kernels.AttnScores4Rows, kernels.AccumRows4Rows}
)

// splitSource is where splitRows reads a block's key and value rows of
// every head: a cache's pages (kv covers every head's slice of each row),
// read in place (k and v nil), or a compact format's rows decoded into k
// and v, which the next block's call overwrites.
type splitSource struct {
	kv   attnKV
	k, v []float32
}

// bf16PageRows returns a bfloat16 cache's key and value rows where they
// lie, from b0 on in b0's block.
func bf16PageRows(s *splitSource, b0, _ int) ([]uint16, []uint16, int) {
	k, v := s.kv.rowsBF16(b0)
	return k, v, s.kv.kvd
}

// f32BlockRows returns the key and value rows of the cnt positions from b0
// (within one block) as float32: in place, or decoded into s.k and s.v.
func f32BlockRows(s *splitSource, b0, cnt int) ([]float32, []float32, int) {
	k, ks, v, vs := s.kv.block(b0, cnt, s.k, s.v)
	if ks != vs {
		panic("model: splitRows: key and value rows of different strides")
	}
	return k, v, ks
}

// splitRows runs one decode row's split over positions [lo, hi), for the
// Hkv·G query heads of q [Hkv·G·d], into the Hkv heads' states, stateN =
// G·(d+2) floats apart in part, which the caller has reset; G is a
// multiple of 4. ss.src gives each block's key and value rows of every
// head: read in place from the cache, or decoded from a compact format
// into a buffer the next block's reuses (ss.src.k set). lo may fall inside
// a block (a sliding window's start): the first block is then read from
// lo.
//
// Block by block it takes the online softmax step reduceBlock does for
// each query head, with the bits of its operations, but all the row's
// query heads at once, as the prompt tiles do (tileScratch.block): the
// kernels write a block's scores a row per key with every query head side
// by side, so that the maximum, the exponentials and their sums run down
// the columns of all of them in a few vector passes, not a scalar chain of
// additions and a call of each kernel per head. Rows read in place are
// fetched attnPrefetchHeads heads' work ahead, since a head's slice is a
// strided part of every row, which the hardware prefetchers follow
// poorly: each KV head's scores fetch the keys of the head that many on,
// each head's weighted sums its values (the next block's heads past the
// last). Spread so, the block's reads overlap all of its arithmetic, not
// the scores' alone.
func splitRows[T uint16 | float32](k rowKernels[T], lo, hi, Hkv, G, d int, q, part []float32, scale float32, ss *splitScratch) {
	stateN, cols := G*(d+2), Hkv*G
	src := &ss.src
	inPlace := src.k == nil
	m, l := ss.m[:cols], ss.l[:cols]
	for c := range m {
		m[c], l[c] = negInf, 0
	}
	clear(ss.al[:roundUp64(cols)]) // the padding's Exp(+0) = 1 is computed and never read
	for b0, be := lo, 0; b0 < hi; b0 = be {
		be = blockEnd(b0, hi)
		cnt := be - b0
		keys, vals, ks := k.rows(src, b0, cnt)
		var nextKeys, nextVals []T
		if inPlace && be < hi {
			nextKeys, nextVals, _ = k.rows(src, be, min(attnBlock, hi-be))
		}
		sc := ss.sc[:cnt*cols]
		for h := range Hkv {
			// The kernels fetch the first 64 values of each row of
			// their two streams: the keys ahead, and their second 64
			// where a head is wider.
			var next, next2 []T
			if inPlace {
				next = aheadRows(keys, nextKeys, h+attnPrefetchHeads, Hkv, d)
				if next != nil && d > 64 {
					next2 = next[64:]
				}
			}
			for g := 0; g < G; g += 4 {
				k.scores(sc[h*G+g:], cols, keys[h*d:], ks, cnt, q[(h*G+g)*d:][:4*d], scale, next, next2)
				next, next2 = nil, nil // fetched by the first four heads' scores
			}
		}
		ss.softmax(sc, cols, cnt)
		for h := range Hkv {
			acc := part[h*stateN+2*G:][:G*d]
			for g := 0; g < G; g += 4 {
				var next []T // values attnPrefetchHeads heads' work ahead
				if inPlace && g == 0 {
					next = aheadRows(vals, nextVals, h+attnPrefetchHeads, Hkv, d)
				}
				k.accum(acc[g*d:][:4*d], (*[4]float32)(ss.al[h*G+g:]), sc[h*G+g:], cols, vals[h*d:], ks, cnt, next)
			}
		}
	}
	for h := range Hkv {
		copy(part[h*stateN:][:G], m[h*G:][:G])
		copy(part[h*stateN+G:][:G], l[h*G:][:G])
	}
}

// attnPrefetchHeads is how many KV heads ahead of the one it reads
// splitRows prefetches a cache's rows. One head of 64 or 128 values is 1.3
// µs of work at most a block. At 131,072 positions LFM3-1.7B's decode step
// ran about 10 % faster with the rows fetched two heads ahead than one
// (three alternating pairs, and BenchmarkAttendDecode's heads of 128 the
// same way). At 16,384 the decode pairs split; BenchmarkAttendDecode,
// whose one layer's 32 MiB cache partly stays in the L3 from one
// iteration to the next, measured two heads ahead 5–15 % slower in one
// set of runs and even in another (docs/lfm3.md).
const attnPrefetchHeads = 2

// aheadRows returns head t's slice of a block's rows: of rows (the block
// read now) for t < Hkv, of next (the next block's, nil after the last)
// for the heads past the last, or nil past both. The slice runs to the
// rows' end, the length the kernels' prefetch of cnt rows needs.
func aheadRows[T uint16 | float32](rows, next []T, t, Hkv, d int) []T {
	switch {
	case t < Hkv:
		return rows[t*d:]
	case next != nil && t < 2*Hkv:
		return next[(t-Hkv)*d:]
	}
	return nil
}

// softmax is the middle of splitRows' online softmax step for the cnt rows
// of cols scores in sc: M' = max(M, the block's maximum) and α = Exp(M −
// M') per column (where the maximum did not move, and is finite, M − M' is
// +0 and α exactly 1, reduceBlock's skip), e_j = Exp(s_j − M') in place,
// the difference rounded first, and L = fl(L·α) + Σ e_j in j order from +0.
// α is left in ss.al.
func (ss *splitScratch) softmax(sc []float32, cols, cnt int) {
	m, l, mx, al, sum := ss.m[:cols], ss.l[:cols], ss.mx[:cols], ss.al[:roundUp64(cols)], ss.sum[:cols]
	kernels.ColMax(mx, sc, cols, cnt)
	for c, M0 := range m {
		M := max(M0, mx[c])
		al[c], m[c], mx[c] = M0-M, M, M
	}
	kernels.ExpShift(al, al, 0)
	kernels.SubCols(sc, cols, cnt, mx)
	kernels.ExpShift(sc, sc, 0)
	kernels.ColSum(sum, sc, cols, cnt)
	for c := range l {
		l[c] = float32(l[c]*al[c]) + sum[c]
	}
}

// splitScratch is one worker's buffers for splitRows, for up to its
// number of query heads: where the split's rows come from, a block's
// scores a row per key, and per query head the split's running M and L,
// the block's maximum (then M'), α (padded to ExpShift's SIMD step) and
// Σ e_j.
type splitScratch struct {
	src                   splitSource
	sc, m, l, mx, al, sum []float32
}

// splitScratches recycles splitScratch between attend calls (8 KiB of
// scores for LFM2-8B-A1B's 32 query heads).
var splitScratches sync.Pool

// getSplitScratch returns a splitScratch for cols query heads.
func getSplitScratch(cols int) *splitScratch {
	if ss, ok := splitScratches.Get().(*splitScratch); ok && len(ss.m) >= cols {
		return ss
	}
	return &splitScratch{
		sc: make([]float32, attnBlock*cols),
		m:  make([]float32, cols), l: make([]float32, cols), mx: make([]float32, cols),
		al: make([]float32, roundUp64(cols)), sum: make([]float32, cols),
	}
}

// softmaxBlock is the middle of an online softmax step: given the block's
// scores of each head g in sc[g·attnBlock:][:cnt], it moves each head's
// running maximum M to M', turns the scores into their exponentials
// Exp(s_j − M') in place, adds their sum to L after rescaling it, and
// returns the heads' factors α = Exp(M − M') (in sc after the scores), by
// which the caller rescales acc before adding the block's values.
func softmaxBlock(s attnState, sc []float32, cnt int) []float32 {
	G := len(s.m)
	// The block's maximum (kernels.Max: a zero's sign, which it leaves
	// open, never matters, since the maximum is only subtracted before
	// Exp), the shifted exponentials, and their sums, each a chain of
	// plain additions in j order: four heads' chains run side by side.
	alpha := sc[G*attnBlock:][:G]
	for g := range G {
		e := sc[g*attnBlock:][:cnt]
		M := max(s.m[g], kernels.Max(e))
		// Exp(0) is exactly 1: a maximum that did not move, most
		// blocks' case deep in a context, skips the exponential.
		alpha[g] = 1
		if M != s.m[g] || math.IsInf(float64(M), 0) {
			alpha[g] = kernels.Exp(s.m[g] - M)
		}
		kernels.ExpShift(e, e, M)
		s.m[g] = M
	}
	g := 0
	for ; g+4 <= G; g += 4 {
		e0, e1, e2, e3 := sc[g*attnBlock:][:cnt], sc[(g+1)*attnBlock:][:cnt], sc[(g+2)*attnBlock:][:cnt], sc[(g+3)*attnBlock:][:cnt]
		var t0, t1, t2, t3 float32
		for j := range cnt {
			t0 += e0[j]
			t1 += e1[j]
			t2 += e2[j]
			t3 += e3[j]
		}
		s.l[g] = float32(s.l[g]*alpha[g]) + t0
		s.l[g+1] = float32(s.l[g+1]*alpha[g+1]) + t1
		s.l[g+2] = float32(s.l[g+2]*alpha[g+2]) + t2
		s.l[g+3] = float32(s.l[g+3]*alpha[g+3]) + t3
	}
	for ; g < G; g++ {
		var t float32
		for _, v := range sc[g*attnBlock:][:cnt] {
			t += v
		}
		s.l[g] = float32(s.l[g]*alpha[g]) + t
	}
	return alpha
}

// mergeSplit merges a split's result p into the running state s.
func mergeSplit(s, p attnState) {
	G := len(s.m)
	d := len(s.acc) / G
	for g := range G {
		M := max(s.m[g], p.m[g])
		a, b := kernels.Exp(s.m[g]-M), kernels.Exp(p.m[g]-M)
		s.l[g] = float32(s.l[g]*a) + float32(p.l[g]*b)
		acc := s.acc[g*d:][:d]
		if a != 1 {
			kernels.Scale(a, acc)
		}
		kernels.Axpy(b, p.acc[g*d:][:d], acc)
		s.m[g] = M
	}
}

// finish writes acc / L of each head to o [G·d].
func (s attnState) finish(o []float32) {
	G := len(s.m)
	d := len(s.acc) / G
	for g := range G {
		l := s.l[g]
		for i, v := range s.acc[g*d : (g+1)*d] {
			o[g*d+i] = v / l
		}
	}
}

// splits returns the number of splits of a query at position pos.
func splits(pos int) int { return pos/attnSplit + 1 }

// attnTask is one unit of attention work: rows [r0, r1) of a segment (step
// rows) and one KV head, every split of each row, merged and written to the
// output (split −1); or, for a short segment's row, one split of every KV
// head (split ≥ 0, kvh −1), the heads' states written in order from part.
// A split task reads the split's key and value rows whole, every head's
// slice of them block by block, rather than one head's slice of each row
// across the split: the same bytes, in one sweep of contiguous memory.
type attnTask struct {
	seg, r0, r1, kvh, split int
	part                    int // offset of the split's states in the parts buffer
}

// attnMerge is one (row, KV head) of a short segment whose splits ran as
// separate tasks: its n split states lie stride floats apart from part.
type attnMerge struct {
	r0, kvh, n, part, stride int
}

// attend runs attention for the rows of segs: q [R, Hq·d] in, o [R, Hq·d]
// out, each segment's cache already holding its new keys and values. A
// sliding layer's rows read their window only (Config.LayerWindow).
func (m *Model) attend(ws *workspace, l int, segs []Segment, q, o []float32) {
	c := m.Config
	W := c.LayerWindow(l)
	d, Hq, Hkv := c.HeadDim, c.NumHeads, c.NumKVHeads
	G := c.KVGroup()
	qd, kvd := Hq*d, Hkv*d
	stateN := G * (d + 2)
	tiles := attnTiles && d%16 == 0
	splitRowsFast := G%4 == 0 && attnSplitRows(d)
	bf16InPlace := m.kvDType == kv.BF16 && attnBF16InPlace(d)
	tasks := ws.attnTasks[:0]
	var merges []attnMerge
	parts := 0
	for si, sg := range segs {
		n := len(sg.Toks)
		if n <= attnShortRows {
			for t := range n {
				r := sg.Row0 + t
				s0, s1 := firstSplit(sg.Start+t, W), splits(sg.Start+t)
				ns := s1 - s0
				if ns == 1 {
					// One split: nothing to share out or merge later.
					for h := range Hkv {
						tasks = append(tasks, attnTask{seg: si, r0: r, r1: r + 1, kvh: h, split: -1})
					}
					continue
				}
				for h := range Hkv {
					merges = append(merges, attnMerge{r0: r, kvh: h, n: ns, part: parts + h*stateN, stride: Hkv * stateN})
				}
				for sp := s0; sp < s1; sp++ {
					tasks = append(tasks, attnTask{seg: si, r0: r, r1: r + 1, kvh: -1, split: sp, part: parts})
					parts += Hkv * stateN
				}
			}
			continue
		}
		tileRows := attnTileRows
		if tiles {
			tileRows = attnWideRows
		}
		for t0 := 0; t0 < n; t0 += tileRows {
			for h := range Hkv {
				tasks = append(tasks, attnTask{seg: si, r0: sg.Row0 + t0, r1: sg.Row0 + min(t0+tileRows, n), kvh: h, split: -1})
			}
		}
	}
	ws.attnTasks = tasks
	if cap(ws.attnParts) < parts {
		ws.attnParts = make([]float32, parts)
	}
	partBuf := ws.attnParts[:parts]
	scale := float32(1 / math.Sqrt(float64(d)))
	kvOf := func(sg *Segment, h int) attnKV {
		return attnKV{dt: sg.s.shape.DType, pages: sg.s.state.(*cpuState).table.PagesOf(l), l: l, kvd: kvd, off: h * d, d: d}
	}
	m.pool.Run(len(tasks), func(lo, hi int) {
		// Scratch is taken when a task first needs it and given back
		// after the tasks (a defer inside the loop would be allocated
		// at every task that reaches it).
		var sc []float32     // reduceBlock's scores and factors
		var kb, vb []float32 // one head's block decoded from a compact format
		var run, sp []float32
		var ts *tileScratch
		var rs *rowScratch
		var ss *splitScratch
		defer func() {
			if ts != nil {
				tileScratches.Put(ts)
			}
			if rs != nil {
				rowScratches.Put(rs)
			}
			if ss != nil {
				splitScratches.Put(ss)
			}
		}()
		for _, tk := range tasks[lo:hi] {
			sg := &segs[tk.seg]
			if tk.split >= 0 {
				pos := sg.Start + tk.r0 - sg.Row0
				lo := max(tk.split*attnSplit, winStart(pos, W))
				hi := min(tk.split*attnSplit+attnSplit, pos+1)
				for h := range Hkv {
					newAttnState(partBuf[tk.part+h*stateN:], G, d)
				}
				rowsKV := attnKV{dt: m.kvDType, pages: sg.s.state.(*cpuState).table.PagesOf(l), l: l, kvd: kvd, d: kvd} // every head's slice
				qr, pr := q[tk.r0*qd:][:qd], partBuf[tk.part:]
				if splitRowsFast {
					if ss == nil {
						ss = getSplitScratch(Hq)
					}
					ss.src = splitSource{kv: rowsKV}
					switch {
					case bf16InPlace:
						// A bfloat16 cache is read where it lies: the
						// kernels widen each key and value in a
						// register (exact, so the bits are the same),
						// which spares writing the block out as
						// float32 and reading it back.
						splitRows(bf16RowKernels, lo, hi, Hkv, G, d, qr, pr, scale, ss)
					case m.kvDType == kv.F32:
						splitRows(f32RowKernels, lo, hi, Hkv, G, d, qr, pr, scale, ss)
					default:
						// A compact format's key and value rows are
						// decoded whole, block by block, every head's
						// slice at once: one sweep of contiguous
						// memory, which the hardware prefetches.
						if rs == nil {
							rs = getRowScratch(kvd)
						}
						ss.src.k, ss.src.v = rs.k, rs.v
						splitRows(f32RowKernels, lo, hi, Hkv, G, d, qr, pr, scale, ss)
					}
					continue
				}
				// Without the SIMD kernels (or for groups not of four
				// query heads) each head runs the split's reduceBlock
				// steps: a compact format's rows decoded whole, block
				// by block, a float32 cache read in place.
				if rs == nil && m.kvDType != kv.F32 {
					rs = getRowScratch(kvd)
				}
				if sc == nil {
					sc = make([]float32, G*(attnBlock+1))
				}
				for b0, be := lo, 0; b0 < hi; b0 = be {
					be = blockEnd(b0, hi)
					cnt := be - b0
					var kbAll, vbAll []float32
					if rs != nil {
						kbAll, vbAll = rs.k, rs.v
					}
					keys, ks, vals, vs := rowsKV.block(b0, cnt, kbAll, vbAll)
					var nextBlock []float32
					if rs == nil && be < hi {
						nextBlock, _, _, _ = rowsKV.block(be, min(attnBlock, hi-be), nil, nil)
					}
					for h := range Hkv {
						next := nextBlock
						if rs == nil && h+1 < Hkv {
							next = keys[(h+1)*d:]
						}
						s := newAttnStateRaw(pr[h*stateN:], G, d)
						reduceBlock(s, qr[h*G*d:][:G*d], keys[h*d:], ks, vals[h*d:], vs, cnt, scale, sc, next)
					}
				}
				continue
			}
			hkv := kvOf(sg, tk.kvh)
			pos0 := sg.Start + tk.r0 - sg.Row0
			if kb == nil && m.kvDType != kv.F32 {
				// Only the row and tile tasks decode one head's
				// block; a decode step's split tasks need none.
				kb, vb = make([]float32, attnBlock*d), make([]float32, attnBlock*d)
			}
			if tiles && len(sg.Toks) > attnShortRows {
				// A prompt chunk's tile; a short segment's row of one
				// split (decode below attnSplit positions) stays on
				// reduceBlock, which scores only its own G queries.
				if ts == nil {
					ts = getTileScratch(G, d)
				}
				ts.run(hkv, q[tk.r0*qd+tk.kvh*G*d:], qd, tk.r1-tk.r0, pos0, W, scale, kb, vb, o[tk.r0*qd+tk.kvh*G*d:])
				continue
			}
			rows := tk.r1 - tk.r0
			if sc == nil {
				sc = make([]float32, G*(attnBlock+1))
			}
			if len(run) < rows*stateN {
				run = make([]float32, rows*stateN)
			}
			states := make([]attnState, rows)
			for i := range states {
				states[i] = newAttnState(run[i*stateN:], G, d)
			}
			if len(sp) < rows*stateN {
				sp = make([]float32, rows*stateN)
			}
			// Split by split, block by block: each block's keys and
			// values are decoded once for the rows of the tile that
			// reach it, each row taking the block's positions from its
			// window's start (the block's first without a window) up
			// to its own, so that every row runs the same reduceBlock
			// steps, block by block from the split's start or its
			// window's, as a decode row's split task.
			splitSt := make([]attnState, rows)
			for s := firstSplit(pos0, W); s < splits(pos0+rows-1); s++ {
				lo := s * attnSplit
				first := max(0, lo-pos0)                      // the first row that reaches the split
				last := seeBelow(pos0, rows, lo+attnSplit, W) // the rows after it start their window past it
				for i := first; i < last; i++ {
					splitSt[i] = newAttnState(sp[i*stateN:], G, d)
				}
				hi := min(lo+attnSplit, pos0+rows)
				b := max(lo, winStart(pos0+first, W)/attnBlock*attnBlock) // no row reads a block before it
				for b0 := b; b0 < hi; b0 += attnBlock {
					cntMax := min(attnBlock, hi-b0)
					iLo, iHi := max(first, b0-pos0), seeBelow(pos0, last, b0+cntMax, W)
					if iLo >= iHi {
						continue
					}
					keys, ks, vals, vs := hkv.block(b0, cntMax, kb, vb)
					for i := iLo; i < iHi; i++ {
						cnt := min(cntMax, pos0+i+1-b0)
						off := max(0, winStart(pos0+i, W)-b0)
						r := tk.r0 + i
						reduceBlock(splitSt[i], q[r*qd+tk.kvh*G*d:][:G*d], keys[off*ks:], ks, vals[off*vs:], vs, cnt-off, scale, sc, nil)
					}
				}
				for i := first; i < last; i++ {
					mergeSplit(states[i], splitSt[i])
				}
			}
			for i, st := range states {
				r := tk.r0 + i
				st.finish(o[r*qd+tk.kvh*G*d:][:G*d])
			}
		}
	})
	// Merge the short segments' splits, in order, per (row, KV head).
	merge := func(lo, hi int) {
		run := make([]float32, stateN)
		for _, hd := range merges[lo:hi] {
			s := newAttnState(run, G, d)
			for k := range hd.n {
				mergeSplit(s, newAttnStateRaw(partBuf[hd.part+k*hd.stride:], G, d))
			}
			s.finish(o[hd.r0*qd+hd.kvh*G*d:][:G*d])
		}
	}
	// A few rows' merges are far shorter than a parallel region's
	// dispatch: a decode batch of one at depth 16,384 merges 16 splits of
	// 32 heads, 33k fused multiply-adds.
	if parts < attnMergeSerial {
		merge(0, len(merges))
	} else {
		m.pool.Run(len(merges), merge)
	}
}

// attnMergeSerial is the split states' floats below which the calling
// goroutine merges them alone.
const attnMergeSerial = 1 << 18

// newAttnStateRaw views buf as a state without resetting it.
func newAttnStateRaw(buf []float32, G, d int) attnState {
	return attnState{m: buf[:G], l: buf[G : 2*G], acc: buf[2*G : 2*G+G*d]}
}

// attnSplitRows reports whether a decode row's split tasks run splitRows,
// every query head of the row at once, for heads of d values: where its
// kernels run on SIMD; elsewhere each head runs reduceBlock, whose kernels
// are faster there. Both give the same bits; tests set it to run either.
var attnSplitRows = kernels.BF16AttnFast

// attnBF16InPlace reports whether splitRows reads a bfloat16 cache in
// place for heads of d values (its kernels widening each value in a
// register) rather than widening each block's rows first. Both give the
// same bits; tests set it to run either.
var attnBF16InPlace = kernels.BF16AttnFast

// rowScratch holds one block of whole key and value rows decoded from a
// compact format: attnBlock rows of kvd floats each.
type rowScratch struct {
	k, v []float32
}

// rowScratches recycles rowScratch between attend calls (two blocks of
// whole rows are 128 KiB each for LFM2-8B-A1B's 512 floats per row).
var rowScratches sync.Pool

// getRowScratch returns a rowScratch for rows of kvd floats.
func getRowScratch(kvd int) *rowScratch {
	if rs, ok := rowScratches.Get().(*rowScratch); ok && len(rs.k) == attnBlock*kvd {
		return rs
	}
	return &rowScratch{k: make([]float32, attnBlock*kvd), v: make([]float32, attnBlock*kvd)}
}

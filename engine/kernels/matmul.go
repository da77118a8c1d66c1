package kernels

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// MatVec sets y = W·x for the first In elements of x and Out elements of y.
// It panics if x or y is too short; the Matrix must be valid (Validate).
func (m *Matrix) MatVec(y, x []float32) { (*Pool)(nil).mul(m, y, x, 1, false) }

// MatMul sets y_b = W·x_b for b < batch, where x is [batch, In] and y is
// [batch, Out], both row-major. Row b of y is bit-identical to MatVec of
// row b of x, whatever batch is.
func (m *Matrix) MatMul(y, x []float32, batch int) { (*Pool)(nil).mul(m, y, x, batch, false) }

// MatMulAdd sets y_b = y_b + W·x_b for b < batch: the product is reduced on
// its own, from zero, and added to y once, so y_b + (MatMul's row b) gives
// the same bits. MoE layers use it to sum expert outputs.
func (m *Matrix) MatMulAdd(y, x []float32, batch int) { (*Pool)(nil).mul(m, y, x, batch, true) }

// MatVec is Matrix.MatVec with the outputs split over the Pool's goroutines.
func (p *Pool) MatVec(m *Matrix, y, x []float32) { p.mul(m, y, x, 1, false) }

// MatMul is Matrix.MatMul with the outputs split over the Pool's goroutines.
func (p *Pool) MatMul(m *Matrix, y, x []float32, batch int) { p.mul(m, y, x, batch, false) }

// MatMulAdd is Matrix.MatMulAdd with the outputs split over the Pool's
// goroutines.
func (p *Pool) MatMulAdd(m *Matrix, y, x []float32, batch int) { p.mul(m, y, x, batch, true) }

// parallelMinBytes is the least work (weight bytes times batch rows) a
// product must have to be split over the Pool: handing out work costs a
// few microseconds of waking and waiting, in which one goroutine gets
// through about this many bytes itself. Routers and the tiny test models
// stay on the calling goroutine.
const parallelMinBytes = 128 << 10

func (p *Pool) mul(m *Matrix, y, x []float32, batch int, add bool) {
	m.checkProduct(y, x, batch)
	if batch == 0 || m.Out == 0 {
		return
	}
	if int64(m.WeightBytes())*int64(batch) < parallelMinBytes {
		p = nil
	}
	units := m.units()
	rb := m.routes(x, batch, nil)
	if rb != nil {
		defer routePool.Put(rb)
	}
	rt := rb.get()
	if p.Threads() == 1 {
		m.mulUnits(y, x, batch, 0, units, add, rt)
		return
	}
	p.runGrain(units, m.grain(batch), func(lo, hi int) { m.mulUnits(y, x, batch, lo, hi, add, rt) })
}

// routeBuf holds the rowRoutes of one or more products' inputs, and
// tileBitsZ's answers on the way to them.
type routeBuf struct {
	r    []rowRoute
	bits [][2]uint32
}

func (b *routeBuf) get() []rowRoute {
	if b == nil {
		return nil
	}
	return b.r
}

// routePool keeps routeBufs between products, so that a decode step's
// products allocate nothing for them.
var routePool = sync.Pool{New: func() any { return new(routeBuf) }}

// routes works out, for a one-row BFP product on the AVX-512 kernels, the
// fast route of each full tile row of x (fastRange) once for every range
// and block of tile columns that reads it, appending them to b's (b nil:
// a buffer from routePool); it returns b unchanged for any other product,
// whose calls work out their own.
func (m *Matrix) routes(x []float32, batch int, b *routeBuf) *routeBuf {
	if batch != 1 || !m.Format.tiled() || !useSIMD || !useAVX512 {
		return b
	}
	if b == nil {
		b = routePool.Get().(*routeBuf)
		b.r = b.r[:0]
	}
	n := m.In / TileSize
	if n == 0 {
		return b
	}
	if cap(b.bits) < n {
		b.bits = make([][2]uint32, n)
	}
	bits := b.bits[:n]
	_ = x[:n*TileSize]
	tileBitsZ(&x[0], n, &bits[0])
	for _, tb := range bits {
		b.r = append(b.r, routeOfBits(m.Format, tb))
	}
	return b
}

// rowGrainTiles is the fewest BFP tile columns a range of a one-row
// product should hold (Pool.runGrain): each range runs the row kernels
// once per tile row (bfpRow), and each call has a fixed cost (working out
// the inputs' route, entering the kernel, its prefetch streams starting
// afresh). Cut in eight, the 2,048 outputs of LFM3-1.7B's attention and
// MLP down products left calls of two quads; in ranges of 32 tiles or
// more, its decode step ran each product nearer its own roofline in six
// alternating pairs out of six, by 7 % on the median (docs/lfm3.md).
const rowGrainTiles = 32

// grain is the fewest units a range of m's product of batch rows should
// hold (Pool.runGrain).
func (m *Matrix) grain(batch int) int {
	if batch == 1 && m.Format.tiled() {
		return rowGrainTiles / bfpUnitTiles
	}
	return 1
}

// checkProduct panics unless x and y can hold a product of batch rows.
func (m *Matrix) checkProduct(y, x []float32, batch int) {
	if batch < 0 || len(x) < batch*m.In || len(y) < batch*m.Out {
		panic(fmt.Sprintf("kernels: %s [%d, %d] product of batch %d needs len(x) ≥ %d and len(y) ≥ %d, got %d and %d",
			m.Format, m.Out, m.In, batch, batch*m.In, batch*m.Out, len(x), len(y)))
	}
}

// bfpUnitTiles is how many BFP tile columns make one unit of parallel
// work: the four tiles the AVX-512 row kernels run side by side, so that a
// goroutine's range never leaves them a remainder of one to three tiles
// (which the slower AVX2 kernel would run) except at a matrix's end.
const bfpUnitTiles = 4

// units is how many pieces a product's outputs split into: four rows (the
// width of the dense matrix-vector kernel) or bfpUnitTiles BFP tile
// columns.
func (m *Matrix) units() int {
	switch m.Format {
	case F32, BF16:
		return (m.Out + 3) / 4
	case BFP8, BFP4:
		return (m.nTiles() + bfpUnitTiles - 1) / bfpUnitTiles
	}
	panic(fmt.Sprintf("kernels: product with a matrix of unknown format %d (not validated)", m.Format))
}

// mulUnits computes the outputs of units [lo, hi); rt is routes' for x, or
// nil.
func (m *Matrix) mulUnits(y, x []float32, batch, lo, hi int, add bool, rt []rowRoute) {
	switch m.Format {
	case F32, BF16:
		m.mulRows(y, x, batch, 4*lo, min(4*hi, m.Out), add)
	default:
		m.mulCols(y, x, batch, bfpUnitTiles*lo, min(bfpUnitTiles*hi, m.nTiles()), add, rt)
	}
}

// MulJob is one product y = M·x over Batch rows, for Pool.MatMulAll.
type MulJob struct {
	M     *Matrix
	Y, X  []float32
	Batch int
}

// MatMulAll runs every job's product in one parallel region: the outputs
// of all the jobs are split over the Pool's goroutines together, so a few
// small products (the experts one token selects) keep every goroutine busy
// and wait once, at the end, instead of once per product. Jobs must not
// write where another reads. Each output is bit-identical to MatMul's.
func (p *Pool) MatMulAll(jobs []MulJob) {
	start := make([]int, len(jobs)+1)
	// Job i's routes are rb.r[route[i]:route[i+1]].
	route := make([]int, len(jobs)+1)
	var rb *routeBuf
	var work int64
	for i, j := range jobs {
		j.M.checkProduct(j.Y, j.X, j.Batch)
		n := 0
		if j.Batch > 0 && j.M.Out > 0 {
			n = j.M.units()
			rb = j.M.routes(j.X, j.Batch, rb)
		}
		start[i+1] = start[i] + n
		route[i+1] = len(rb.get())
		work += int64(j.M.WeightBytes()) * int64(j.Batch)
	}
	if rb != nil {
		defer routePool.Put(rb)
	}
	rt := rb.get()
	run := func(lo, hi int) {
		for i, j := range jobs {
			if a, b := max(lo, start[i]), min(hi, start[i+1]); a < b {
				var r []rowRoute
				if route[i] < route[i+1] {
					r = rt[route[i]:route[i+1]]
				}
				j.M.mulUnits(j.Y, j.X, j.Batch, a-start[i], b-start[i], false, r)
			}
		}
	}
	if work < parallelMinBytes || p.Threads() == 1 {
		run(0, start[len(jobs)])
		return
	}
	grain := 1
	for _, j := range jobs {
		grain = max(grain, j.M.grain(j.Batch))
	}
	p.runGrain(start[len(jobs)], grain, run)
}

// MatMulSwiGLU sets u = W3·x and g = SwiGLU(W1·x, u) for batch rows, the
// feed-forward's two input products and its activation, in one parallel
// region. MatMulAll splits the two products' outputs over the goroutines
// together, and the activation then ran on the calling goroutine alone
// while the others waited (about 7 us a layer at LFM3-1.7B's width of
// 7,680 by BenchmarkSwiGLU's rate, more with the outputs in other cores'
// caches). Here the goroutine that finishes the second of the two
// products for a range of outputs applies the activation to that range.
// W1 and W3 must have the same shape; each output is bit-identical to
// MatMulAll's followed by SwiGLU on each row (NaN payloads aside, as
// SwiGLU's own). Only the BFP formats are fused, whose ranges start on
// whole multiples of 128 outputs; the others run as MatMulAll and SwiGLU.
func (p *Pool) MatMulSwiGLU(w1, w3 *Matrix, g, u, x []float32, batch int) {
	if w1.In != w3.In || w1.Out != w3.Out {
		panic(fmt.Sprintf("kernels: MatMulSwiGLU of [%d, %d] and [%d, %d] matrices", w1.Out, w1.In, w3.Out, w3.In))
	}
	w1.checkProduct(g, x, batch)
	w3.checkProduct(u, x, batch)
	out := w1.Out
	if batch == 0 || out == 0 {
		return
	}
	// SwiGLU on outputs [o0, o1) of every row.
	activate := func(o0, o1 int) {
		for row := 0; row < batch*out; row += out {
			SwiGLU(g[row+o0:row+o1], g[row+o0:row+o1], u[row+o0:row+o1])
		}
	}
	if !w1.Format.tiled() || !w3.Format.tiled() {
		p.MatMulAll([]MulJob{{M: w1, Y: g, X: x, Batch: batch}, {M: w3, Y: u, X: x, Batch: batch}})
		activate(0, out)
		return
	}
	n := w1.units()
	// One set of routes serves both products where their formats agree.
	rb := w1.routes(x, batch, nil)
	rt1 := rb.get()
	rt3 := rt1
	if w3.Format != w1.Format {
		rb = w3.routes(x, batch, rb)
		rt3 = rb.get()[len(rt1):]
	}
	if rb != nil {
		defer routePool.Put(rb)
	}
	// done[i] counts the products that have unit i's outputs.
	done := make([]atomic.Int32, n)
	const unitOut = bfpUnitTiles * TileSize
	mark := func(a, b int) {
		markDone(done, a, b, func(r0, r1 int) { activate(r0*unitOut, min(r1*unitOut, out)) })
	}
	// Units [0, n) are W1's, [n, 2n) W3's.
	run := func(lo, hi int) {
		if a, b := lo, min(hi, n); a < b {
			w1.mulUnits(g, x, batch, a, b, false, rt1)
			mark(a, b)
		}
		if a, b := max(lo, n)-n, hi-n; a < b {
			w3.mulUnits(u, x, batch, a, b, false, rt3)
			mark(a, b)
		}
	}
	work := 2 * int64(w1.WeightBytes()) * int64(batch)
	if work < parallelMinBytes || p.Threads() == 1 {
		run(0, 2*n)
		return
	}
	p.runGrain(2*n, max(w1.grain(batch), w3.grain(batch)), run)
}

// markDone counts units [a, b) of one of two products done (done[i] for
// unit i) and calls apply on each longest run [r0, r1) of them that the
// other product has done too.
func markDone(done []atomic.Int32, a, b int, apply func(r0, r1 int)) {
	r0 := -1
	for i := a; i < b; i++ {
		if done[i].Add(1) == 2 {
			if r0 < 0 {
				r0 = i
			}
			continue
		}
		if r0 >= 0 {
			apply(r0, i)
			r0 = -1
		}
	}
	if r0 >= 0 {
		apply(r0, b)
	}
}

func put(y []float32, i int, v float32, add bool) {
	if add {
		y[i] += v
	} else {
		y[i] = v
	}
}

// rowBlock is how many rows of W the batched F32/BF16 product keeps hot in
// cache while it sweeps the batch in groups of four.
const rowBlock = 16

// mulRows computes outputs [oLo, oHi) of every batch row for F32 and BF16.
// The kernels differ in shape (four rows against one input, one row
// against four inputs, or with AVX-512 four rows against four inputs) but
// every output is one canonical dot product.
func (m *Matrix) mulRows(y, x []float32, batch, oLo, oHi int, add bool) {
	in, out := m.In, m.Out
	var d [4]float32
	vec := func(o0, o1, b int) {
		xb := x[b*in:][:in]
		o := o0
		for ; o+4 <= o1; o += 4 {
			if m.Format == BF16 {
				dotBF16x4(&d, m.BF16[o*in:], in, xb)
			} else {
				dotF32x4(&d, m.F32[o*in:], in, xb)
			}
			for r := range 4 {
				put(y, b*out+o+r, d[r], add)
			}
		}
		for ; o < o1; o++ {
			var v float32
			if m.Format == BF16 {
				v = dotBF16(m.BF16[o*in:][:in], xb)
			} else {
				v = dotF32(m.F32[o*in:][:in], xb)
			}
			put(y, b*out+o, v, add)
		}
	}
	if batch == 1 {
		vec(oLo, oHi, 0)
		return
	}
	// The groups of four rows read xs: x itself, or, for two or three
	// BF16 rows with AVX-512, the rows padded to four with zeros, so that
	// the four-by-four kernel reads each weight once for all of them and
	// the padding's products are dropped. Swept once per row instead, two
	// and three rows read every weight two and three times from memory
	// and took longer than four (docs/drafting-speed.md).
	xs, rows := x, batch
	if batch < 4 && m.Format == BF16 && useSIMD && useAVX512 {
		bp := padRows.Get().(*[]float32)
		defer padRows.Put(bp)
		if cap(*bp) < 4*in {
			*bp = make([]float32, 4*in)
		}
		xs, rows = (*bp)[:4*in], 4
		copy(xs, x[:batch*in])
		clear(xs[batch*in:])
	}
	// The rows past the last group of four (two or three rows without
	// the padding) run one row at a time over a block of rowBlock
	// outputs, so that the block's weights come from memory once and from
	// the cache for the other rows.
	for o0 := oLo; o0 < oHi; o0 += rowBlock {
		o1 := min(o0+rowBlock, oHi)
		b := 0
		for ; b+4 <= rows; b += 4 {
			xb := xs[b*in:]
			o := o0
			if m.Format == BF16 && useAVX512 {
				// Four rows at a time: the same sixteen dots, each
				// with its own bits, for a quarter of the loads.
				var d16 [16]float32
				for ; o+4 <= o1; o += 4 {
					dotBF16r4b4(&d16, m.BF16[o*in:], in, xb, in, in)
					for i, v := range d16 {
						if r := b + i%4; r < batch {
							put(y, r*out+o+i/4, v, add)
						}
					}
				}
			}
			for ; o < o1; o++ {
				if m.Format == BF16 {
					dotBF16b4(&d, m.BF16[o*in:][:in], xb, in)
				} else {
					dotF32b4(&d, m.F32[o*in:][:in], xb, in)
				}
				for r := range 4 {
					if b+r < batch {
						put(y, (b+r)*out+o, d[r], add)
					}
				}
			}
		}
		for ; b < batch; b++ {
			vec(o0, o1, b)
		}
	}
}

// padRows holds the inputs of a product of two or three rows padded to
// four with zeros (mulRows), one buffer per goroutine at a time.
var padRows = sync.Pool{New: func() any { return new([]float32) }}

// bfpScratch is one goroutine's working memory for the batched BFP product:
// a decoded tile and the batch's accumulators for a block of tile columns.
type bfpScratch struct {
	w   [TileSize * TileSize]float32
	acc []float32
}

// bfpBatchAccRows is how many batch rows of one tile column's accumulators
// (128 bytes each) the batched BFP product keeps live: 24 KiB, half of L1,
// next to the 4 KiB decoded tile and the batch's inputs for one tile row.
const bfpBatchAccRows = 192

var bfpScratchPool = sync.Pool{New: func() any { return new(bfpScratch) }}

// bfpRowBlock is how many tile columns a one-row BFP product accumulates
// at a time: 64 tiles are 68 KiB (BFP8) or 36 KiB (BFP4) of weights read
// in one sequential run per tile row, long enough for the prefetchers,
// while their 2048 accumulators stay in L1.
const bfpRowBlock = 64

// mulCols computes tile columns [ntLo, ntHi) (outputs 32·ntLo up to
// 32·ntHi, cut at Out) of every batch row for BFP8 and BFP4. One batch row
// runs the fused decode-and-accumulate row kernel over blocks of tile
// columns, reading the weights in memory order; larger batches also sweep
// blocks of tile columns in memory order, decode each tile once into
// scratch and apply it to every batch row, six rows at a time with the
// tile rows held in registers. Both reduce output n over k = 0, 1, …, In−1 with fma(x[k], w, acc),
// so they agree bit for bit.
//
// rt, when not nil, is routes' answer for x, one for each full tile row.
func (m *Matrix) mulCols(y, x []float32, batch, ntLo, ntHi int, add bool, rt []rowRoute) {
	f, in, out := m.Format, m.In, m.Out
	tb, nt := f.TileBytes(), m.nTiles()
	store := func(b, n0 int, col []float32) {
		dst := y[b*out+n0:][:min(TileSize, out-n0)]
		if !add {
			copy(dst, col)
			return
		}
		for c := range dst {
			dst[c] += col[c]
		}
	}
	if batch == 1 {
		// Blocks of bfpRowBlock tile columns: for each tile row kt in turn,
		// the block's tiles of that row, which lie contiguously in memory.
		// Only the block's accumulators (8 KiB) are live, in L1.
		var acc [bfpRowBlock * TileSize]float32
		var xs [512]float32
		for b0 := ntLo; b0 < ntHi; b0 += bfpRowBlock {
			nb := min(bfpRowBlock, ntHi-b0)
			a := acc[:nb*TileSize]
			clear(a)
			for k0 := 0; k0 < in; k0 += TileSize {
				var r *rowRoute
				if k := k0 / TileSize; k < len(rt) {
					r = &rt[k]
				}
				bfpRowRouted(f, a, m.BFP[(k0/TileSize*nt+b0)*tb:], nb, x[k0:min(k0+TileSize, in)], nt*tb, r, &xs)
			}
			for j := range nb {
				store(0, (b0+j)*TileSize, a[j*TileSize:])
			}
		}
		return
	}
	// Blocks of nb tile columns: for each tile row kt in turn, the block's
	// tiles of that row, which lie contiguously in memory (a stride of a
	// whole tile row between them would defeat the prefetchers on weights
	// that are not cached), each decoded once and applied to the batch.
	// The block's accumulators, nb·batch·32 floats, stay in L1.
	nb := max(1, min(ntHi-ntLo, bfpBatchAccRows/batch))
	s := bfpScratchPool.Get().(*bfpScratch)
	defer bfpScratchPool.Put(s)
	if cap(s.acc) < nb*batch*TileSize {
		s.acc = make([]float32, nb*batch*TileSize)
	}
	kt := m.kTiles()
	for b0 := ntLo; b0 < ntHi; b0 += nb {
		nj := min(nb, ntHi-b0)
		all := s.acc[:nj*batch*TileSize]
		clear(all)
		for k := range kt {
			rows := min(TileSize, in-k*TileSize)
			// Batches of two to four rows: the AVX-512 kernels decode each
			// tile once into registers for the batch, where the inputs
			// and exponents allow (smallRange, bfpRowsSmall); other tiles
			// are decoded into scratch and applied to the batch.
			lo, width, small := 0, 0, false
			if rows == TileSize {
				lo, width, small = smallRange(f, x[k*TileSize:], in, batch)
			}
			for j := 0; j < nj; j++ {
				if small {
					done := bfpRowsSmall(f, all[j*batch*TileSize:], m.BFP[(k*nt+b0+j)*tb:], nj-j, x[k*TileSize:], in, batch, lo, width)
					if j += done; j == nj {
						break
					}
				}
				// The tile below in the next tile row (after the last row,
				// this tile's place in the next block) is a run ahead.
				ahead := nt * tb
				if k == kt-1 {
					ahead = (nj - k*nt) * tb
				}
				applyTile(f, &s.w, m.BFP[(k*nt+b0+j)*tb:], ahead, all[j*batch*TileSize:][:batch*TileSize], x[k*TileSize:], in, rows, batch)
			}
		}
		for j := range nj {
			for b := range batch {
				store(b, (b0+j)*TileSize, all[(j*batch+b)*TileSize:])
			}
		}
	}
}

// applyTile decodes the tile at t into w and applies its rows rows to the
// batch rows' accumulators acc[32b:32b+32] with their inputs x[b·xStride:].
// On the AVX-512 kernels the decoder also prefetches the tile ahead bytes
// on, and the batch goes in blocks of at most tileFMAPackedMax rows, of
// sizes as equal as they can be (no block is left a row or two, whose few
// FMA chains would wait on the FMA latency). Otherwise blocks of six batch
// rows share each tile row from registers and the remaining zero to five
// rows go at most three at a time, four as two and two. Every accumulator
// sees tileFMAGo's FMAs in its order.
func applyTile(f Format, w *[TileSize * TileSize]float32, t []byte, ahead int, acc, x []float32, xStride, rows, batch int) {
	if useSIMD && useAVX512 {
		decodeTileAhead(f, w, t, ahead)
		nblk := (batch + tileFMAPackedMax - 1) / tileFMAPackedMax
		for i, r0 := 0, 0; i < nblk; i++ {
			r1 := (i + 1) * batch / nblk
			tileFMAPacked(acc[r0*TileSize:], w, x[r0*xStride:], xStride, rows, r1-r0)
			r0 = r1
		}
		return
	}
	decodeTile(f, w, t)
	b := 0
	if nblk := batch / 6; nblk > 0 {
		tileFMA6(acc, TileSize, w, x, xStride, rows, nblk)
		b = 6 * nblk
	}
	for b < batch {
		g := min(3, batch-b)
		if batch-b == 4 {
			g = 2
		}
		tileFMA(acc[b*TileSize:], TileSize, w, x[b*xStride:], xStride, rows, g)
		b += g
	}
}

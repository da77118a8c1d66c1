package hessian

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// ChunkRows is the number of rows a Stat collects before it adds their
// products to S: the partial sum of each chunk is formed in one fixed
// order and added to S in chunk order (docs/gptq.md §2), so S depends on
// the rows and their order only, never on how they were handed to Add.
const ChunkRows = 64

// Stat accumulates the second-moment statistics of one input of one matrix:
// S = Σ_t ω_t·x_t·x_tᵀ (float64, K×K), Ω = Σ ω_t, Ω₂ = Σ ω_t² and the raw row
// count n. Rows arrive as float32 and are widened exactly before any
// product. Until Finish only the upper triangle of S is meaningful.
type Stat struct {
	k       int
	s       []float64
	weight  float64
	weight2 float64
	tokens  int
	// The pending rows, up to rows = chunks·ChunkRows of them, so that one
	// pass over S adds several chunks' sums (each still formed alone and
	// added in chunk order: the bits do not depend on how many chunks a
	// pass holds). xs holds them as they came, row t at xs[t·k:][:k]: the
	// flush packs them in the kernels' layouts, tile by tile.
	xs      []float32
	ws      []float64 // ws[t]: the weight ω_t of pending row t
	cols    int
	rows    int
	pending int
	done    bool
	// threads is how many goroutines a flush may use (SetThreads).
	threads int
	// tiles are the tiles of S's upper triangle that flush hands out,
	// the fullest first; scratch holds each goroutine's packed rows.
	tiles   []tile
	scratch []*flushScratch
}

// statBufferBytes bounds a Stat's pending rows (xs): as many whole chunks
// as fit, at least one and at most maxChunks. A pass over S, which is far
// larger than the caches at real widths (32 MB for K = 2048, 411 MB for
// 7168), then comes once per several chunks: 16 MB hold 2,048 rows at
// K = 2048 and 576 at 7168, where S's traffic is 16 bytes per 576
// multiply-adds.
const (
	statBufferBytes = 16 << 20
	maxChunks       = 32
)

// NewStat returns an empty Stat for inputs of dimension k ≥ 1.
func NewStat(k int) *Stat { return newStat(k, passChunks(k)) }

// passChunks is the number of chunks of pending rows NewStat gives a Stat
// of dimension k.
func passChunks(k int) int { return max(1, min(maxChunks, statBufferBytes/(4*ChunkRows*k))) }

// newStat is NewStat with room for chunks chunks of pending rows.
func newStat(k, chunks int) *Stat {
	rows := chunks * ChunkRows
	return &Stat{k: k, s: make([]float64, k*k), cols: blockCols(), rows: rows, xs: make([]float32, rows*k), ws: make([]float64, rows)}
}

// SetThreads lets the Stat add its pending rows to S on up to n goroutines
// (default 1): the tiles of S are independent, each formed by one
// goroutine exactly as a single one would, so n changes no bit. It suits a
// Stat fed by one producer with idle cores meanwhile (the dense tensors'
// statistics, added from inside the engine's forward), not the experts'
// Stats, which already run one per goroutine.
func (s *Stat) SetThreads(n int) { s.threads = max(1, n) }

// K returns the input dimension.
func (s *Stat) K() int { return s.k }

// Tokens returns the number of rows added.
func (s *Stat) Tokens() int { return s.tokens }

// Weight returns Ω, the sum of the row weights.
func (s *Stat) Weight() float64 { return s.weight }

// Weight2 returns Ω₂, the sum of the squared row weights.
func (s *Stat) Weight2() float64 { return s.weight2 }

// NEff returns the effective number of rows Ω²/Ω₂ (Kish), 0 for none.
func (s *Stat) NEff() float64 {
	if s.weight2 == 0 {
		return 0
	}
	return s.weight * s.weight / s.weight2
}

// S returns the accumulated Σ ω·x·xᵀ, K×K row-major and symmetric. It is
// valid after Finish and is the Stat's own storage.
func (s *Stat) S() []float64 { return s.s }

// Add adds one row x (length K) with weight ω ≥ 0.
func (s *Stat) Add(x []float32, w float64) error {
	if s.done {
		return &InputError{What: "Add", Msg: "Stat already finished"}
	}
	if len(x) != s.k {
		return &InputError{What: "Add", Msg: fmt.Sprintf("row of %d values for K = %d", len(x), s.k)}
	}
	if !(w >= 0) || math.IsInf(w, 0) {
		return &InputError{What: "Add", Msg: fmt.Sprintf("row weight %v", w)}
	}
	t := s.pending
	copy(s.xs[t*s.k:][:s.k], x)
	s.ws[t] = w
	s.weight += w
	s.weight2 += float64(w * w)
	s.tokens++
	s.pending++
	if s.pending == s.rows {
		s.flush()
	}
	return nil
}

// The blocking of flush. S is cut into tiles of tileRows × tileCols
// entries. A tile's entries (512 KB) stay in a core's L2 cache while every
// group of groupChunks chunks passes through it: the group's values of the
// tile's columns, packed by panels of cols columns (128 KB, also in L2),
// and, one block row at a time, its weighted values of microRows rows of
// the tile (4 KB, in L1), which every block of the row reads. Main memory
// then sees S once per pass, each pending value once per tile row or
// column, and the kernels' inner loops run from the caches. A block is
// microRows × cols entries: the kernels' registers.
const (
	microRows   = 8
	tileRows    = 256
	tileCols    = 256
	groupChunks = 1
	groupRows   = groupChunks * ChunkRows
)

// tile is the part of S's upper triangle rows [i0, i1) × columns [j0, j1)
// hold: every block of it that reaches the diagonal or above.
type tile struct{ i0, i1, j0, j1 int }

// flushScratch is one goroutine's working memory in flush: a group's
// packed values of a tile's columns, b[p·gn·cols + t·cols + q] =
// x_t[j0+p·cols+q]; of a block row, a[t·microRows+r] = ω_t·x_t[i0+r]; and
// an edge block's copy of S.
type flushScratch struct {
	b    [groupRows * tileCols]float64
	a    [groupRows * microRows]float64
	edge [microRows * 16]float64
}

// flush adds the pending rows' chunk sums Σ_t ω_t·x_t·x_tᵀ (each chunk of
// ChunkRows rows summed alone, over t in order) to the upper triangle of S
// in chunk order, tile by tile (each tile's groups of chunks in order).
// Blocks inside S also write their entries below the diagonal, which
// Finish overwrites with the mirror of the upper triangle; blocks at the
// edges write only their entries inside S.
func (s *Stat) flush() {
	n := s.pending
	if n == 0 {
		return
	}
	if s.tiles == nil {
		s.tiles = upperTiles(s.k)
	}
	threads := max(1, min(s.threads, len(s.tiles)))
	for len(s.scratch) < threads {
		s.scratch = append(s.scratch, new(flushScratch))
	}
	spread(threads, len(s.tiles), func(q, g int) { s.flushTile(s.tiles[q], n, s.scratch[g]) })
	s.pending = 0
}

// upperTiles lists the tiles of a k×k matrix that hold entries of its upper
// triangle, the fullest first (so that the last ones handed out to
// goroutines are the small ones on the diagonal).
func upperTiles(k int) []tile {
	var full, diag []tile
	for i0 := 0; i0 < k; i0 += tileRows {
		for j0 := 0; j0 < k; j0 += tileCols {
			tl := tile{i0, min(i0+tileRows, k), j0, min(j0+tileCols, k)}
			switch {
			case tl.j1 <= i0:
				// Below the diagonal: nothing of the upper triangle.
			case j0 >= tl.i1 && tl.i1-i0 == tileRows && tl.j1-j0 == tileCols:
				full = append(full, tl)
			default:
				diag = append(diag, tl)
			}
		}
	}
	return append(full, diag...)
}

// flushTile adds the n pending rows' chunk sums to the tile's blocks, for
// each group of chunks in order: the group's values of the tile's columns
// packed, then, block row by block row, the row's weighted values packed
// and every block of the row that reaches the diagonal or above.
func (s *Stat) flushTile(tl tile, n int, sc *flushScratch) {
	k, cols := s.k, s.cols
	for g0 := 0; g0 < n; g0 += groupRows {
		gn := min(groupRows, n-g0)
		full, last := gn/ChunkRows, gn%ChunkRows
		s.packCols(sc.b[:], tl.j0, tl.j1, g0, gn)
		a := sc.a[:gn*microRows]
		for i0 := tl.i0; i0 < tl.i1; i0 += microRows {
			// Blocks whose last column is left of i0 lie below the
			// diagonal.
			jb := max(tl.j0, i0/cols*cols)
			if jb >= tl.j1 {
				continue
			}
			s.packRows(a, i0, g0, gn)
			for j0 := jb; j0 < tl.j1; j0 += cols {
				y := sc.b[(j0-tl.j0)*gn:][:gn*cols]
				if i0+microRows > k || j0+cols > k {
					s.edgeBlock(sc, i0, j0, a, y, full, last)
					continue
				}
				blockS := s.s[i0*k+j0:]
				if full > 0 {
					blockSum(blockS, k, a, y, cols, full, ChunkRows)
				}
				if last > 0 {
					off := full * ChunkRows
					blockSum(blockS, k, a[off*microRows:], y[off*cols:], cols, 1, last)
				}
			}
		}
	}
}

// packCols sets b[p·gn·cols + t·cols + q] = x_{g0+t}[j0+p·cols+q] for the
// gn pending rows from g0 and the columns [j0, j1) (a whole number of
// panels of cols, but at S's last column), widened exactly; columns past
// S's last are zero.
func (s *Stat) packCols(b []float64, j0, j1, g0, gn int) {
	k, cols := s.k, s.cols
	x := s.xs[g0*k:]
	whole := (j1 - j0) / cols
	if whole > 0 {
		widenPanels(b, x[j0:], k, gn, whole, cols)
	}
	if j := j0 + whole*cols; j < j1 {
		p := b[whole*gn*cols:][:gn*cols]
		for t := range gn {
			d := p[t*cols:][:cols]
			for q := range d {
				d[q] = 0
				if j+q < j1 {
					d[q] = float64(x[t*k+j+q])
				}
			}
		}
	}
}

// packRows sets a[t·microRows+r] = ω_t·x_t[i0+r] for the gn pending rows
// from g0 (the value the kernels multiply by x_t[j]: one rounded product
// of the widened value, the same for every block that reads it); rows past
// S's last are zero.
func (s *Stat) packRows(a []float64, i0, g0, gn int) {
	k := s.k
	x := s.xs[g0*k+i0:]
	w := s.ws[g0 : g0+gn]
	if i0+microRows <= k {
		weightRows(a, x, k, w)
		return
	}
	for t, wt := range w {
		d := a[t*microRows:][:microRows]
		for r := range d {
			d[r] = 0
			if i0+r < k {
				d[r] = float64(wt * float64(x[t*k+r]))
			}
		}
	}
}

// widenPanels sets b[p·n·cols + t·cols + q] = x[t·xs + p·cols + q] for
// t < n, p < panels and q < cols, widened exactly.
func widenPanels(b []float64, x []float32, xs, n, panels, cols int) {
	_ = b[panels*n*cols-1]
	_ = x[(n-1)*xs+panels*cols-1]
	if useAVX && cols%8 == 0 {
		widenPanelsAVX(&b[0], &x[0], xs, n, panels, cols)
		return
	}
	widenPanelsGo(b, x, xs, n, panels, cols)
}

// widenPanelsGo is widenPanels in Go, the reference of the assembly.
func widenPanelsGo(b []float64, x []float32, xs, n, panels, cols int) {
	for p := range panels {
		for t := range n {
			d := b[(p*n+t)*cols:][:cols]
			for q, v := range x[t*xs+p*cols:][:cols] {
				d[q] = float64(v)
			}
		}
	}
}

// weightRows sets a[t·microRows+r] = w[t]·x[t·xs+r] for t < len(w) and
// r < microRows, x widened exactly and the product rounded once.
func weightRows(a []float64, x []float32, xs int, w []float64) {
	n := len(w)
	_ = a[n*microRows-1]
	_ = x[(n-1)*xs+microRows-1]
	if useAVX {
		weightRowsAVX(&a[0], &x[0], xs, &w[0], n)
		return
	}
	weightRowsGo(a, x, xs, w)
}

// weightRowsGo is weightRows in Go, the reference of the assembly.
func weightRowsGo(a []float64, x []float32, xs int, w []float64) {
	for t, wt := range w {
		x := (*[microRows]float32)(x[t*xs:])
		d := (*[microRows]float64)(a[t*microRows:])
		for r, v := range x {
			d[r] = float64(wt * float64(v))
		}
	}
}

// edgeBlock is flushTile's block at rows i0… and columns j0… when it
// reaches past S's last row or column: the entries inside S are copied
// into a whole block, the kernel adds the chunk sums to it and they are
// copied back.
func (s *Stat) edgeBlock(sc *flushScratch, i0, j0 int, a, y []float64, full, last int) {
	k, cols := s.k, s.cols
	e := sc.edge[:microRows*cols]
	clear(e)
	ri, cj := min(microRows, k-i0), min(cols, k-j0)
	for r := range ri {
		copy(e[r*cols:][:cj], s.s[(i0+r)*k+j0:][:cj])
	}
	if full > 0 {
		blockSum(e, cols, a, y, cols, full, ChunkRows)
	}
	if last > 0 {
		off := full * ChunkRows
		blockSum(e, cols, a[off*microRows:], y[off*cols:], cols, 1, last)
	}
	for r := range ri {
		copy(s.s[(i0+r)*k+j0:][:cj], e[r*cols:][:cj])
	}
}

// blockCols is the width of flush's blocks: 16 columns (two 512-bit
// registers) on CPUs with AVX-512, else 8 (two 256-bit ones).
func blockCols() int {
	if useAVX512 {
		return 16
	}
	return 8
}

// blockSum adds to the microRows×cols block of S at s (rows ss apart) the
// sums of chunks consecutive chunks of n rows, in chunk order: for each
// chunk c, acc[r][q] = Σ_{t<n} a[(c·n+t)·microRows+r]·y[(c·n+t)·cols+q],
// each sum in t order from +0 with the products rounded before they are
// added (no FMA on any platform), then s[r·ss+q] += acc[r][q].
func blockSum(s []float64, ss int, a, y []float64, cols, chunks, n int) {
	_ = s[(microRows-1)*ss+cols-1]
	_ = a[chunks*n*microRows-1]
	_ = y[chunks*n*cols-1]
	switch {
	case cols == 16 && useAVX512:
		block8x16SAVX512(&s[0], ss, &a[0], &y[0], chunks, n)
	case cols == 8 && useAVX:
		// Two blocks of four rows: AVX2 has registers for 4×8 sums.
		block4x8SAVX(&s[0], ss, &a[0], &y[0], chunks, n)
		block4x8SAVX(&s[4*ss], ss, &a[4], &y[0], chunks, n)
	default:
		blockSumGo(s, ss, a, y, cols, chunks, n)
	}
}

// blockSumGo is blockSum in Go, the reference of the assembly.
func blockSumGo(s []float64, ss int, a, y []float64, cols, chunks, n int) {
	blockRowsGo(s, ss, a, microRows, y, cols, chunks, n)
}

// blockRowsGo is blockSumGo for the first m ≤ microRows rows of the block
// (the rows of a still microRows apart).
func blockRowsGo(s []float64, ss int, a []float64, m int, y []float64, cols, chunks, n int) {
	for c := range chunks {
		a, y := a[c*n*microRows:], y[c*n*cols:]
		for r := range m {
			var acc [16]float64
			for t := range n {
				p := a[t*microRows+r]
				for q, v := range y[t*cols:][:cols] {
					acc[q] += float64(p * v)
				}
			}
			row := s[r*ss:][:cols]
			for q := range row {
				row[q] += acc[q]
			}
		}
	}
}

// spread calls f(q, g) for q = 0, 1, …, n−1 in that order of start, on
// up to threads goroutines g (0 when threads ≤ 1, on the caller's). Each q
// must write its own part of the output: which goroutine runs it then
// changes no bit.
func spread(threads, n int, f func(q, g int)) {
	threads = min(threads, n)
	if threads <= 1 {
		for q := range n {
			f(q, 0)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				q := int(next.Add(1) - 1)
				if q >= n {
					return
				}
				f(q, g)
			}
		}()
	}
	wg.Wait()
}

// mirrorBlock is the side of the square blocks mirrorUpper copies at a
// time: two blocks of float64 (the source rows and the destination
// columns) stay in the L1 cache.
const mirrorBlock = 32

// mirrorUpper sets the lower triangle of the k×k matrix s to its upper
// triangle, s[j][i] = s[i][j] for i < j, block by block, so that the
// column writes of a block land on mirrorBlock rows rather than on k; the
// block rows on up to threads goroutines (each writes its own columns).
func mirrorUpper(s []float64, k, threads int) {
	spread(threads, (k+mirrorBlock-1)/mirrorBlock, func(q, _ int) {
		i0 := q * mirrorBlock
		i1 := min(i0+mirrorBlock, k)
		for j0 := i0; j0 < k; j0 += mirrorBlock {
			j1 := min(j0+mirrorBlock, k)
			for i := i0; i < i1; i++ {
				row := s[i*k : (i+1)*k]
				for j := max(j0, i+1); j < j1; j++ {
					s[j*k+i] = row[j]
				}
			}
		}
	})
}

// Finish adds the last partial chunk, mirrors the upper triangle of S into
// the lower one and checks that S is finite. Further Adds are refused;
// Finish may be called again.
func (s *Stat) Finish() error {
	if !s.done {
		s.flush()
		mirrorUpper(s.s, s.k, s.threads)
		s.xs, s.ws, s.scratch = nil, nil, nil
		s.done = true
	}
	for i, v := range s.s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return &NonFiniteError{Row: i / s.k, Col: i % s.k, Value: v}
		}
	}
	if math.IsNaN(s.weight) || math.IsInf(s.weight, 0) || math.IsNaN(s.weight2) || math.IsInf(s.weight2, 0) {
		return &NonFiniteError{Row: -1, Col: -1, Value: s.weight}
	}
	return nil
}

// Pool returns the sum of finished stats of one dimension: S, Ω, Ω₂ and n
// added in the order given (the pooled routed statistics of a layer).
func Pool(stats []*Stat) (*Stat, error) {
	if len(stats) == 0 {
		return nil, &InputError{What: "Pool", Msg: "no statistics"}
	}
	k := stats[0].k
	p := &Stat{k: k, s: make([]float64, k*k), done: true}
	for i, st := range stats {
		if st.k != k || !st.done {
			return nil, &InputError{What: "Pool", Msg: fmt.Sprintf("statistic %d: K = %d (want %d), finished %v", i, st.k, k, st.done)}
		}
		for j, v := range st.s {
			p.s[j] += v
		}
		p.weight += st.weight
		p.weight2 += st.weight2
		p.tokens += st.tokens
	}
	return p, nil
}

// Hessian returns H = 2·S/Ω (docs/gptq.md §1), or nil when Ω = 0.
func (s *Stat) Hessian() []float64 {
	if s.weight == 0 {
		return nil
	}
	h := make([]float64, len(s.s))
	for i, v := range s.s {
		h[i] = 2 * v / s.weight
	}
	return h
}

// Shrunk returns the expert Hessian shrunk toward the pool
// (docs/gptq.md §3): H = (n·H_e + κ·H_pool)/(n + κ) with n = NEff of e,
// and the weight n/(n + κ) of the expert's own statistics. An expert
// without rows gets H_pool; κ = 0 gives H_e unchanged. The pool must have rows.
func Shrunk(e, pool *Stat, kappa float64) ([]float64, float64, error) {
	if !e.done || !pool.done || e.k != pool.k {
		return nil, 0, &InputError{What: "Shrunk", Msg: "statistics unfinished or of different dimensions"}
	}
	if pool.weight == 0 {
		return nil, 0, &InputError{What: "Shrunk", Msg: "the pool has no rows"}
	}
	if !(kappa >= 0) || math.IsInf(kappa, 0) {
		return nil, 0, &InputError{What: "Shrunk", Msg: fmt.Sprintf("pseudo-count %v", kappa)}
	}
	n := e.NEff()
	if n == 0 || e.weight == 0 {
		return pool.Hessian(), 0, nil
	}
	h := make([]float64, len(e.s))
	den := n + kappa
	for i := range h {
		he := 2 * e.s[i] / e.weight
		hp := 2 * pool.s[i] / pool.weight
		h[i] = (float64(n*he) + float64(kappa*hp)) / den
	}
	return h, n / den, nil
}

// InputError reports a call that cannot be carried out as asked.
type InputError struct {
	What string
	Msg  string
}

func (e *InputError) Error() string { return fmt.Sprintf("hessian: %s: %s", e.What, e.Msg) }

// NonFiniteError reports a NaN or Inf in accumulated statistics: an engine
// or data error, never something damping should hide (docs/gptq.md §5).
// Row and Col locate the first bad entry of S (−1 for the weight sums).
type NonFiniteError struct {
	Row, Col int
	Value    float64
}

func (e *NonFiniteError) Error() string {
	if e.Row < 0 {
		return fmt.Sprintf("hessian: the row weights sum to %v", e.Value)
	}
	return fmt.Sprintf("hessian: S[%d][%d] is %v", e.Row, e.Col, e.Value)
}

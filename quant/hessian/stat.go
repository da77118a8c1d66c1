package hessian

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// ChunkRows is the number of rows a Stat collects before it adds their
// products to S: the partial sum of each chunk is formed in one fixed order
// and added to S in chunk order (gptq.md §2), so S depends on the rows and
// their order only, never on how they were handed to Add.
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
	// pass holds). xr holds the rows by panels of cols columns,
	// xr[(j/cols)·rows·cols + t·cols + j%cols] = x_t[j], so that a panel's
	// values for every pending row are one contiguous run the kernel reads
	// from the cache; xw[i·rows+t] = ω_t·x_t[i], feature by feature, so that
	// a block's four rows i are four strided scalars. The padding (j ≥ k up
	// to a whole panel, i ≥ k up to a multiple of 4) stays zero.
	xr, xw  []float64
	ws      []float64 // ws[t]: the weight ω_t of pending row t
	cols    int
	rows    int
	pending int
	done    bool
	// threads is how many goroutines a flush may use (SetThreads).
	threads int
}

// statBufferBytes bounds a Stat's pending rows (xr and xw together): as
// many whole chunks as fit, at least one and at most maxChunks. Passes over
// S, which is far larger than the caches at real widths (32 MB for K =
// 2048), then come once per several chunks instead of once per chunk.
const (
	statBufferBytes = 16 << 20
	maxChunks       = 8
)

// NewStat returns an empty Stat for inputs of dimension k ≥ 1.
func NewStat(k int) *Stat {
	cols := blockCols()
	k4, kp := (k+3)&^3, (k+cols-1)/cols*cols
	chunks := max(1, min(maxChunks, statBufferBytes/(8*ChunkRows*(k4+kp))))
	rows := chunks * ChunkRows
	return &Stat{k: k, s: make([]float64, k*k), cols: cols, rows: rows, xr: make([]float64, rows*kp), xw: make([]float64, k4*rows), ws: make([]float64, rows)}
}

// SetThreads lets the Stat add its pending rows to S on up to n goroutines
// (default 1): the blocks of S are independent, each formed by one
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
	t, cols, rows := s.pending, s.cols, s.rows
	for j0 := 0; j0 < len(x); j0 += cols {
		xr := s.xr[j0*rows+t*cols:][:min(cols, len(x)-j0)]
		for b := range xr {
			xr[b] = float64(x[j0+b])
		}
	}
	// The weighted copy xw is formed at the flush (weightRows), panel by
	// panel: written here, row by row, each value would land on its own
	// page.
	s.ws[t] = w
	s.weight += w
	s.weight2 += float64(w * w)
	s.tokens++
	s.pending++
	if s.pending == rows {
		s.flush()
	}
	return nil
}

// flush adds the pending rows' chunk sums Σ_t ω_t·x_t·x_tᵀ (each chunk of
// ChunkRows rows summed alone, over t in order) to the upper triangle of S
// in chunk order, by blocks of 4 rows × cols columns: a panel of columns at
// a time, so that its pending values stay in the cache while every block
// of rows above the diagonal reads them. Blocks inside S also write their
// entries below the diagonal, which Finish overwrites with the mirror of
// the upper triangle; blocks at the edges write only their entries in it.
func (s *Stat) flush() {
	n := s.pending
	if n == 0 {
		return
	}
	k, cols := s.k, s.cols
	panels := (k + cols - 1) / cols
	s.weightRows(n)
	if s.threads <= 1 || panels < 2 {
		for p := range panels {
			s.flushPanel(p*cols, n)
		}
	} else {
		// The widest panels (most blocks) first, handed out in order.
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(s.threads, panels) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					p := panels - 1 - int(next.Add(1)-1)
					if p < 0 {
						return
					}
					s.flushPanel(p*cols, n)
				}
			}()
		}
		wg.Wait()
	}
	s.pending = 0
}

// flushPanel is flush's work on the panel of columns from jb: every block
// of rows that reaches the diagonal or above.
// weightRows sets xw[i·rows+t] = ω_t·x_t[i] for the n pending rows from
// their float64 copies in xr (the same value Add would form from x_t[i]):
// a panel of cols features at a time, each pending row's cols values read
// together and written to cols rows of xw, each in order of t.
func (s *Stat) weightRows(n int) {
	k, cols, rows := s.k, s.cols, s.rows
	for j0 := 0; j0 < k; j0 += cols {
		c := min(cols, k-j0)
		panel := s.xr[j0*rows:]
		for t, w := range s.ws[:n] {
			xr := panel[t*cols:][:c]
			for b, v := range xr {
				s.xw[(j0+b)*rows+t] = float64(w * v)
			}
		}
	}
}

func (s *Stat) flushPanel(jb, n int) {
	k, cols, rows := s.k, s.cols, s.rows
	full, last := n/ChunkRows, n%ChunkRows
	y := s.xr[jb*rows:]
	inside := jb+cols <= k
	for ib := 0; ib < min(k, jb+cols); ib += 4 {
		w := s.xw[ib*rows:]
		if inside && ib+4 <= k {
			if full > 0 {
				block4S(s.s[ib*k+jb:], k, w, rows, y, cols, full, ChunkRows)
			}
			if last > 0 {
				off := full * ChunkRows
				block4S(s.s[ib*k+jb:], k, w[off:], rows, y[off*cols:], cols, 1, last)
			}
			continue
		}
		s.edgeBlock(ib, jb, w, y, n)
	}
}

// edgeBlock is flush's block at rows ib… and columns jb… when it reaches
// past S's last row or column: each chunk's sums formed by the Go kernel
// and only the entries inside the upper triangle added.
func (s *Stat) edgeBlock(ib, jb int, w, y []float64, n int) {
	k, cols, rows := s.k, s.cols, s.rows
	for c0 := 0; c0 < n; c0 += ChunkRows {
		var acc [4][16]float64
		block4Go(&acc, w[c0:], rows, y[c0*cols:], cols, min(ChunkRows, n-c0), cols)
		for a := range 4 {
			i := ib + a
			if i >= k {
				break
			}
			row := s.s[i*k:]
			for b := range cols {
				if j := jb + b; j >= i && j < k {
					row[j] += acc[a][b]
				}
			}
		}
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

// block4S adds to the 4×cols block of S at s (rows ss apart) the sums of
// chunks consecutive chunks of n rows, in chunk order: for each chunk c,
// acc[a][b] = Σ_{t<n} w[a·ws+c·n+t]·y[(c·n+t)·cols+b], each sum in t order
// with the products rounded before they are added (no FMA on any
// platform), then s[a·ss+b] += acc[a][b]. The block must lie inside S.
func block4S(s []float64, ss int, w []float64, ws int, y []float64, cols, chunks, n int) {
	_ = s[3*ss+cols-1]
	_ = w[3*ws+chunks*n-1]
	_ = y[chunks*n*cols-1]
	switch {
	case cols == 16 && useAVX512:
		block4x16SAVX512(&s[0], ss, &w[0], ws, &y[0], chunks, n)
	case cols == 8 && useAVX:
		block4x8SAVX(&s[0], ss, &w[0], ws, &y[0], chunks, n)
	default:
		block4SGo(s, ss, w, ws, y, cols, chunks, n)
	}
}

// block4SGo is block4S in Go, the reference of the assembly.
func block4SGo(s []float64, ss int, w []float64, ws int, y []float64, cols, chunks, n int) {
	for c := range chunks {
		var acc [4][16]float64
		block4Go(&acc, w[c*n:], ws, y[c*n*cols:], cols, n, cols)
		for a := range 4 {
			row := s[a*ss:][:cols]
			for b := range row {
				row[b] += acc[a][b]
			}
		}
	}
}

// block4Go sets acc[a][b] = Σ_{t<n} w[a·ws+t]·y[t·ys+b] for a < 4 and
// b < cols (at most 16), each sum in t order, the products rounded before
// they are added.
func block4Go(acc *[4][16]float64, w []float64, ws int, y []float64, ys, n, cols int) {
	for a := range 4 {
		wa := w[a*ws:][:n]
		var c [16]float64
		for t, p := range wa {
			yt := y[t*ys:][:cols]
			for b, v := range yt {
				c[b] += float64(p * v)
			}
		}
		acc[a] = c
	}
}

// mirrorBlock is the side of the square blocks mirrorUpper copies at a
// time: two blocks of float64 (the source rows and the destination
// columns) stay in the L1 cache.
const mirrorBlock = 32

// mirrorUpper sets the lower triangle of the k×k matrix s to its upper
// triangle, s[j][i] = s[i][j] for i < j, block by block, so that the
// column writes of a block land on mirrorBlock rows rather than on k.
func mirrorUpper(s []float64, k int) {
	for i0 := 0; i0 < k; i0 += mirrorBlock {
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
	}
}

// Finish adds the last partial chunk, mirrors the upper triangle of S into
// the lower one and checks that S is finite. Further Adds are refused;
// Finish may be called again.
func (s *Stat) Finish() error {
	if !s.done {
		s.flush()
		mirrorUpper(s.s, s.k)
		s.xr, s.xw, s.ws = nil, nil, nil
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

// Hessian returns H = 2·S/Ω (gptq.md §1), or nil when Ω = 0.
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

// Shrunk returns the expert Hessian shrunk toward the pool (gptq.md §3):
// H = (n·H_e + κ·H_pool)/(n + κ) with n = NEff of e, and the weight
// n/(n + κ) of the expert's own statistics. An expert without rows gets
// H_pool; κ = 0 gives H_e unchanged. The pool must have rows.
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
// or data error, never something damping should hide (gptq.md §5). Row and
// Col locate the first bad entry of S (−1 for the weight sums).
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

package hessian

import (
	"fmt"
	"math"
)

// ChunkRows is the number of rows a Stat collects before it adds their
// products to S: the partial sum of each chunk is formed in one fixed order
// and added to S in chunk order (gptq.md §2), so S depends on the rows and
// their order only, never on how they were handed to Add.
const ChunkRows = 64

// Stat accumulates the second-moment statistics of one input of one matrix:
// S = Σ_t ω_t·x_t·x_tᵀ (float64, K×K), Ω = Σ ω_t, Ω₂ = Σ ω_t² and the raw row
// count n. Rows arrive as float32 and are widened exactly before any
// product. Until Finish only the upper triangle of S is accumulated.
type Stat struct {
	k       int
	s       []float64
	weight  float64
	weight2 float64
	tokens  int
	// The pending chunk: xr[t*kr+j] = x_t[j], row by row, so that a row's
	// values for a block of columns j are contiguous (vector loads), and
	// xw[i*ChunkRows+t] = ω_t·x_t[i], feature by feature, so that a block's
	// four rows i are four strided scalars. The padding (j ≥ k up to kr, a
	// multiple of the widest block, 16 columns; i ≥ k up to a multiple of
	// 4) stays zero.
	xr, xw  []float64
	kr      int
	pending int
	done    bool
}

// NewStat returns an empty Stat for inputs of dimension k ≥ 1.
func NewStat(k int) *Stat {
	k4, kr := (k+3)&^3, (k+15)&^15
	return &Stat{k: k, s: make([]float64, k*k), kr: kr, xr: make([]float64, ChunkRows*kr), xw: make([]float64, k4*ChunkRows)}
}

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
	xr := s.xr[t*s.kr:][:len(x)]
	for i, v := range x {
		f := float64(v)
		xr[i] = f
		s.xw[i*ChunkRows+t] = float64(w * f)
	}
	s.weight += w
	s.weight2 += float64(w * w)
	s.tokens++
	s.pending++
	if s.pending == ChunkRows {
		s.flush()
	}
	return nil
}

// flush adds the pending chunk's Σ_t ω_t·x_t·x_tᵀ to the upper triangle of
// S, in blocks of 4 rows × blockCols() columns whose sums each run over t in
// order (block4), so S is the same whichever kernel runs them.
func (s *Stat) flush() {
	n := s.pending
	if n == 0 {
		return
	}
	k, cols := s.k, blockCols()
	for ib := 0; ib < k; ib += 4 {
		for jb := ib - ib%cols; jb < k; jb += cols {
			var acc [4][16]float64
			block4(&acc, s.xw[ib*ChunkRows:], s.xr[jb:], s.kr, n, cols)
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
	// Clear the chunk so that rows of a short final chunk never see stale
	// values (the kernel reads only the first n, but padding must stay 0).
	clear(s.xr)
	clear(s.xw)
	s.pending = 0
}

// blockCols is the width of flush's blocks: 16 columns (two 512-bit
// registers) on CPUs with AVX-512, else 8 (two 256-bit ones).
func blockCols() int {
	if useAVX512 {
		return 16
	}
	return 8
}

// block4 sets acc[a][b] = Σ_{t<n} w[a·ChunkRows+t]·y[t·ys+b] for a < 4 and
// b < cols (8 or 16), each sum in t order, the products rounded before they
// are added (no FMA on any platform). w holds four rows of ω·x, ChunkRows
// apart; y the chunk's rows of x from the block's first column, ys apart.
func block4(acc *[4][16]float64, w, y []float64, ys, n, cols int) {
	if n == 0 {
		return
	}
	_ = w[3*ChunkRows+n-1]
	_ = y[(n-1)*ys+cols-1]
	switch {
	case cols == 16 && useAVX512:
		block4x16AVX512(acc, &w[0], &y[0], ys, n)
	case cols == 8 && useAVX:
		block4x8AVX(acc, &w[0], &y[0], ys, n)
	default:
		block4Go(acc, w, y, ys, n, cols)
	}
}

// block4Go is block4 in Go, the reference of the assembly.
func block4Go(acc *[4][16]float64, w, y []float64, ys, n, cols int) {
	for a := range 4 {
		wa := w[a*ChunkRows:][:n]
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

// Finish adds the last partial chunk, mirrors the upper triangle of S into
// the lower one and checks that S is finite. Further Adds are refused;
// Finish may be called again.
func (s *Stat) Finish() error {
	if !s.done {
		s.flush()
		k := s.k
		for i := range k {
			for j := i + 1; j < k; j++ {
				s.s[j*k+i] = s.s[i*k+j]
			}
		}
		s.xr, s.xw = nil, nil
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

package gptq

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/lfmq/lfmq/format/bfp"
)

// Options configures a Factor.
type Options struct {
	// Alpha is the relative damping α: λ = α·mean_k(H_kk) is added to every
	// diagonal entry (docs/gptq.md §4 step 3). It must be finite and ≥ 0.
	Alpha float64
	// ActOrder quantizes the input indices in order of decreasing H_kk
	// (ties to the lower index) instead of 0, 1, …, K−1.
	ActOrder bool
	// BlockSize is the number of rows whose error feedback to the later rows
	// is deferred and applied together (GPTQ's lazy batch). It changes the
	// memory access pattern, never a bit of the result. Must be ≥ 1.
	BlockSize int
	// Retries is how many times a failed factorization is retried with α
	// multiplied by RetryFactor (docs/gptq.md §5: 3 and 10).
	Retries     int
	RetryFactor float64
	// Exponent chooses each group's shared exponent in the row loop; the
	// zero value is the plain packer's maximum. HessianCost is what
	// ExponentHessian minimises.
	Exponent    ExponentRule
	HessianCost HessianCost
	// Threads is the number of goroutines one solve may use: NewFactor's
	// factorization and inverse and Quantize's deferred updates split
	// their independent results over them. 0 or 1: the caller's goroutine
	// only. It changes no bit of any result.
	Threads int
	// Stop, when closed (a context's Done), makes NewFactor and the
	// Factor's Quantize give up at their next panel or block with
	// ErrStopped, so that a long solve ends promptly. Nil: never.
	Stop <-chan struct{}
}

// DefaultOptions returns the defaults of docs/gptq.md §6 with damping alpha.
func DefaultOptions(alpha float64) Options {
	return Options{Alpha: alpha, ActOrder: true, BlockSize: 128, Retries: 3, RetryFactor: 10}
}

// ErrStopped is returned by a solve that gave up because Options.Stop was
// closed.
var ErrStopped = errors.New("gptq: solve stopped")

// ErrFactor is wrapped by every *FactorError.
var ErrFactor = errors.New("gptq: Hessian factorization failed")

// FactorError reports that H + λI could not be factored (a non-positive
// pivot or a non-finite factor) even at the largest damping tried.
type FactorError struct {
	// Alpha is the last relative damping tried and Retries the number of
	// retries made.
	Alpha   float64
	Retries int
	// Index is the permuted row at which the last attempt failed.
	Index  int
	Reason string
}

func (e *FactorError) Error() string {
	return fmt.Sprintf("gptq: Hessian factorization failed at row %d (%s) with relative damping %g after %d retries", e.Index, e.Reason, e.Alpha, e.Retries)
}

// Is makes errors.Is(err, ErrFactor) true.
func (e *FactorError) Is(target error) bool { return target == ErrFactor }

// InputError reports arguments that cannot be solved: wrong lengths, a
// non-finite value, a bad option.
type InputError struct {
	What string
	Msg  string
}

func (e *InputError) Error() string { return fmt.Sprintf("gptq: %s: %s", e.What, e.Msg) }

// Factor is the part of a GPTQ solve that depends only on the Hessian:
// dead rows, the processing order, the damping actually used and the upper
// triangular U with (H + λI)⁻¹ = UᵀU in the permuted frame.
type Factor struct {
	k         int
	perm      []int  // perm[i]: original input index of permuted row i
	dead      []bool // by original input index: H_kk was 0
	u         []float64
	alpha     float64
	lambda    float64
	retries   int
	blockSize int
	exponent  ExponentRule
	cost      HessianCost
	threads   int
	stop      <-chan struct{}
}

// NewFactor prepares a K×K Hessian h (row-major, symmetric; not modified)
// for solving (docs/gptq.md §4 steps 1–4):
//
//  1. dead rows: an index with H_kk = 0 gets H_kk = 1 (its weights are
//     zeroed by Quantize);
//  2. act-order: a stable sort of the indices by H_kk, descending;
//  3. λ = α·mean(H_kk) added to the diagonal;
//  4. U, the upper Cholesky factor of (H + λI)⁻¹.
//
// U is computed as the inverse of R, the upper triangular factor of
// H + λI = R·Rᵀ (a Cholesky factorization run from the last index to the
// first). By the uniqueness of Cholesky factors this is the same U as
// factoring H, inverting and factoring the inverse again, with half the
// work and without forming H⁻¹, whose rounding would only add error.
//
// A failed factorization (non-positive pivot, non-finite value) is retried
// with α·RetryFactor up to opts.Retries times; after that NewFactor returns
// a *FactorError. A non-finite entry of h is an *InputError: that is a
// statistics bug, not something damping should hide.
func NewFactor(h []float64, k int, opts Options) (*Factor, error) {
	if k < 1 || len(h) != k*k {
		return nil, &InputError{What: "Hessian", Msg: fmt.Sprintf("%d values for K = %d", len(h), k)}
	}
	if opts.BlockSize < 1 {
		return nil, &InputError{What: "BlockSize", Msg: fmt.Sprintf("%d; must be ≥ 1", opts.BlockSize)}
	}
	if !(opts.Alpha >= 0) || math.IsInf(opts.Alpha, 0) {
		return nil, &InputError{What: "Alpha", Msg: fmt.Sprintf("%v; must be finite and ≥ 0", opts.Alpha)}
	}
	if opts.Retries < 0 || (opts.Retries > 0 && !(opts.RetryFactor > 1)) {
		return nil, &InputError{What: "Retries", Msg: fmt.Sprintf("%d retries with factor %v", opts.Retries, opts.RetryFactor)}
	}
	for i, v := range h {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, &InputError{What: "Hessian", Msg: fmt.Sprintf("entry (%d, %d) is %v", i/k, i%k, v)}
		}
	}
	if opts.Exponent > ExponentHessian || opts.HessianCost > CostLookahead {
		return nil, &InputError{What: "Exponent", Msg: fmt.Sprintf("rule %v with cost %v", opts.Exponent, opts.HessianCost)}
	}
	if opts.Threads < 0 {
		return nil, &InputError{What: "Threads", Msg: fmt.Sprintf("%d; must be ≥ 0", opts.Threads)}
	}
	threads := max(1, opts.Threads)
	return newFactorWith(h, k, opts, func(hp, u []float64, k int) (int, string) {
		return factorInverseStop(hp, u, k, threads, opts.Stop)
	})
}

// newFactorWith is NewFactor after its input checks, with the factorization
// inv (factorInverse on the Factor's goroutines; the tests' reference
// passes the original one).
func newFactorWith(h []float64, k int, opts Options, inv func(hp, u []float64, k int) (int, string)) (*Factor, error) {
	f := &Factor{k: k, perm: make([]int, k), dead: make([]bool, k), blockSize: opts.BlockSize,
		exponent: opts.Exponent, cost: opts.HessianCost, threads: max(1, opts.Threads), stop: opts.Stop}
	diag := make([]float64, k)
	var sum float64
	for i := range k {
		diag[i] = h[i*k+i]
		if diag[i] == 0 {
			f.dead[i], diag[i] = true, 1
		}
		sum += diag[i]
		f.perm[i] = i
	}
	if opts.ActOrder {
		sort.SliceStable(f.perm, func(a, b int) bool { return diag[f.perm[a]] > diag[f.perm[b]] })
	}
	mean := sum / float64(k)
	hp := getScratch(k * k) // every entry is written before it is read
	defer putScratch(hp)
	f.u = make([]float64, k*k)
	alpha := opts.Alpha
	var last *FactorError
	for try := 0; try <= opts.Retries; try++ {
		if try > 0 {
			alpha *= opts.RetryFactor
		}
		lambda := float64(alpha * mean)
		for i, oi := range f.perm {
			row := hp[i*k : (i+1)*k]
			for j, oj := range f.perm {
				row[j] = h[oi*k+oj]
			}
			row[i] = diag[oi] + lambda
		}
		idx, reason := inv(hp, f.u, k)
		if idx == stoppedIndex {
			return nil, ErrStopped
		}
		if idx < 0 {
			f.alpha, f.lambda, f.retries = alpha, lambda, try
			return f, nil
		}
		last = &FactorError{Alpha: alpha, Retries: try, Index: idx, Reason: reason}
	}
	return nil, last
}

// K returns the number of input indices.
func (f *Factor) K() int { return f.k }

// Alpha returns the relative damping that succeeded.
func (f *Factor) Alpha() float64 { return f.alpha }

// Lambda returns the absolute damping λ added to the diagonal.
func (f *Factor) Lambda() float64 { return f.lambda }

// Retries returns the number of failed factorizations before the one used.
func (f *Factor) Retries() int { return f.retries }

// Perm returns a copy of the processing order: element i is the original
// input index quantized at step i.
func (f *Factor) Perm() []int { return append([]int(nil), f.perm...) }

// Dead reports whether input index k had H_kk = 0.
func (f *Factor) Dead(k int) bool { return f.dead[k] }

// Result is one quantized matrix.
type Result struct {
	// Packed is the BFP tile stream of the weight
	// (docs/lfmq-1.md, "How a BFP tensor is stored"), canonical.
	Packed []byte
	// Q is the decoded weight, [out, in] row-major like the input.
	Q []float32
	// Loss is the sum of the per-row GPTQ losses Σ (w−q)²/(2·U_ii²). It
	// equals ½·tr(ΔWᵀ (H+λI) ΔW) for ΔW = W − Q with W's dead rows zeroed.
	Loss float64
}

// Quantize runs the row loop of docs/gptq.md §4 step 5 on w, a weight
// [out, in] (Hugging Face layout, in = K), and returns the BFP result in
// format fm. Each row of W_tt is rounded to float32 and quantized group
// by group, the exponent of each 16-wide group chosen from its current,
// error-updated values by the Factor's ExponentRule (by default the plain
// packer's maximum), its error is propagated to the later rows, and the
// rows are placed into tiles at their original index.
//
// The update of every element is applied one row's error at a time in row
// order, within a block and across blocks alike, so the block size changes
// no rounding and no byte. A wide matrix is solved in bands of outputs
// (quantizeBandBytes), which changes no byte either and bounds the float64
// copy. Quantize may be called concurrently.
func (f *Factor) Quantize(fm bfp.Format, w []float32, out int) (*Result, error) {
	k := f.k
	if out < 1 || len(w) != out*k {
		return nil, &InputError{What: "weight", Msg: fmt.Sprintf("%d values for [%d, %d]", len(w), out, k)}
	}
	s, err := f.NewBandSolver(fm, out)
	if err != nil {
		return nil, err
	}
	q := make([]float32, out*k)
	if err := s.Solve(w, q); err != nil {
		s.Close()
		return nil, err
	}
	res, err := s.Finish()
	if err != nil {
		return nil, err
	}
	res.Q = q
	return res, nil
}

// BandSolver is Quantize for a weight given band by band of outputs (rows
// of the Hugging Face layout), so that a caller can read, convert and
// solve a matrix too large to hold whole in float32, such as a model's LM
// head: Solve takes each band in output order, and Finish gives the
// packed result and the loss, with the bits of Quantize on the whole
// weight (GPTQ treats the outputs independently given the factor; the
// per-row sums of the loss continue across the bands in output order). A
// BandSolver is used from one goroutine.
type BandSolver struct {
	st   *bandState
	out  int // the weight's outputs
	next int // the outputs solved so far
}

// NewBandSolver returns a BandSolver for a weight [out, K] in format fm.
func (f *Factor) NewBandSolver(fm bfp.Format, out int) (*BandSolver, error) {
	if out < 1 {
		return nil, &InputError{What: "weight", Msg: fmt.Sprintf("%d outputs", out)}
	}
	b, err := bfp.NewBuilder(fm, out, f.k)
	if err != nil {
		return nil, &InputError{What: "weight", Msg: err.Error()}
	}
	return &BandSolver{st: &bandState{f: f, fm: fm, b: b, sq: make([]float64, f.k)}, out: out}, nil
}

// Solve quantizes the next band of outputs: w holds their weights [nb, K]
// row-major, nb = len(w)/K, and q receives their decoded values (the same
// length). A band starts where the last one ended; every band but the last
// has a multiple of 32 outputs (the tile width), so that no exponent group
// straddles two. Solve gives up with ErrStopped at its next block of rows
// once the Factor's Stop channel is closed.
func (s *BandSolver) Solve(w, q []float32) error {
	k := s.st.f.k
	nb := len(w) / k
	n0 := s.next
	switch {
	case nb < 1 || len(w) != nb*k || len(q) != len(w):
		return &InputError{What: "band", Msg: fmt.Sprintf("%d weights and %d results for rows of %d", len(w), len(q), k)}
	case n0+nb > s.out:
		return &InputError{What: "band", Msg: fmt.Sprintf("outputs [%d, %d) past the weight's %d", n0, n0+nb, s.out)}
	case nb%bfp.TileDim != 0 && n0+nb != s.out:
		return &InputError{What: "band", Msg: fmt.Sprintf("%d outputs at %d: not a multiple of %d and not the last band", nb, n0, bfp.TileDim)}
	}
	for i, v := range w {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return &InputError{What: "weight", Msg: fmt.Sprintf("element %d is %v", n0*k+i, v)}
		}
	}
	band := quantizeBand(k, nb)
	for a := 0; a < nb; a += band {
		c := min(nb, a+band)
		if err := s.st.solve(w[a*k:c*k], q[a*k:c*k], n0+a, c-a); err != nil {
			return err
		}
	}
	s.next += nb
	return nil
}

// Finish returns the packed weight and the loss once every output has been
// solved (Result.Q is nil: the caller holds the decoded bands), and hands
// back the solver's scratch.
func (s *BandSolver) Finish() (*Result, error) {
	if s.next != s.out {
		return nil, &InputError{What: "band", Msg: fmt.Sprintf("%d of %d outputs solved", s.next, s.out)}
	}
	s.Close()
	f, k := s.st.f, s.st.f.k
	var loss float64
	for i := range k {
		uii := f.u[i*k+i]
		loss += s.st.sq[i] / float64(2*uii*uii)
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return nil, &InputError{What: "solve", Msg: fmt.Sprintf("loss is %v", loss)}
	}
	return &Result{Packed: s.st.b.Bytes(), Loss: loss}, nil
}

// Close hands back the solver's scratch without finishing, for a caller
// that gives up; Finish calls it.
func (s *BandSolver) Close() {
	putScratch(s.st.wp)
	s.st.wp = nil
}

// quantizeBandBytes bounds Quantize's float64 copy of W_tt: a matrix whose
// copy would be larger is solved in bands of outputs (columns of W_tt),
// each on its own. GPTQ treats the outputs independently given the factor
// (every update is per element, every exponent group lies within 16
// outputs of a row), so the bands change no bit; only the per-row sums of
// the loss cross them, and those are carried (Quantize's sq). Tests lower
// it.
var quantizeBandBytes = 64 << 20

// quantizeBand is the number of outputs in one band of Quantize for a
// matrix [out, k]: all of them when their float64 copy fits
// quantizeBandBytes, else a multiple of the tile width that fits.
func quantizeBand(k, out int) int {
	if int64(k)*int64(out)*8 <= int64(quantizeBandBytes) {
		return out
	}
	return max(bfp.TileDim, quantizeBandBytes/(8*k)&^(bfp.TileDim-1))
}

// QuantizeMemory is the most heap Quantize holds at once for a matrix
// [out, k] besides its result, in bytes: the band's float64 copy of W_tt
// and, per row of the lazy block, its errors and decoded values.
func QuantizeMemory(out, k, blockSize int) int64 {
	band := int64(quantizeBand(k, out))
	bs := int64(min(blockSize, k))
	return band*int64(k)*8 + bs*band*12
}

// bandState is what the bands of one Quantize call share: the factor, the
// format, the result's builder, the loss's per-row sums and the scratch of
// the widest band, reused by the next.
type bandState struct {
	f  *Factor
	fm bfp.Format
	b  *bfp.Builder
	sq []float64

	wp, errs, next []float64
	qb, r32, q32   []float32
	exps, codes    []uint8
	bits           []uint32
}

// grow returns s resliced to n, or a new slice when s is too short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// solve runs the row loop of Quantize over one band of out outputs starting
// at output n0: w and q are the band's rows of the weight and of the
// result ([out, k] each).
func (st *bandState) solve(w, q []float32, n0, out int) error {
	f, fm, b := st.f, st.fm, st.b
	k := f.k
	// wp is the band of W_tt in the permuted frame: row i holds input
	// perm[i] over the band's outputs, which is what each step reads and
	// the feedback updates.
	if cap(st.wp) < k*out { // the first band, or one wider than those before
		putScratch(st.wp)
		st.wp = getScratch(k * out)
	}
	wp := st.wp[:k*out]
	fillPermuted(wp, w, f.perm, f.dead, k, out)
	bs := min(f.blockSize, k)
	st.errs = grow(st.errs, bs*out)
	errs := st.errs
	// qb holds the block's decoded rows in the permuted frame until the
	// block ends and they are moved to their columns of q together.
	st.qb = grow(st.qb, bs*out)
	qb := st.qb
	st.r32, st.q32 = grow(st.r32, out), grow(st.q32, out)
	r32, q32 := st.r32, st.q32
	st.exps, st.codes = grow(st.exps, bfp.RowGroups(out)), grow(st.codes, bfp.PaddedDim(out))
	exps, codes := st.exps, st.codes
	st.bits = grow(st.bits, out)
	enc := &rowEncoder{fm: fm, rule: f.exponent, cost: f.cost, bits: st.bits}
	var next []float64 // the next row's pending values, for CostLookahead
	if f.exponent == ExponentHessian && f.cost == CostLookahead {
		st.next = grow(st.next, out)
		next = st.next
	}
	for b0 := 0; b0 < k; b0 += bs {
		if stopped(f.stop) {
			return ErrStopped
		}
		b1 := min(b0+bs, k)
		for i := b0; i < b1; i++ {
			row := wp[i*out : (i+1)*out]
			for n, v := range row {
				r32[n] = float32(v)
			}
			la := f.lookaheadAt(i, b0, b1, out, wp, errs, next)
			if err := enc.encode(row, r32, exps, codes, la); err != nil {
				return &InputError{What: "row", Msg: err.Error()}
			}
			if err := bfp.DecodeRow(fm, exps, codes, q32); err != nil {
				return &InputError{What: "row", Msg: err.Error()}
			}
			oi := f.perm[i]
			if err := b.SetRowPart(oi, n0, exps, codes); err != nil {
				return &InputError{What: "row", Msg: err.Error()}
			}
			uii := f.u[i*k+i]
			e := errs[(i-b0)*out : (i-b0+1)*out]
			sq := st.sq[i]
			for n, v := range row {
				d := v - float64(q32[n])
				sq += float64(d * d)
				e[n] = d / uii
			}
			st.sq[i] = sq
			copy(qb[(i-b0)*out:(i-b0+1)*out], q32)
			urow := f.u[i*k : (i+1)*k]
			for j := i + 1; j < b1; j++ {
				if uij := urow[j]; uij != 0 {
					subScaled(wp[j*out:(j+1)*out], uij, e)
				}
			}
		}
		// The deferred feedback of the block to every later row, applied
		// in the same per-row order as the updates inside the block.
		deferredUpdate(wp, f.u, errs, k, out, b0, b1, f.threads)
		scatterRows(q, qb, f.perm[b0:b1], k, out)
	}
	return nil
}

// transposeBytes is the size of the band of rows of an [out, k] float32
// matrix that fillPermuted reads together: a column is gathered across
// them, so they should fit the cache with room to spare. Tests lower it;
// it changes no bit.
var transposeBytes = 256 << 10

// transposeRows is the number of rows in fillPermuted's band, never fewer
// than eight.
func transposeRows(k int) int { return max(8, transposeBytes/(4*k)) }

// fillPermuted sets row i of wp (k rows of length out) to column perm[i] of
// w ([out, k], row-major) in float64, and the rows of dead inputs to zero.
// It walks w by bands of transposeRows rows, so that the gather of a
// column touches cached lines instead of one page per element.
func fillPermuted(wp []float64, w []float32, perm []int, dead []bool, k, out int) {
	for i, oi := range perm {
		if dead[oi] {
			clear(wp[i*out : (i+1)*out])
		}
	}
	band := transposeRows(k)
	for n0 := 0; n0 < out; n0 += band {
		n1 := min(n0+band, out)
		for i, oi := range perm {
			if dead[oi] {
				continue
			}
			row := wp[i*out+n0 : i*out+n1]
			for n := range row {
				row[n] = float64(w[(n0+n)*k+oi])
			}
		}
	}
}

// scatterRows writes the rows of qb (len(perm) rows of length out) to the
// columns perm of q ([out, k], row-major), output by output, so that the
// writes to one row of q are together rather than one page apart.
func scatterRows(q, qb []float32, perm []int, k, out int) {
	for n := range out {
		dst := q[n*k : (n+1)*k]
		for r, oi := range perm {
			dst[oi] = qb[r*out+n]
		}
	}
}

// dot returns Σ a[i]·b[i] over len(a) in one fixed order: four running
// sums over i mod 4, combined as (s0+s1)+(s2+s3), then the tail.
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		x := (*[4]float64)(a[i:])
		y := (*[4]float64)(b[i:])
		s0 += float64(x[0] * y[0])
		s1 += float64(x[1] * y[1])
		s2 += float64(x[2] * y[2])
		s3 += float64(x[3] * y[3])
	}
	s := (s0 + s1) + (s2 + s3)
	for ; i < len(a); i++ {
		s += float64(a[i] * b[i])
	}
	return s
}

// reverseBoth replaces the k×k matrix m by J·m·J (both index orders
// reversed), in place.
func reverseBoth(m []float64, k int) {
	n := k * k
	for i := 0; i < n/2; i++ {
		m[i], m[n-1-i] = m[n-1-i], m[i]
	}
}

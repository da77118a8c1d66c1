package gptq

import (
	"fmt"
	"math"

	"github.com/lfmq/lfmq/format/bfp"
)

// ExponentRule chooses the shared exponent of each 16-wide group as the row
// loop quantizes a row (docs/bfp.md, "Encoding"; docs/gptq.md §1). Every
// rule stores ordinary, canonical BFP bytes; only the producer's choice differs.
type ExponentRule uint8

const (
	// ExponentMax is the plain packer: the group's largest exponent field
	// of its error-updated values. The zero value.
	ExponentMax ExponentRule = iota
	// ExponentSearch is tt-metal's optimize_bfp on the error-updated group
	// (bfp.SearchGroupExponent): E_max − 1 when its squared error against
	// the group's float32 values is strictly lower.
	ExponentSearch
	// ExponentHessian picks among E_max, E_max − 1 and E_max − 2 the
	// exponent of least cost under Options.HessianCost, then quantizes and
	// feeds the error back as usual.
	ExponentHessian
)

// String returns "max", "search" or "hessian".
func (r ExponentRule) String() string {
	switch r {
	case ExponentMax:
		return "max"
	case ExponentSearch:
		return "search"
	case ExponentHessian:
		return "hessian"
	}
	return fmt.Sprintf("gptq.ExponentRule(%d)", uint8(r))
}

// HessianCost is what ExponentHessian minimises for a group.
//
// Every group of a row lies at one input index k, so all of them share the
// row's U_kk: weighting a group's squared error by the inverse-Hessian
// diagonal (GPTQ's own greedy loss Σ err²/(2·U_kk²)), or by the whole
// propagated disturbance Σ_j U_kj²·err²/U_kk², multiplies every candidate's
// cost by the same positive factor and cannot change which exponent wins.
// Any Hessian weighting that is quadratic in the group's error therefore
// equals CostGreedy. The propagation can only matter through what it does
// to the next rows' own quantization, which CostLookahead measures for the
// next row.
type HessianCost uint8

const (
	// CostGreedy minimises Σ (w − q)² over the group, w the float64
	// error-updated values: the row's exact contribution to GPTQ's loss
	// up to the row's common factor 1/(2·U_kk²).
	CostGreedy HessianCost = iota
	// CostLookahead adds the greedy loss the next row's same 16 columns
	// will have after this row's error is fed back to them (each
	// candidate's feedback applied, the next row's best exponent taken),
	// in the common unit: err_k²/U_kk² + err_{k+1}²/U_{k+1,k+1}².
	CostLookahead
)

// String returns "greedy" or "lookahead".
func (c HessianCost) String() string {
	switch c {
	case CostGreedy:
		return "greedy"
	case CostLookahead:
		return "lookahead"
	}
	return fmt.Sprintf("gptq.HessianCost(%d)", uint8(c))
}

// maxLower is how far below E_max ExponentHessian looks. E_max − 3 would
// saturate the group maximum at one eighth of its BFP4 range.
const maxLower = 2

// rowEncoder chooses exponents and codes for the rows of one Quantize call.
type rowEncoder struct {
	fm   bfp.Format
	rule ExponentRule
	cost HessianCost
	bits []uint32 // the row's float32 bit patterns
}

// lookahead describes the next row for CostLookahead: its current values
// (all feedback of earlier rows applied), the factor entries that carry this
// row's error to it (U_kj) and weigh its loss (U_jj), and this row's U_kk.
type lookahead struct {
	next          []float64
	uii, uij, ujj float64
}

// encode quantizes the row (its float64 working values and their float32
// rounding r32) into exps and codes, group by group, by the encoder's rule.
// la is nil unless the rule is ExponentHessian with CostLookahead and a
// next row exists.
func (re *rowEncoder) encode(row []float64, r32 []float32, exps, codes []uint8, la *lookahead) error {
	switch re.rule {
	case ExponentMax:
		return bfp.EncodeRow(re.fm, r32, exps, codes)
	case ExponentSearch:
		for n, v := range r32 {
			re.bits[n] = math.Float32bits(v)
		}
		return bfp.EncodeRowRule(re.fm, bfp.RuleSearch, re.bits, exps, codes)
	case ExponentHessian:
	default:
		return &InputError{What: "ExponentRule", Msg: fmt.Sprintf("%v is not max, search or hessian", re.rule)}
	}
	out := len(row)
	for G := range exps {
		n0 := G * bfp.GroupSize
		n1 := min(n0+bfp.GroupSize, out)
		var bits [bfp.GroupSize]uint32
		var w [bfp.GroupSize]float64
		for n := n0; n < n1; n++ {
			bits[n-n0], w[n-n0] = math.Float32bits(r32[n]), row[n]
		}
		var nxt *[bfp.GroupSize]float64
		if la != nil && n0 < out {
			nxt = new([bfp.GroupSize]float64)
			copy(nxt[:], la.next[n0:n1])
		}
		e, c := re.chooseGroup(&bits, &w, n1-n0, nxt, la)
		exps[G] = e
		*(*[bfp.GroupSize]uint8)(codes[n0:]) = c
	}
	return nil
}

// chooseGroup returns the exponent and codes of one group of n real lanes
// (the rest padding) of least cost among E_max, E_max − 1, E_max − 2
// (those bfp.CanLower allows); ties keep the larger exponent, so a group
// where lowering gains nothing stays as the plain packer stores it.
func (re *rowEncoder) chooseGroup(bits *[bfp.GroupSize]uint32, w *[bfp.GroupSize]float64, n int, nxt *[bfp.GroupSize]float64, la *lookahead) (uint8, [bfp.GroupSize]uint8) {
	emax, best := bfp.QuantizeGroupBits(re.fm, bits)
	if n <= 0 || !bfp.CanLower(re.fm, emax, 1) {
		return emax, best
	}
	bestE := emax
	bestCost := re.cost1(emax, &best, w, n, nxt, la)
	for d := 1; d <= maxLower && bfp.CanLower(re.fm, emax, d); d++ {
		e := emax - uint8(d)
		c := bfp.EncodeGroupAt(re.fm, bits, e)
		if cost := re.cost1(e, &c, w, n, nxt, la); cost < bestCost {
			bestE, best, bestCost = e, c, cost
		}
	}
	return bestE, best
}

// cost1 is the cost of storing the group with exponent e and codes c:
// Σ (w − q)², plus for CostLookahead the next row's greedy cost after this
// candidate's feedback, scaled by U_kk²/U_jj² into the same unit.
func (re *rowEncoder) cost1(e uint8, c *[bfp.GroupSize]uint8, w *[bfp.GroupSize]float64, n int, nxt *[bfp.GroupSize]float64, la *lookahead) float64 {
	var q [bfp.GroupSize]float32
	bfp.DequantizeGroup(re.fm, e, c, &q)
	var s float64
	var errs [bfp.GroupSize]float64
	for j := range n {
		d := w[j] - float64(q[j])
		errs[j] = d
		s += float64(d * d)
	}
	if nxt == nil {
		return s
	}
	// The next row's values once this row's error is fed back, computed
	// exactly as Quantize applies the feedback (e = d/U_kk, then
	// v −= U_kj·e with the product rounded first), so the values are the
	// ones that row will really be quantized from.
	var v [bfp.GroupSize]float64
	var bits [bfp.GroupSize]uint32
	for j := range n {
		v[j] = nxt[j] - float64(la.uij*(errs[j]/la.uii))
		bits[j] = math.Float32bits(float32(v[j]))
	}
	emax, codes := bfp.QuantizeGroupBits(re.fm, &bits)
	best := sqErr(re.fm, emax, &codes, &v, n)
	for d := 1; d <= maxLower && bfp.CanLower(re.fm, emax, d); d++ {
		cd := bfp.EncodeGroupAt(re.fm, &bits, emax-uint8(d))
		best = min(best, sqErr(re.fm, emax-uint8(d), &cd, &v, n))
	}
	return s + float64(best*float64(float64(la.uii*la.uii)/float64(la.ujj*la.ujj)))
}

// sqErr returns Σ (v − q)² over the first n lanes of a group stored with
// exponent e and codes c.
func sqErr(fm bfp.Format, e uint8, c *[bfp.GroupSize]uint8, v *[bfp.GroupSize]float64, n int) float64 {
	var q [bfp.GroupSize]float32
	bfp.DequantizeGroup(fm, e, c, &q)
	var s float64
	for j := range n {
		d := v[j] - float64(q[j])
		s += float64(d * d)
	}
	return s
}

// lookaheadAt returns the lookahead of permuted row i in the block
// [b0, b1) of Quantize, or nil when there is none (next is nil: no
// lookahead cost; or i is the last row). The next row's values are wp's
// when it lies in the same block, whose updates are applied row by row;
// for the first row of the next block they are rebuilt in next from the
// block's pending errors.
func (f *Factor) lookaheadAt(i, b0, b1, out int, wp, errs, next []float64) *lookahead {
	k := f.k
	if next == nil || i+1 >= k {
		return nil
	}
	j := i + 1
	la := &lookahead{next: wp[j*out : (j+1)*out], uii: f.u[i*k+i], uij: f.u[i*k+j], ujj: f.u[j*k+j]}
	if j == b1 {
		pendingRow(next, la.next, f.u, k, b0, i, j, out, errs)
		la.next = next
	}
	return la
}

// pendingRow writes into dst the current values of row j = b1, the first
// row of the next block, as they will be once the deferred feedback of rows
// b0..i−1 of the current block is applied: the same subtractions, in the
// same order, as the block's deferred update, so the bits agree.
func pendingRow(dst, row []float64, u []float64, k, b0, i, j, out int, errs []float64) {
	copy(dst, row)
	for r := b0; r < i; r++ {
		if urj := u[r*k+j]; urj != 0 {
			subScaled(dst, urj, errs[(r-b0)*out:(r-b0+1)*out])
		}
	}
}

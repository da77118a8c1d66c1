package bfp

import (
	"fmt"
	"math"
)

// ExponentRule chooses the shared exponent of each group when packing.
// Whatever the rule, the bytes are ordinary BFP: the device decodes any
// exponent the same way, and every choice a rule can make still satisfies
// Canonical (see SearchGroupExponent), so the rule is a property of the
// producer, not of the format.
type ExponentRule uint8

const (
	// RuleMax is the plain packer of docs/bfp.md, "Encoding": the largest
	// exponent field of the group. The zero value, and tt-metal's default.
	RuleMax ExponentRule = iota
	// RuleSearch is tt-metal's optional exponent search (optimize_bfp,
	// docs/bfp.md, "Encoding"): E_max − 1 replaces E_max when it gives
	// the group a strictly smaller squared error.
	RuleSearch
)

// String returns "max" or "search".
func (r ExponentRule) String() string {
	switch r {
	case RuleMax:
		return "max"
	case RuleSearch:
		return "search"
	}
	return fmt.Sprintf("bfp.ExponentRule(%d)", uint8(r))
}

// Valid reports whether r is RuleMax or RuleSearch.
func (r ExponentRule) Valid() bool { return r == RuleMax || r == RuleSearch }

// CanLower reports whether a group whose largest exponent field is e may
// be stored with exponent e − d (d ≥ 1) by an exponent search. As in
// tt-metal, zero groups, groups so small that the lowered step would be a
// subnormal (e − d < m: the device would flush it), and groups holding an
// Inf or NaN (e = 255) keep e.
func CanLower(f Format, e uint8, d int) bool {
	m := f.MagBits()
	return m > 0 && e != 255 && int(e)-d >= m
}

// EncodeGroupAt returns the codes of a group stored with exponent e, which
// may be smaller than the group's own maximum: an element whose exponent
// field exceeds e saturates at magnitude 2^m − 1 with its sign, the others
// follow docs/bfp.md, "Encoding" (EncodeValue).
func EncodeGroupAt(f Format, bits *[GroupSize]uint32, e uint8) (codes [GroupSize]uint8) {
	for j, x := range bits {
		codes[j] = EncodeValue(f, x, e)
	}
	return codes
}

// GroupSqError returns Σ (x_j − q_j)² in float64 over the 16 lanes, with
// x_j the fp32 input widened and q_j the value of codes[j] at exponent e,
// summed in lane order: the error tt-metal's search compares. Decoded
// values are exact, and so is every square of an fp32 difference's
// float64 representation up to rounding of the sum, which is the same on
// every platform (no FMA: the product is rounded explicitly).
func GroupSqError(f Format, bits *[GroupSize]uint32, e uint8, codes *[GroupSize]uint8) float64 {
	var s float64
	for j, x := range bits {
		d := float64(math.Float32frombits(x)) - float64(DecodeValue(f, codes[j], e))
		s += float64(d * d)
	}
	return s
}

// SearchGroupExponent returns the exponent tt-metal's optimize_bfp stores
// for a group and the codes at that exponent: E_max − 1 when CanLower
// allows it and its squared error (GroupSqError) is strictly below E_max's,
// else E_max. Ties keep E_max.
//
// The choice keeps tiles canonical: at E_max − 1 the group's largest
// element saturates to 2^m − 1, which decodes with exponent field
// E_max − 1, so the plain packer applied to the decoded group finds the
// same exponent and codes again.
func SearchGroupExponent(f Format, bits *[GroupSize]uint32) (e uint8, codes [GroupSize]uint8) {
	e, codes = QuantizeGroupBits(f, bits)
	if !CanLower(f, e, 1) {
		return e, codes
	}
	lower := EncodeGroupAt(f, bits, e-1)
	if GroupSqError(f, bits, e-1, &lower) < GroupSqError(f, bits, e, &codes) {
		return e - 1, lower
	}
	return e, codes
}

// quantizeGroupRule is QuantizeGroupBits (RuleMax) or SearchGroupExponent
// (RuleSearch); r is valid.
func quantizeGroupRule(f Format, r ExponentRule, bits *[GroupSize]uint32) (uint8, [GroupSize]uint8) {
	if r == RuleSearch {
		return SearchGroupExponent(f, bits)
	}
	return QuantizeGroupBits(f, bits)
}

// checkRule returns a *RuleError unless r is valid.
func checkRule(r ExponentRule) error {
	if !r.Valid() {
		return &RuleError{Rule: r}
	}
	return nil
}

// RuleError reports an ExponentRule value that is neither RuleMax nor
// RuleSearch.
type RuleError struct {
	Rule ExponentRule
}

// Error returns the message, naming the value.
func (e *RuleError) Error() string {
	return fmt.Sprintf("bfp: unknown exponent rule %s (want max or search)", e.Rule)
}

// Is reports whether target is ErrRule.
func (e *RuleError) Is(target error) bool { return target == ErrRule }

// EncodeTileRule is EncodeTileBits with the exponent of each group chosen
// by r; RuleMax gives exactly EncodeTileBits's bytes.
func EncodeTileRule(f Format, r ExponentRule, src *[TileElems]uint32, dst []byte) error {
	if err := checkRule(r); err != nil {
		return err
	}
	if err := checkTile(f, len(dst), "dst"); err != nil {
		return err
	}
	encodeTileRule(f, r, src, dst)
	return nil
}

// encodeTileRule does the work of EncodeTileRule. RuleMax takes the plain
// packer's own loop, so the default path is the one that always was.
func encodeTileRule(f Format, r ExponentRule, src *[TileElems]uint32, dst []byte) {
	if r == RuleMax {
		encodeTile(f, src, dst)
		return
	}
	for g := range GroupsPerTile {
		row, c0 := GroupOrigin(g)
		e, codes := quantizeGroupRule(f, r, (*[GroupSize]uint32)(src[row*TileDim+c0:]))
		dst[g] = e
		if f == BFP8 {
			*(*[GroupSize]byte)(dst[GroupsPerTile+GroupSize*g:]) = codes
			continue
		}
		out := (*[GroupSize / 2]byte)(dst[GroupsPerTile+GroupSize/2*g:])
		for k := range out {
			out[k] = codes[2*k] | codes[2*k+1]<<4
		}
	}
}

// PackMatrixRule is PackMatrix with the exponent of each group chosen by r;
// RuleMax gives exactly PackMatrix's bytes.
func PackMatrixRule(f Format, r ExponentRule, w []float32, out, in int) ([]byte, error) {
	if err := checkRule(r); err != nil {
		return nil, err
	}
	return packTilesRule(f, r, len(w), out, in, func(buf *[TileElems]uint32, kt, nt int) {
		gatherF32(buf, w, out, in, kt, nt)
	})
}

// EncodeRowRule is EncodeRowBits with the exponent of each group chosen by
// r; RuleMax gives exactly EncodeRowBits's output.
func EncodeRowRule(f Format, r ExponentRule, row []uint32, exps, codes []uint8) error {
	if err := checkRule(r); err != nil {
		return err
	}
	if err := checkRow(f, len(row), len(exps), len(codes), "row"); err != nil {
		return err
	}
	var bits [GroupSize]uint32
	for G := range exps {
		n0 := G * GroupSize
		bits = [GroupSize]uint32{}
		if n0 < len(row) {
			copy(bits[:], row[n0:min(n0+GroupSize, len(row))])
		}
		exps[G], *(*[GroupSize]uint8)(codes[n0:]) = quantizeGroupRule(f, r, &bits)
	}
	return nil
}

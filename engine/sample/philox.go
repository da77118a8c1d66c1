package sample

import "math"

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011; Random123). A counter-based generator: the noise for a
// (seed, position, token) triple is computed directly, with no state to
// advance, which is what makes seeded output independent of batch order.

const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

// Philox4x32 applies the ten Philox4x32 rounds to counter c under key k.
func Philox4x32(c [4]uint32, k [2]uint32) [4]uint32 {
	for round := 0; round < 10; round++ {
		p0 := uint64(philoxM0) * uint64(c[0])
		p1 := uint64(philoxM1) * uint64(c[2])
		hi0, lo0 := uint32(p0>>32), uint32(p0)
		hi1, lo1 := uint32(p1>>32), uint32(p1)
		c = [4]uint32{hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0}
		k[0] += philoxW0
		k[1] += philoxW1
	}
	return c
}

// uniform returns u ∈ (0, 1) for token v at absolute position pos under seed
// (docs/serving.md §4): 53 bits of the Philox output, centred in their
// interval so that neither 0 nor 1 can occur.
func uniform(seed uint64, pos, v int) float64 {
	x := Philox4x32([4]uint32{uint32(v), uint32(pos), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	b := (uint64(x[0]) | uint64(x[1])<<32) >> 11
	return (float64(b) + 0.5) * 0x1p-53
}

// gumbel is −ln(−ln u): adding it to logits and taking the argmax samples
// exactly from their softmax.
func gumbel(seed uint64, pos, v int) float64 {
	return -Ln(-Ln(uniform(seed, pos, v)))
}

// noiseStep is the spacing of noiseTable's d grid.
const noiseStep = 1.0 / 16

// noiseTable[k] is exp(−exp(−k·noiseStep)) shrunk by a relative 1e-9: for
// every d ≥ k·noiseStep, a u below it has −ln(−ln u) < d (the threshold
// rises with d), with room for the rounding of the logarithms. It spans d
// up to 40: the largest u below 1 that uniform returns, 1 − 2⁻⁵², gives
// noise 36.04. (uniform can return exactly 1, once in 2⁵³ draws, whose
// noise is +Inf: no threshold below 1 ever passes over it.)
var noiseTable = func() []float64 {
	t := make([]float64, int(40/noiseStep)+1)
	for k := range t {
		t[k] = math.Exp(-math.Exp(-float64(k)*noiseStep)) * (1 - 1e-9)
	}
	return t
}()

// noiseThreshold returns a u below which the noise cannot exceed d ≥ 0.
func noiseThreshold(d float64) float64 {
	k := int(d / noiseStep)
	if k >= len(noiseTable) {
		return 1
	}
	return noiseTable[k]
}

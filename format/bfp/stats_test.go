package bfp_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// TestGaussianError checks the error figures of
// docs/bfp.md, "Error bounds" on seeded i.i.d. N(0,1) weights: relative
// Frobenius error 0.728 % (BFP8) and 11.726 % (BFP4), and the fraction
// of non-zero inputs flushed to zero 0.92 % and 14.93 %. It also checks
// the per-element bound of docs/bfp.md, "Error bounds": |error| ≤ Δ/2,
// or ≤ Δ for a saturated maximum, plus 2^(E−150) because the encoding
// rule's truncating shift drops significand bits worth up to one unit at
// the group's scale (for fp32 inputs the Δ/2 bound can be exceeded by
// that much, e.g. 0x3F200001 in BFP4 at E = 127; BF16 inputs meet Δ/2 exactly).
func TestGaussianError(t *testing.T) {
	tests := []struct {
		f                bfp.Format
		relLo, relHi     float64 // relative Frobenius error band
		flushLo, flushHi float64 // flushed fraction band
	}{
		// The weights are seeded, so the figures are exact: docs/bfp.md
		// states 0.728 % and 0.92 % (BFP8), 11.726 % and 14.93 % (BFP4),
		// measured on linux/amd64; each band is that figure ± its last
		// printed digit.
		{bfp.BFP8, 0.00727, 0.00729, 0.0091, 0.0093},
		{bfp.BFP4, 0.11725, 0.11727, 0.1492, 0.1494},
	}
	const out, in = 512, 512 // 256 tiles, 262,144 weights
	rng := rand.New(rand.NewPCG(2024, 7))
	w := make([]float32, out*in)
	for k := range w {
		w[k] = float32(rng.NormFloat64())
	}
	for _, tt := range tests {
		t.Run(tt.f.String(), func(t *testing.T) {
			data, err := bfp.PackMatrix(tt.f, w, out, in)
			if err != nil {
				t.Fatal(err)
			}
			q, err := bfp.UnpackMatrix(tt.f, data, out, in)
			if err != nil {
				t.Fatal(err)
			}
			var num, den float64
			var flushed, nonzero int
			for k, x := range w {
				d := float64(x) - float64(q[k])
				num += d * d
				den += float64(x) * float64(x)
				if x != 0 {
					nonzero++
					if q[k] == 0 {
						flushed++
					}
				}
			}
			rel := math.Sqrt(num / den)
			frac := float64(flushed) / float64(nonzero)
			t.Logf("%s: relative error %.3f %%, SQNR %.1f dB, flushed %.2f %%", tt.f, 100*rel, -20*math.Log10(rel), 100*frac)
			if rel < tt.relLo || rel > tt.relHi {
				t.Errorf("relative error %.4f outside [%.4f, %.4f]", rel, tt.relLo, tt.relHi)
			}
			if frac < tt.flushLo || frac > tt.flushHi {
				t.Errorf("flushed fraction %.4f outside [%.4f, %.4f]", frac, tt.flushLo, tt.flushHi)
			}

			// Per-element bound, group by group along W_tt rows (16
			// consecutive outputs o at one input i,
			// docs/lfmq-1.md, "How a BFP tensor is stored").
			for i := range in {
				for o0 := 0; o0 < out; o0 += 16 {
					var g [16]uint32
					for j := range 16 {
						g[j] = math.Float32bits(w[(o0+j)*in+i])
					}
					E := bfp.SharedExponent(&g)
					step := math.Ldexp(1, int(E)-127-(tt.f.MagBits()-1))
					for j := range 16 {
						o := o0 + j
						err := math.Abs(float64(w[o*in+i]) - float64(q[o*in+i]))
						bound := step / 2
						if math.Abs(float64(q[o*in+i])) == float64(tt.f.MaxMag())*step {
							bound = step // saturated top half-step
						}
						bound += math.Ldexp(1, int(E)-150)
						if err > bound {
							t.Fatalf("W[%d][%d] = %v → %v: error %g > %g", o, i, w[o*in+i], q[o*in+i], err, bound)
						}
					}
				}
			}
		})
	}
}

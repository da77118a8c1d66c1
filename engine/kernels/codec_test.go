package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// TestCodecCrossCheck checks the test packer and the kernels' decoding
// against package format/bfp, written separately from the same spec: both
// packers produce the same bytes, and every weight the kernels use (At, and
// a product with a one-hot input) equals the codec's UnpackMatrix value.
func TestCodecCrossCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	formats := map[Format]bfp.Format{BFP8: bfp.BFP8, BFP4: bfp.BFP4}
	for f, cf := range formats {
		for _, s := range []shape{{32, 32}, {33, 45}, {100, 70}, {64, 96}} {
			t.Run(fmt.Sprintf("%s/%dx%d", f, s.out, s.in), func(t *testing.T) {
				w := randVec(rng, s.out*s.in)
				for i := range w {
					w[i] *= float32(math.Ldexp(1, rng.IntN(12)-6))
				}
				mine := packBFP(f, s.out, s.in, w)
				theirs, err := bfp.PackMatrix(cf, w, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				if string(mine) != string(theirs) {
					t.Fatalf("packers disagree")
				}
				vals, err := bfp.UnpackMatrix(cf, theirs, s.out, s.in)
				if err != nil {
					t.Fatal(err)
				}
				m, err := NewBFP(f, s.out, s.in, theirs)
				if err != nil {
					t.Fatal(err)
				}
				x := make([]float32, s.in)
				y := make([]float32, s.out)
				for i := range s.in {
					x[i] = 1
					m.MatVec(y, x)
					x[i] = 0
					for o := range s.out {
						v := vals[o*s.in+i]
						if m.At(o, i) != v || y[o] != v {
							t.Fatalf("W[%d][%d]: codec %g, At %g, MatVec %g", o, i, v, m.At(o, i), y[o])
						}
					}
				}
			})
		}
	}
}

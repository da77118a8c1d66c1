package dtype

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkToFloat32 reports each decoder against the per-element reference
// on the same data; bytes/s counts source bytes.
func BenchmarkToFloat32(b *testing.B) {
	for _, d := range []DType{BF16, F16, F32, I32, U8} {
		for _, n := range []int{1024, 1 << 20} {
			r := rand.New(rand.NewPCG(7, 8))
			src := make([]byte, n*d.Size())
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			if d == F16 {
				for i := 1; i < len(src); i += 2 {
					src[i] &^= 0x40 // keep most values normal, as weights are
				}
			}
			dst := make([]float32, n)
			b.Run(fmt.Sprintf("%s/%d", d, n), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if err := ToFloat32(d, src, dst); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/%d/ref", d, n), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					refDecodeInto(d, src, dst)
				}
			})
		}
	}
}

// BenchmarkFromFloat32 reports each encoder against the per-element
// reference (which allocates its output); bytes/s counts float32 input
// bytes.
func BenchmarkFromFloat32(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(9, 10))
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	for _, d := range []DType{BF16, F16, F32} {
		dst := make([]byte, n*d.Size())
		b.Run(string(d), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := PutFloat32(d, dst, src); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(d)+"/ref", func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				refEncode(d, src)
			}
		})
	}
}

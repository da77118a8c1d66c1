package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lfmq/lfmq/internal/cputime"
)

// BenchmarkTileKernels runs the batched BFP product's tile kernels on data
// in L1: the decoders (one tile per op) and the FMA kernels (one 32-row
// tile applied to nb batch rows per op), with GFLOP/s and peak_frac, so
// that a kernel's own speed can be told from the product's.
//
//	go test -run '^$' -bench TileKernels ./engine/kernels
func BenchmarkTileKernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, f := range []Format{BFP8, BFP4} {
		tiles := benchMatrix(b, rng, f, TileSize, TileSize).BFP
		for _, z := range []bool{false, true} {
			b.Run(fmt.Sprintf("decode/%s/avx512=%v", f, z), func(b *testing.B) {
				if !useSIMD || (z && !useAVX512) {
					b.Skip("not on this CPU")
				}
				saved := useAVX512
				useAVX512 = z
				defer func() { useAVX512 = saved }()
				var w [TileSize * TileSize]float32
				cpu := cputime.Process()
				for b.Loop() {
					decodeTile(f, &w, tiles)
				}
				if cpu = cputime.Process() - cpu; cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
	// Weights of a real model's scale (benchMatrix): randTiles' tiny
	// exponents would make subnormal products, which run far slower.
	var w [TileSize * TileSize]float32
	decodeTileGo(BFP8, &w, benchMatrix(b, rng, BFP8, TileSize, TileSize).BFP)
	for nb := 1; nb <= tileFMAPackedMax; nb++ {
		acc := make([]float32, nb*TileSize)
		flops := 2 * float64(TileSize*TileSize*nb)
		// Inputs 2048 apart, as an expert's up projection has them.
		xs := randVec(rng, 2048*nb)
		b.Run(fmt.Sprintf("packed/nb%d", nb), func(b *testing.B) {
			peakGFLOPS()
			cpu := cputime.Process()
			for b.Loop() {
				tileFMAPacked(acc, &w, xs, 2048, TileSize, nb)
			}
			cpu = cputime.Process() - cpu
			reportFlops(b, flops, cpu)
			reportPeakFrac(b, flops, cpu)
		})
		if nb%6 == 0 { // the kernel tileFMAPacked replaced on AVX-512
			b.Run(fmt.Sprintf("fma6/nb%d", nb), func(b *testing.B) {
				peakGFLOPS()
				cpu := cputime.Process()
				for b.Loop() {
					tileFMA6(acc, TileSize, &w, xs, 2048, TileSize, nb/6)
				}
				cpu = cputime.Process() - cpu
				reportFlops(b, flops, cpu)
				reportPeakFrac(b, flops, cpu)
			})
		}
	}
}

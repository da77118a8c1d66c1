//go:build !amd64 || purego

package gptq

// useAVX and useAVX512 are false where no assembly is built; they are variables only so that
// tests can set it on every platform.
var useAVX, useAVX512 = false, false

func dotLanes4AVX(acc *[16]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int) {
	dotLanes4Go(acc, a, ao, b, bo, quads)
}

func dotLanes4x4AVX512(acc *[64]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int) {
	dotLanes4x4Go(acc, a, ao, b, bo, quads)
}

func gram8AVX(x *[32]float64, g, p []float64, n int) { gram8Go(x, g, p, n) }

// The AVX-512 gram kernels hold their sums in toGramLanes' layout: these
// stand-ins take them out of it, run the Go kernel and put them back.

func gram8AVX512(x *[32]float64, g, p []float64, n int) {
	var t [32]float64
	fromGramLanes(t[:], x[:])
	gram8Go(&t, g, p, n)
	toGramLanes(x[:], t[:])
}

func gram16AVX512(x *[64]float64, g, p []float64, n int) {
	var t [64]float64
	fromGramLanes(t[:], x[:])
	gram16Go(&t, g, p, n)
	toGramLanes(x[:], t[:])
}

func gram32AVX512(x *[128]float64, g, p []float64, n int) {
	var t [128]float64
	fromGramLanes(t[:], x[:])
	gram32Go(&t, g, p, n)
	toGramLanes(x[:], t[:])
}

func updateAVX(c []float64, cs int, up, ep []float64, bs, cols int) {
	updateAVXGo(c, cs, up, ep, bs, cols)
}

func updateAVX512(c []float64, cs int, up, ep []float64, bs, cols int) {
	updateAVXGo(c, cs, up, ep, bs, cols)
}

func subScaledAVX(dst []float64, a float64, x []float64) {
	for n := range dst {
		dst[n] -= float64(a * x[n])
	}
}

//go:build !amd64 || purego

package gptq

// useAVX is false where no assembly is built; it is a variable only so that
// tests can set it on every platform.
var useAVX = false

func dotLanes4AVX(acc *[16]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int) {
	dotLanes4Go(acc, a, ao, b, bo, quads)
}

func gram8AVX(x *[32]float64, g, p []float64, n int) { gram8Go(x, g, p, n) }

func updateAVX(c []float64, cs int, up, ep []float64, bs, cols int) {
	updateAVXGo(c, cs, up, ep, bs, cols)
}

func subScaledAVX(dst []float64, a float64, x []float64) {
	for n := range dst {
		dst[n] -= float64(a * x[n])
	}
}

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

func gram8AVX512(x *[32]float64, g, p []float64, n int) {
	var t [32]float64
	for a := range 4 {
		for b := range 8 {
			t[4*b+a] = x[8*a+b]
		}
	}
	gram8Go(&t, g, p, n)
	for a := range 4 {
		for b := range 8 {
			x[8*a+b] = t[4*b+a]
		}
	}
}

func gram16AVX512(x *[64]float64, g, p []float64, n int) {
	var t [64]float64
	for a := range 8 {
		for b := range 8 {
			t[32*(a/4)+4*b+a%4] = x[8*a+b]
		}
	}
	gram16Go(&t, g, p, n)
	for a := range 8 {
		for b := range 8 {
			x[8*a+b] = t[32*(a/4)+4*b+a%4]
		}
	}
}

func gram32AVX512(x *[128]float64, g, p []float64, n int) {
	var t [128]float64
	for k := range 4 {
		for a := range 4 {
			for b := range 8 {
				t[32*k+4*b+a] = x[32*k+8*a+b]
			}
		}
	}
	gram32Go(&t, g, p, n)
	for k := range 4 {
		for a := range 4 {
			for b := range 8 {
				x[32*k+8*a+b] = t[32*k+4*b+a]
			}
		}
	}
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

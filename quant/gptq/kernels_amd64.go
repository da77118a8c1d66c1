//go:build amd64 && !purego

package gptq

import "golang.org/x/sys/cpu"

// useAVX selects the AVX2 kernels of kernels_amd64.s. They use separate
// multiplies and adds (never FMA), so they need AVX2 only. Tests switch it
// off to run the Go kernels.
var useAVX = cpu.X86.HasAVX2

// useAVX512 adds the AVX-512 (F) kernels, with separate multiplies and adds
// too. Tests switch it off to run the AVX2 or the Go kernels.
var useAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F

// dotLanes4AVX is dotLanes4Go; the caller checks the ranges.
//
//go:noescape
func dotLanes4AVX(acc *[16]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int)

// gram8AVX is gram8Go (x holds the sums so far); the caller checks the
// ranges.
//
//go:noescape
func gram8AVX(x *[32]float64, g, p []float64, n int)

// gram8AVX512 is gram8Go with the outputs transposed (x[8a+b] for
// x[4b+a]); the caller checks the ranges.
//
//go:noescape
func gram8AVX512(x *[32]float64, g, p []float64, n int)

// gram16AVX512 is gram16Go with x[8a+b] for x[32(a/4)+4b+a%4]; the caller
// checks the ranges.
//
//go:noescape
func gram16AVX512(x *[64]float64, g, p []float64, n int)

// gram32AVX512 is gram32Go with x[32k+8a+b] for x[32k+4b+a]; the caller
// checks the ranges.
//
//go:noescape
func gram32AVX512(x *[128]float64, g, p []float64, n int)

// updateAVX is updateAVXGo; the caller checks the ranges.
//
//go:noescape
func updateAVX(c []float64, cs int, up, ep []float64, bs, cols int)

// updateAVX512 is updateAVXGo; the caller checks the ranges.
//
//go:noescape
func updateAVX512(c []float64, cs int, up, ep []float64, bs, cols int)

// subScaledAVX is subScaled for len(dst) a multiple of 16, len(x) ≥ len(dst).
//
//go:noescape
func subScaledAVX(dst []float64, a float64, x []float64)

// dotLanes4x4AVX512 is dotLanes4x4Go; the caller checks the ranges.
//
//go:noescape
func dotLanes4x4AVX512(acc *[64]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int)

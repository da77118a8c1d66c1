//go:build amd64 && !purego

package gptq

import "golang.org/x/sys/cpu"

// useAVX selects the AVX2 kernels of kernels_amd64.s. They use separate
// multiplies and adds (never FMA), so they need AVX2 only. Tests switch it
// off to run the Go kernels.
var useAVX = cpu.X86.HasAVX2

// dotLanes4AVX is dotLanes4Go; the caller checks the ranges.
//
//go:noescape
func dotLanes4AVX(acc *[16]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int)

// gram8AVX is gram8Go; the caller checks the ranges.
//
//go:noescape
func gram8AVX(x *[32]float64, g, p []float64, n int)

// updateAVX is updateAVXGo; the caller checks the ranges.
//
//go:noescape
func updateAVX(c []float64, cs int, up, ep []float64, bs, cols int)

// subScaledAVX is subScaled for len(dst) a multiple of 16, len(x) ≥ len(dst).
//
//go:noescape
func subScaledAVX(dst []float64, a float64, x []float64)

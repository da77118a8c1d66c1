//go:build amd64 && !purego

package hessian

import "golang.org/x/sys/cpu"

// useAVX and useAVX512 select the kernels of kernel_amd64.s: AVX2 for
// blocks of 8 columns, AVX-512 (F) for blocks of 16. They use separate
// multiplies and adds (never FMA). Tests switch them off to run the Go
// kernel.
var (
	useAVX    = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F
)

// block4x8AVX is block4Go with cols = 8; the caller checks the ranges (w:
// four rows ChunkRows apart of n values, y: n rows ys apart of 8 values).
//
//go:noescape
func block4x8AVX(acc *[4][16]float64, w, y *float64, ys, n int)

// block4x16AVX512 is block4Go with cols = 16; the caller checks the ranges.
//
//go:noescape
func block4x16AVX512(acc *[4][16]float64, w, y *float64, ys, n int)

// The assembly finds row a of w at a·ChunkRows·8 bytes: 512 for a = 1.
const _ = uint(ChunkRows-64) + uint(64-ChunkRows)

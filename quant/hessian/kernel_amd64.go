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

// block4x8SAVX is block4SGo with cols = 8; block4S checks the ranges.
//
//go:noescape
func block4x8SAVX(s *float64, ss int, w *float64, ws int, y *float64, chunks, n int)

// block4x16SAVX512 is block4SGo with cols = 16; block4S checks the ranges.
//
//go:noescape
func block4x16SAVX512(s *float64, ss int, w *float64, ws int, y *float64, chunks, n int)

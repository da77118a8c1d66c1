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

// block4x8SAVX is blockSumGo with cols = 8 for the four rows of a whose
// values lie at a[t·microRows+r], r < 4 (blockSum passes &a[4] for the
// other four); blockSum checks the ranges.
//
//go:noescape
func block4x8SAVX(s *float64, ss int, a *float64, y *float64, chunks, n int)

// block8x16SAVX512 is blockSumGo with cols = 16; blockSum checks the
// ranges.
//
//go:noescape
func block8x16SAVX512(s *float64, ss int, a *float64, y *float64, chunks, n int)

// widenPanelsAVX is widenPanelsGo on AVX2 for n ≥ 1, panels ≥ 1 and cols a
// multiple of 8; widenPanels checks the ranges.
//
//go:noescape
func widenPanelsAVX(b *float64, x *float32, xs, n, panels, cols int)

// weightRowsAVX is weightRowsGo on AVX2 for n ≥ 1 rows; weightRows checks
// the ranges.
//
//go:noescape
func weightRowsAVX(a *float64, x *float32, xs int, w *float64, n int)

//go:build !amd64 || purego

package hessian

import "unsafe"

// useAVX and useAVX512 are false where no assembly is built; they are
// variables only so that tests can set them on every platform.
var useAVX, useAVX512 = false, false

func block4x8SAVX(s *float64, ss int, a *float64, y *float64, chunks, n int) {
	blockRowsGo(unsafe.Slice(s, 3*ss+8), ss, unsafe.Slice(a, (chunks*n-1)*microRows+4), 4, unsafe.Slice(y, chunks*n*8), 8, chunks, n)
}

func block8x16SAVX512(s *float64, ss int, a *float64, y *float64, chunks, n int) {
	blockSumGo(unsafe.Slice(s, (microRows-1)*ss+16), ss, unsafe.Slice(a, chunks*n*microRows), unsafe.Slice(y, chunks*n*16), 16, chunks, n)
}

func widenPanelsAVX(b *float64, x *float32, xs, n, panels, cols int) {
	widenPanelsGo(unsafe.Slice(b, panels*n*cols), unsafe.Slice(x, (n-1)*xs+panels*cols), xs, n, panels, cols)
}

func weightRowsAVX(a *float64, x *float32, xs int, w *float64, n int) {
	weightRowsGo(unsafe.Slice(a, n*microRows), unsafe.Slice(x, (n-1)*xs+microRows), xs, unsafe.Slice(w, n))
}

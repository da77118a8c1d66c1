//go:build !amd64 || purego

package hessian

import "unsafe"

// useAVX and useAVX512 are false where no assembly is built; they are
// variables only so that tests can set them on every platform.
var useAVX, useAVX512 = false, false

func block4x8SAVX(s *float64, ss int, w *float64, ws int, y *float64, chunks, n int) {
	block4SGo(unsafe.Slice(s, 3*ss+8), ss, unsafe.Slice(w, 3*ws+chunks*n), ws, unsafe.Slice(y, chunks*n*8), 8, chunks, n)
}

func block4x16SAVX512(s *float64, ss int, w *float64, ws int, y *float64, chunks, n int) {
	block4SGo(unsafe.Slice(s, 3*ss+16), ss, unsafe.Slice(w, 3*ws+chunks*n), ws, unsafe.Slice(y, chunks*n*16), 16, chunks, n)
}

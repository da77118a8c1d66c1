//go:build !amd64 || purego

package hessian

import "unsafe"

// useAVX and useAVX512 are false where no assembly is built; they are
// variables only so that tests can set them on every platform.
var useAVX, useAVX512 = false, false

func block4x8AVX(acc *[4][16]float64, w, y *float64, ys, n int) {
	block4Go(acc, unsafe.Slice(w, 3*ChunkRows+n), unsafe.Slice(y, (n-1)*ys+8), ys, n, 8)
}

func block4x16AVX512(acc *[4][16]float64, w, y *float64, ys, n int) {
	block4Go(acc, unsafe.Slice(w, 3*ChunkRows+n), unsafe.Slice(y, (n-1)*ys+16), ys, n, 16)
}

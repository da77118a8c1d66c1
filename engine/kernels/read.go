package kernels

import (
	"encoding/binary"
	"unsafe"
)

// ReadXor returns the XOR of b's bytes taken as little-endian 64-bit words
// (a final partial word is zero-padded). It exists to read memory as fast
// as a core can: the decode benchmarks' read-bandwidth probe streams a
// buffer far larger than the caches through it, so that the weights'
// bytes per second can be compared with what the machine reads, not with
// what it copies. The AVX2 and Go paths give the same value.
func ReadXor(b []byte) uint64 {
	var x uint64
	if useSIMD && len(b) >= 256 {
		n := len(b) &^ 255
		x = readXorAVX(unsafe.SliceData(b), n)
		b = b[n:]
	}
	return x ^ readXorGo(b)
}

// readXorGo is ReadXor's portable path.
func readXorGo(b []byte) uint64 {
	var x0, x1, x2, x3 uint64
	for len(b) >= 32 {
		x0 ^= binary.LittleEndian.Uint64(b)
		x1 ^= binary.LittleEndian.Uint64(b[8:])
		x2 ^= binary.LittleEndian.Uint64(b[16:])
		x3 ^= binary.LittleEndian.Uint64(b[24:])
		b = b[32:]
	}
	for len(b) >= 8 {
		x0 ^= binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	var tail [8]byte
	copy(tail[:], b)
	return x0 ^ x1 ^ x2 ^ x3 ^ binary.LittleEndian.Uint64(tail[:])
}

package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestReadXor: the SIMD path gives the XOR of the words, as a byte-by-byte
// fold computes it, at every length and alignment around its 256-byte
// blocks.
func TestReadXor(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 1200)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	want := func(b []byte) uint64 {
		var x uint64
		for i, c := range b {
			x ^= uint64(c) << (8 * (i % 8))
		}
		return x
	}
	for _, off := range []int{0, 1, 7, 8, 31} {
		for n := 0; off+n <= len(buf); n += 1 + n/7 {
			b := buf[off : off+n]
			if got := ReadXor(b); got != want(b) {
				t.Fatalf("off %d len %d: %#x, want %#x", off, n, got, want(b))
			}
			if got := readXorGo(b); got != want(b) {
				t.Fatalf("Go path, off %d len %d: %#x, want %#x", off, n, got, want(b))
			}
		}
	}
}

// BenchmarkReadXor: one core's read rate from a buffer far larger than the
// caches (bytes/s in the MB/s column), against the Go path in the same run.
func BenchmarkReadXor(b *testing.B) {
	buf := make([]byte, 256<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = byte(i >> 12)
	}
	for _, impl := range []string{"simd", "go"} {
		b.Run(impl, func(b *testing.B) {
			if impl == "simd" && !useSIMD {
				b.Skip("no AVX2")
			}
			saved := useSIMD
			useSIMD = impl == "simd"
			defer func() { useSIMD = saved }()
			b.SetBytes(int64(len(buf)))
			var sink uint64
			for b.Loop() {
				sink ^= ReadXor(buf)
			}
			_ = sink
		})
	}
}

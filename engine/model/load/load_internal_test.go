package load

import (
	"math"
	"testing"
	"unsafe"
)

// TestReinterpret: little-endian bytes are viewed in place when aligned and
// copied when not, with the same values either way.
func TestReinterpret(t *testing.T) {
	want := []float32{1, -2.5, float32(math.Inf(1)), 3e-39}
	buf := make([]byte, 4*len(want)+4)
	for _, shift := range []int{0, 1, 2, 3} {
		b := buf[shift : shift+4*len(want)]
		for i, v := range want {
			u := math.Float32bits(v)
			b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
		f := asFloat32(b)
		for i := range want {
			if math.Float32bits(f[i]) != math.Float32bits(want[i]) {
				t.Fatalf("shift %d: asFloat32[%d] = %g, want %g", shift, i, f[i], want[i])
			}
		}
		aligned := uintptr(unsafe.Pointer(&b[0]))%4 == 0
		if inPlace := unsafe.Pointer(&f[0]) == unsafe.Pointer(&b[0]); inPlace != (aligned && littleEndian) {
			t.Errorf("shift %d: in place %v, aligned %v", shift, inPlace, aligned)
		}
		h := asUint16(b)
		for i := range h {
			if want := uint16(b[2*i]) | uint16(b[2*i+1])<<8; h[i] != want {
				t.Fatalf("shift %d: asUint16[%d] = %#x, want %#x", shift, i, h[i], want)
			}
		}
	}
}

package kv

import "testing"

// TestKVRowBytes: bf16 takes half of float32's bytes per position, bfp8
// 17/64 (at most 0.27 of them), and a cache holds exactly that.
func TestKVRowBytes(t *testing.T) {
	const kvd = 8 * 64
	f32 := F32.RowBytes(kvd)
	if got := BF16.RowBytes(kvd); 2*got != f32 {
		t.Errorf("bf16 row: %d bytes, float32 %d", got, f32)
	}
	if got := BFP8.RowBytes(kvd); float64(got) > 0.27*float64(f32) || got != kvd/16*17 {
		t.Errorf("bfp8 row: %d bytes, float32 %d", got, f32)
	}
	for _, dt := range DTypes {
		r := MakeRows(dt, kvd, 3)
		if got := 4*len(r.f) + 2*len(r.h) + len(r.b); got != 3*dt.RowBytes(kvd) {
			t.Errorf("%s: 3 rows hold %d bytes, want %d", dt, got, 3*dt.RowBytes(kvd))
		}
	}
}

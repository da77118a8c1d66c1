package dtype

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// bf16Ref rounds x to bfloat16 by comparing distances in float64, which holds
// every float32 and bfloat16 value and their differences exactly. It is the
// independent reference for Float32ToBF16 on non-NaN input.
func bf16Ref(x uint32) uint16 {
	sign := uint16(x>>16) & 0x8000
	mag := x & 0x7fffffff
	if mag == 0x7f800000 {
		return sign | 0x7f80
	}
	value := func(h uint16) float64 { // magnitude of a bf16 pattern, 0x7f80 as 2^128
		if h == 0x7f80 {
			return math.Ldexp(1, 128)
		}
		return float64(math.Float32frombits(uint32(h) << 16))
	}
	v := float64(math.Float32frombits(mag))
	lo := uint16(mag >> 16)
	hi := lo + 1
	dlo, dhi := v-value(lo), value(hi)-v
	switch {
	case dlo < dhi:
		return sign | lo
	case dhi < dlo:
		return sign | hi
	case lo&1 == 0:
		return sign | lo
	default:
		return sign | hi
	}
}

func isNaN32(x uint32) bool { return x&0x7fffffff > 0x7f800000 }

func TestBF16ToFloat32Exhaustive(t *testing.T) {
	for b := range 1 << 16 {
		if got := math.Float32bits(BF16ToFloat32(uint16(b))); got != uint32(b)<<16 {
			t.Fatalf("BF16ToFloat32(%#04x) bits = %#08x, want %#08x", b, got, uint32(b)<<16)
		}
	}
}

func TestFloat32ToBF16(t *testing.T) {
	tests := []struct {
		name string
		in   uint32
		want uint16
	}{
		{"one", 0x3f800000, 0x3f80},
		{"minus zero", 0x80000000, 0x8000},
		{"below half", 0x3f807fff, 0x3f80},
		{"tie to even down", 0x3f808000, 0x3f80},
		{"tie to even up", 0x3f818000, 0x3f82},
		{"above half", 0x3f808001, 0x3f81},
		{"carry into exponent", 0x3fffffff, 0x4000},
		{"largest below overflow", 0x7f7f7fff, 0x7f7f},
		{"max float overflows", 0x7f7fffff, 0x7f80},
		{"negative overflow", 0xff7fffff, 0xff80},
		{"smallest subnormal", 0x00000001, 0x0000},
		{"subnormal tie down", 0x00008000, 0x0000},
		{"subnormal tie up", 0x00018000, 0x0002},
		{"inf", 0x7f800000, 0x7f80},
		{"minus inf", 0xff800000, 0xff80},
		{"quiet NaN", 0x7fc00000, 0x7fc0},
		{"NaN with payload", 0x7fc12345, 0x7fc1},
		{"signalling NaN low payload", 0x7f800001, 0x7fc0},
		{"signalling NaN high payload", 0x7fa00000, 0x7fe0},
		{"negative signalling NaN", 0xff800001, 0xffc0},
		{"all ones NaN", 0xffffffff, 0xffff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Float32ToBF16(math.Float32frombits(tt.in)); got != tt.want {
				t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", tt.in, got, tt.want)
			}
			if !isNaN32(tt.in) {
				if ref := bf16Ref(tt.in); ref != tt.want {
					t.Errorf("reference gives %#04x for %#08x: the table is wrong", ref, tt.in)
				}
			}
		})
	}
}

// TestFloat32ToBF16Reference checks every bf16 pattern with the low halves
// that sit around the rounding boundaries, and random patterns.
func TestFloat32ToBF16Reference(t *testing.T) {
	check := func(x uint32) {
		t.Helper()
		got := Float32ToBF16(math.Float32frombits(x))
		if isNaN32(x) {
			if want := uint16(x>>16) | 0x40; got != want {
				t.Fatalf("Float32ToBF16(NaN %#08x) = %#04x, want %#04x", x, got, want)
			}
			return
		}
		if want := bf16Ref(x); got != want {
			t.Fatalf("Float32ToBF16(%#08x) = %#04x, want %#04x", x, got, want)
		}
	}
	for hi := range uint32(1 << 16) {
		for _, lo := range []uint32{0, 1, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff} {
			check(hi<<16 | lo)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(r.Uint32())
	}
}

func TestBF16RoundTripExhaustive(t *testing.T) {
	for b := range 1 << 16 {
		h := uint16(b)
		want := h
		if isNaN32(uint32(h) << 16) {
			want |= 0x40
		}
		if got := Float32ToBF16(BF16ToFloat32(h)); got != want {
			t.Fatalf("Float32ToBF16(BF16ToFloat32(%#04x)) = %#04x, want %#04x", h, got, want)
		}
	}
}

func TestF16Exhaustive(t *testing.T) {
	for b := range 1 << 16 {
		h := uint16(b)
		got := F16ToFloat32(h)
		if want := float16.Frombits(h).Float32(); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("F16ToFloat32(%#04x) = %#08x, x448 gives %#08x", h, math.Float32bits(got), math.Float32bits(want))
		}
		// Independently: (-1)^s · (e == 0 ? m·2^-24 : (1024+m)·2^(e-25)).
		s, e, m := h>>15, int(h>>10)&0x1f, float64(h&0x3ff)
		if e == 0x1f {
			if m == 0 && !math.IsInf(float64(got), 0) || m != 0 && !math.IsNaN(float64(got)) {
				t.Fatalf("F16ToFloat32(%#04x) = %v", h, got)
			}
			continue
		}
		v := math.Ldexp(m, -24)
		if e != 0 {
			v = math.Ldexp(1024+m, e-25)
		}
		if s == 1 {
			v = -v
		}
		if float64(got) != v || math.Signbit(float64(got)) != (s == 1) {
			t.Fatalf("F16ToFloat32(%#04x) = %v, want %v", h, got, v)
		}
		if back := Float32ToF16(got); back != h {
			t.Fatalf("Float32ToF16(F16ToFloat32(%#04x)) = %#04x", h, back)
		}
	}
}

// TestF16TableExhaustive decodes every pattern through ToFloat32, whose
// long-slice path uses the lookup table.
func TestF16TableExhaustive(t *testing.T) {
	src := make([]byte, 2<<16)
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint16(src[2*i:], uint16(i))
	}
	dst := make([]float32, 1<<16)
	if err := ToFloat32(F16, src, dst); err != nil {
		t.Fatal(err)
	}
	for i, v := range dst {
		if want := F16ToFloat32(uint16(i)); math.Float32bits(v) != math.Float32bits(want) {
			t.Fatalf("pattern %#04x: table gives %#08x, want %#08x", i, math.Float32bits(v), math.Float32bits(want))
		}
	}
}

// refDecode is the plain per-element reference for ToFloat32.
func refDecode(d DType, src []byte) []float32 {
	out := make([]float32, len(src)/d.Size())
	refDecodeInto(d, src, out)
	return out
}

// refDecodeInto is refDecode into dst, which holds len(src)/d.Size() elements.
func refDecodeInto(d DType, src []byte, out []float32) {
	for i := range out {
		switch d {
		case BF16:
			out[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		case F16:
			out[i] = float16.Frombits(binary.LittleEndian.Uint16(src[2*i:])).Float32()
		case F32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		case I32:
			out[i] = float32(int32(binary.LittleEndian.Uint32(src[4*i:])))
		case U8:
			out[i] = float32(src[i])
		}
	}
}

// refEncode is the plain per-element reference for FromFloat32.
func refEncode(d DType, src []float32) []byte {
	out := make([]byte, len(src)*d.Size())
	for i, f := range src {
		switch d {
		case BF16:
			binary.LittleEndian.PutUint16(out[2*i:], Float32ToBF16(f))
		case F16:
			binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(f).Bits())
		case F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
		}
	}
	return out
}

var tailSizes = []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 1023, 4096}

func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func TestToFloat32Values(t *testing.T) {
	tests := []struct {
		d    DType
		src  []byte
		want []float32
	}{
		{BF16, []byte{0x80, 0x3f, 0x00, 0xc0, 0x49, 0x40}, []float32{1, -2, 3.140625}},
		{F16, []byte{0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x7c}, []float32{1, -2, 0x1p-24, float32(math.Inf(1))}},
		{F32, []byte{0x00, 0x00, 0x80, 0x3f, 0xdb, 0x0f, 0x49, 0x40}, []float32{1, math.Pi}},
		{I32, []byte{0xff, 0xff, 0xff, 0xff, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01}, []float32{-1, 7, 16777217}},
		{U8, []byte{0, 1, 255}, []float32{0, 1, 255}},
	}
	for _, tt := range tests {
		t.Run(string(tt.d), func(t *testing.T) {
			dst := make([]float32, len(tt.want))
			if err := ToFloat32(tt.d, tt.src, dst); err != nil {
				t.Fatal(err)
			}
			for i := range dst {
				if dst[i] != tt.want[i] {
					t.Errorf("element %d = %v, want %v", i, dst[i], tt.want[i])
				}
			}
		})
	}
}

// TestToFloat32Tails compares the unrolled kernels with the per-element
// reference at sizes that hit every tail; results must be bitwise equal.
func TestToFloat32Tails(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, d := range []DType{BF16, F16, F32, I32, U8} {
		for _, n := range tailSizes {
			t.Run(fmt.Sprintf("%s/%d", d, n), func(t *testing.T) {
				src := make([]byte, n*d.Size())
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				dst := make([]float32, n)
				if err := ToFloat32(d, src, dst); err != nil {
					t.Fatal(err)
				}
				if i := sameBits(dst, refDecode(d, src)); i >= 0 {
					t.Fatalf("element %d differs from the reference", i)
				}
			})
		}
	}
}

func TestFromFloat32Tails(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range []DType{BF16, F16, F32} {
		for _, n := range tailSizes {
			t.Run(fmt.Sprintf("%s/%d", d, n), func(t *testing.T) {
				src := make([]float32, n)
				for i := range src {
					if i%3 == 0 {
						src[i] = math.Float32frombits(r.Uint32()) // any pattern, NaNs included
					} else {
						src[i] = float32(r.NormFloat64())
					}
				}
				got, err := FromFloat32(d, src)
				if err != nil {
					t.Fatal(err)
				}
				if want := refEncode(d, src); string(got) != string(want) {
					t.Fatalf("FromFloat32 differs from the reference")
				}
				put := make([]byte, n*d.Size())
				if err := PutFloat32(d, put, src); err != nil {
					t.Fatal(err)
				}
				if string(put) != string(got) {
					t.Fatalf("PutFloat32 differs from FromFloat32")
				}
			})
		}
	}
}

// TestRoundTrip encodes values that the dtype represents exactly and checks
// that decoding gives them back bit for bit.
func TestRoundTrip(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1.5, 0.25, 65504, float32(math.Inf(-1)), 3.0517578e-05}
	for _, d := range []DType{BF16, F16, F32} {
		t.Run(string(d), func(t *testing.T) {
			b, err := FromFloat32(d, vals)
			if err != nil {
				t.Fatal(err)
			}
			back := make([]float32, len(vals))
			if err := ToFloat32(d, b, back); err != nil {
				t.Fatal(err)
			}
			for i := range vals {
				want := vals[i]
				if d == BF16 {
					want = BF16ToFloat32(Float32ToBF16(want)) // 65504 is not a bf16
				}
				if math.Float32bits(back[i]) != math.Float32bits(want) {
					t.Errorf("%v came back as %v", vals[i], back[i])
				}
			}
		})
	}
}

func TestConversionErrors(t *testing.T) {
	tests := []struct {
		name string
		call func() error
		op   string
		is   error
	}{
		{"ToFloat32 odd BF16 bytes", func() error { return ToFloat32(BF16, make([]byte, 7), make([]float32, 4)) }, "ToFloat32", ErrLength},
		{"ToFloat32 short source", func() error { return ToFloat32(F32, make([]byte, 4), make([]float32, 2)) }, "ToFloat32", ErrLength},
		{"ToFloat32 long source", func() error { return ToFloat32(U8, make([]byte, 4), make([]float32, 2)) }, "ToFloat32", ErrLength},
		{"ToFloat32 nil dst", func() error { return ToFloat32(I32, make([]byte, 4), nil) }, "ToFloat32", ErrLength},
		{"ToFloat32 F64", func() error { return ToFloat32(F64, make([]byte, 8), make([]float32, 1)) }, "ToFloat32", ErrUnsupported},
		{"ToFloat32 unknown", func() error { return ToFloat32("X", nil, nil) }, "ToFloat32", ErrUnknown},
		{"ToFloat32 empty dtype", func() error { return ToFloat32("", nil, nil) }, "ToFloat32", ErrUnknown},
		{"FromFloat32 I32", func() error { _, err := FromFloat32(I32, []float32{1}); return err }, "FromFloat32", ErrUnsupported},
		{"FromFloat32 U8", func() error { _, err := FromFloat32(U8, nil); return err }, "FromFloat32", ErrUnsupported},
		{"FromFloat32 unknown", func() error { _, err := FromFloat32("bf16", nil); return err }, "FromFloat32", ErrUnknown},
		{"PutFloat32 short dst", func() error { return PutFloat32(BF16, make([]byte, 3), []float32{1, 2}) }, "PutFloat32", ErrLength},
		{"PutFloat32 long dst", func() error { return PutFloat32(F32, make([]byte, 12), []float32{1, 2}) }, "PutFloat32", ErrLength},
		{"PutFloat32 I8", func() error { return PutFloat32(I8, make([]byte, 1), []float32{1}) }, "PutFloat32", ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.is) {
				t.Fatalf("error %v, want one wrapping %v", err, tt.is)
			}
			var de *Error
			if !errors.As(err, &de) || de.Op != tt.op {
				t.Fatalf("error %#v, want *Error with Op %q", err, tt.op)
			}
		})
	}
}

// FuzzFloat32ToBF16 checks the rounding against the float64 reference.
func FuzzFloat32ToBF16(f *testing.F) {
	for _, x := range []uint32{0, 0x3f808000, 0x3f818000, 0x7f7fffff, 0x7f800001, 0xffffffff} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x uint32) {
		got := Float32ToBF16(math.Float32frombits(x))
		want := uint16(x>>16) | 0x40
		if !isNaN32(x) {
			want = bf16Ref(x)
		}
		if got != want {
			t.Fatalf("Float32ToBF16(%#08x) = %#04x, want %#04x", x, got, want)
		}
	})
}

// FuzzToFloat32 checks that arbitrary bytes and lengths never panic and that
// accepted input decodes like the reference.
func FuzzToFloat32(f *testing.F) {
	f.Add("BF16", []byte{0x80, 0x3f}, 1)
	f.Add("F16", []byte{0, 0x3c, 1, 2, 3}, 2)
	f.Add("I32", []byte{1, 2, 3, 4, 5, 6, 7, 8}, 2)
	f.Fuzz(func(t *testing.T, name string, src []byte, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		d := DType(name)
		dst := make([]float32, n)
		if err := ToFloat32(d, src, dst); err != nil {
			return
		}
		if i := sameBits(dst, refDecode(d, src)); i >= 0 {
			t.Fatalf("element %d differs from the reference", i)
		}
	})
}

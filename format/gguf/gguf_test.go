package gguf

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"
)

// TestQuantizeQ8_0Block checks blocks whose expected bytes were worked out
// by hand from ggml's definition (scale = max|x|/127 as float16; values
// x/scale rounded half away from zero).
func TestQuantizeQ8_0Block(t *testing.T) {
	tests := []struct {
		name string
		x    func(j int) float32
		want string // hex: 2-byte float16 scale, then 32 int8
	}{
		{
			name: "zeros",
			x:    func(int) float32 { return 0 },
			want: "0000" + strings.Repeat("00", 32),
		},
		{
			// max 127 gives scale 1 (float16 0x3c00) and the values
			// themselves; ±2.5 and 0.5 round away from zero (3, -3, 1),
			// where ties-to-even would give 2, -2, 0.
			name: "ties away from zero",
			x: func(j int) float32 {
				return []float32{127, -127, 2.5, -2.5, 0.5, -0.5, 1.49, -1.51}[j%8]
			},
			want: "003c" + strings.Repeat("7f81"+"03fd"+"01ff"+"01fe", 4),
		},
		{
			// max 16: scale 16/127 = 0.12598 → float16 0x3008 (0.125 +
			// 8·2⁻¹³); the reciprocal 127/16 = 7.9375 is exact, so x=1 →
			// 7.9375 → 8 and x=-16 → -127.
			name: "scale rounded to float16",
			x: func(j int) float32 {
				return []float32{-16, 1, 2, -3, 0, 0, 0, 0}[j%8]
			},
			want: "0830" + strings.Repeat("81"+"08"+"10"+"e8"+"00000000", 4),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var x [32]float32
			for j := range x {
				x[j] = tc.x(j)
			}
			var out [34]byte
			QuantizeQ8_0Block(&x, &out)
			if got := hex.EncodeToString(out[:]); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func values(v ...float32) func(func([]float32) error) error {
	return func(emit func([]float32) error) error { return emit(v) }
}

// TestWriteLayout writes a file with two metadata entries and two tensors
// and compares it with the bytes spelled out from the GGUF v3 layout.
func TestWriteLayout(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf,
		[]KV{{Key: "a.n", Value: uint32(7)}, {Key: "t", Value: []string{"x", "yz"}}},
		[]Tensor{
			{Name: "w", Dims: []uint64{2}, Type: F32, Values: values(1, -2)},
			{Name: "h", Dims: []uint64{1, 2}, Type: F16, Values: values(0.5, 65504)},
		})
	if err != nil {
		t.Fatal(err)
	}
	le32 := func(v uint32) string {
		return hex.EncodeToString([]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
	}
	le64 := func(v uint64) string { return le32(uint32(v)) + le32(uint32(v>>32)) }
	str := func(s string) string { return le64(uint64(len(s))) + hex.EncodeToString([]byte(s)) }
	header := hex.EncodeToString([]byte("GGUF")) + le32(3) + le64(2) + le64(2) +
		str("a.n") + le32(4) + le32(7) +
		str("t") + le32(9) + le32(8) + le64(2) + str("x") + str("yz") +
		str("w") + le32(1) + le64(2) + le32(0) + le64(0) +
		str("h") + le32(2) + le64(1) + le64(2) + le32(1) + le64(32)
	pad := func(s string) string {
		for len(s)/2%32 != 0 {
			s += "00"
		}
		return s
	}
	want := pad(header) +
		pad(le32(math.Float32bits(1))+le32(math.Float32bits(-2))) +
		pad("0038"+"ff7b") // float16 0.5 and 65504
	if got := hex.EncodeToString(buf.Bytes()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		meta    []KV
		tensors []Tensor
		want    string
	}{
		{"short tensor", nil, []Tensor{{Name: "w", Dims: []uint64{2, 2}, Type: F32, Values: values(1, 2)}}, `"w": values fill 8 of its 16 bytes`},
		{"long tensor", nil, []Tensor{{Name: "w", Dims: []uint64{2}, Type: F32, Values: values(1, 2, 3, 4)}}, `"w": more values`},
		{"partial row", nil, []Tensor{{Name: "w", Dims: []uint64{2, 2}, Type: F32, Values: values(1, 2, 3)}}, "not a whole number of rows"},
		{"q8_0 row", nil, []Tensor{{Name: "w", Dims: []uint64{33}, Type: Q8_0, Values: values()}}, `"w": rows of 33 values do not split into Q8_0 blocks of 32`},
		{"duplicate key", []KV{{Key: "k", Value: uint32(1)}, {Key: "k", Value: uint32(2)}}, nil, `key "k" given twice`},
		{"duplicate tensor", nil, []Tensor{{Name: "w", Dims: []uint64{1}, Type: F32, Values: values(1)}, {Name: "w", Dims: []uint64{1}, Type: F32, Values: values(1)}}, `"w" given twice`},
		{"value type", []KV{{Key: "k", Value: 1.5}}, nil, `"k": unsupported value type float64`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(&bytes.Buffer{}, tc.meta, tc.tensors)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseTensorType(t *testing.T) {
	for s, want := range map[string]TensorType{"q8_0": Q8_0, "Q8_0": Q8_0, "f16": F16, "bf16": BF16, "F32": F32} {
		if got, err := ParseTensorType(s); err != nil || got != want {
			t.Errorf("ParseTensorType(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseTensorType("q4_k"); err == nil {
		t.Error("q4_k accepted")
	}
}

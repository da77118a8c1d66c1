package safetensors

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzParseHeader feeds arbitrary headers and data lengths to the parser.
// It must never panic; every rejection must be a *FormatError; every
// accepted header must satisfy checkHeader and, when small enough to
// materialise, re-encode to a file that parses to the same tensors.
func FuzzParseHeader(f *testing.F) {
	// The real headers, except that the 41 kB model header is cut to its
	// first tensors: minimising the fuzzer's finds from a seed that size
	// stalls the workers for tens of seconds.
	for _, p := range allFixtures {
		header, dataLen := headerOf(f, p)
		if len(header) > 4096 {
			header, dataLen = shrinkHeader(f, header, dataLen, 6)
		}
		f.Add(header, dataLen)
	}
	for _, s := range []string{
		`{}`,
		`{"__metadata__":{"k":"v"}}`,
		`{"a":` + f32x2 + `}`,
		`{"a":` + f32x2 + `,"b":{"dtype":"U8","shape":[0],"data_offsets":[8,8]}}`,
		`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{}}`,
		`{"a":{"dtype":"F32","shape":[-1,99999999999999999999,1e3],"data_offsets":[0,8,9]}}`,
		`{"a":{"dtype":"F8_E5M2","shape":[[[]]],"data_offsets":{}}}`,
		`{"__metadata__":{"k":1},"__metadata__":null}`,
	} {
		f.Add([]byte(s), int64(8))
	}
	f.Fuzz(func(t *testing.T, header []byte, dataLen int64) {
		h, err := ParseHeader(header, dataLen)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			if fe.Error() == "" {
				t.Fatal("empty message")
			}
			return
		}
		checkHeader(t, h)
		if h.DataLen > 1<<20 {
			return
		}
		tensors := make([]Tensor, len(h.Tensors))
		for i, ti := range h.Tensors {
			tensors[i] = Tensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: make([]byte, ti.End-ti.Begin)}
		}
		b, err := Encode(tensors, h.Metadata)
		if err != nil {
			t.Fatalf("re-encoding an accepted header: %v", err)
		}
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24
		h2, err := ParseHeader(b[8:8+n], int64(len(b)-8-n))
		if err != nil {
			t.Fatalf("re-encoded header rejected: %v", err)
		}
		if len(h2.Tensors) != len(h.Tensors) || len(h2.Metadata) != len(h.Metadata) {
			t.Fatalf("re-encoded header differs: %d/%d tensors, %d/%d metadata", len(h2.Tensors), len(h.Tensors), len(h2.Metadata), len(h.Metadata))
		}
		for k, v := range h.Metadata {
			if h2.Metadata[k] != v {
				t.Fatalf("metadata %q: %q came back as %q", k, v, h2.Metadata[k])
			}
		}
		for i, a := range h.Tensors {
			b := h2.Tensors[i]
			if a.Name != b.Name || a.DType != b.DType || len(a.Shape) != len(b.Shape) || a.End-a.Begin != b.End-b.Begin {
				t.Fatalf("tensor %q came back as %+v", a.Name, b)
			}
			for j := range a.Shape {
				if a.Shape[j] != b.Shape[j] {
					t.Fatalf("tensor %q shape %v came back as %v", a.Name, a.Shape, b.Shape)
				}
			}
		}
	})
}

// shrinkHeader re-encodes n tensors spread over a header's name order,
// keeping their names, dtypes and shapes, and the metadata.
func shrinkHeader(t testing.TB, header []byte, dataLen int64, n int) ([]byte, int64) {
	t.Helper()
	h, err := ParseHeader(header, dataLen)
	if err != nil {
		t.Fatal(err)
	}
	var tensors []Tensor
	for i := 0; i < len(h.Tensors); i += max(1, len(h.Tensors)/n) {
		ti := h.Tensors[i]
		tensors = append(tensors, Tensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: make([]byte, ti.End-ti.Begin)})
	}
	b, err := Encode(tensors, h.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	hl := int(binary.LittleEndian.Uint64(b))
	return b[8 : 8+hl], int64(len(b) - 8 - hl)
}

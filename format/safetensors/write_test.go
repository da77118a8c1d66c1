package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/format/dtype"
)

var allDTypes = []dtype.DType{
	dtype.BF16, dtype.F16, dtype.F32, dtype.I32, dtype.U8,
	dtype.F64, dtype.I64, dtype.I16, dtype.I8, dtype.U16, dtype.U32, dtype.U64, dtype.BOOL,
	dtype.F8E4M3, dtype.F8E5M2,
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRoundTripEveryDType(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	shapes := [][]int64{{}, {0}, {1}, {2, 3}, {3, 1, 5}}
	var tensors []Tensor
	for _, d := range allDTypes {
		for i, s := range shapes {
			n := int64(d.Size())
			for _, x := range s {
				n *= x
			}
			tensors = append(tensors, Tensor{Name: fmt.Sprintf("%s.%d", d, i), DType: d, Shape: s, Data: randBytes(r, int(n))})
		}
	}
	meta := map[string]string{"format": "pt", "quote\"and\\": "<html> & \u2028 \x01 é"}
	path := filepath.Join(t.TempDir(), "all.safetensors")
	if err := Write(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Metadata(); !equalMaps(got, meta) {
		t.Errorf("Metadata() = %q, want %q", got, meta)
	}
	if len(f.Names()) != len(tensors) {
		t.Fatalf("%d tensors read, %d written", len(f.Names()), len(tensors))
	}
	for _, want := range tensors {
		t.Run(want.Name, func(t *testing.T) {
			info, ok := f.Info(want.Name)
			if !ok || info.DType != want.DType || !slices.Equal(info.Shape, want.Shape) {
				t.Fatalf("Info = %+v, %v", info, ok)
			}
			got, err := f.Bytes(want.Name)
			if err != nil || !bytes.Equal(got, want.Data) {
				t.Fatalf("Bytes differ (err %v)", err)
			}
			if !want.DType.Convertible() {
				return
			}
			fl, err := f.Float32(want.Name)
			if err != nil {
				t.Fatal(err)
			}
			ref := make([]float32, info.NumElements())
			if err := dtype.ToFloat32(want.DType, want.Data, ref); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(fl) != fmt.Sprint(ref) {
				t.Errorf("Float32 = %v, want %v", fl, ref)
			}
		})
	}
}

// TestGolden pins the exact bytes of a tiny file: layout order, field
// order, JSON spelling and padding.
func TestGolden(t *testing.T) {
	tensors := []Tensor{
		{Name: "b", DType: dtype.F32, Shape: []int64{2}, Data: []byte{0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}},
		{Name: "a", DType: dtype.U8, Shape: []int64{3}, Data: []byte{1, 2, 3}},
	}
	got, err := Encode(tensors, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("\x88\x00\x00\x00\x00\x00\x00\x00" +
		`{"__metadata__":{"k":"v"},` +
		`"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},` +
		`"b":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}}` +
		"    " +
		"\x01\x02\x03" +
		"\x00\x00\x80\x3f\x00\x00\x00\xc0")
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode:\n got %q\nwant %q", got, want)
	}
	var buf bytes.Buffer
	n, err := WriteTo(&buf, tensors, map[string]string{"k": "v"})
	if err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("WriteTo: n %d err %v, bytes equal %v", n, err, bytes.Equal(buf.Bytes(), want))
	}
	path := filepath.Join(t.TempDir(), "golden.safetensors")
	if err := Write(path, tensors, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("Write: %q, %v", b, err)
	}

	// No metadata: nil and empty are the same file, without __metadata__.
	for _, meta := range []map[string]string{nil, {}} {
		got, err := Encode(tensors[1:], meta)
		if err != nil {
			t.Fatal(err)
		}
		want := "\x38\x00\x00\x00\x00\x00\x00\x00" +
			`{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}` + "   " + "\x01\x02\x03"
		if string(got) != want {
			t.Errorf("Encode(meta %v):\n got %q\nwant %q", meta, got, want)
		}
	}
}

func TestDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	var tensors []Tensor
	for i := range 7 {
		d := allDTypes[i%len(allDTypes)]
		tensors = append(tensors, Tensor{Name: fmt.Sprintf("t%d", (i*5)%7), DType: d, Shape: []int64{int64(i + 1)}, Data: randBytes(r, (i+1)*d.Size())})
	}
	meta := map[string]string{"z": "1", "a": "2", "m": "3"}
	want, err := Encode(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i := range 20 {
		perm := slices.Clone(tensors)
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		m := map[string]string{}
		for _, k := range []string{"m", "z", "a"} {
			m[k] = meta[k]
		}
		got, err := Encode(perm, m)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("permutation %d: Encode gives different bytes (err %v)", i, err)
		}
		path := filepath.Join(dir, fmt.Sprintf("p%d.safetensors", i))
		if err := Write(path, perm, m); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, want) {
			t.Fatalf("permutation %d: Write gives different bytes", i)
		}
	}
	// The caller's slice keeps its order.
	if tensors[0].Name != "t0" || tensors[1].Name != "t5" {
		t.Errorf("Encode reordered the caller's slice: %s, %s", tensors[0].Name, tensors[1].Name)
	}
}

func TestHeaderPadding(t *testing.T) {
	for n := 1; n <= 24; n++ {
		name := string(bytes.Repeat([]byte("x"), n))
		for _, meta := range []map[string]string{nil, {"k": name}} {
			b, err := Encode([]Tensor{{Name: name, DType: dtype.U8, Shape: []int64{1}, Data: []byte{7}}}, meta)
			if err != nil {
				t.Fatal(err)
			}
			hlen := int(b[0]) | int(b[1])<<8
			if hlen%8 != 0 || (8+hlen)%8 != 0 {
				t.Errorf("name length %d: header length %d is not a multiple of 8", n, hlen)
			}
			if _, err := ParseHeader(b[8:8+hlen], int64(len(b)-8-hlen)); err != nil {
				t.Errorf("name length %d: %v", n, err)
			}
		}
	}
}

func TestWriteInvalid(t *testing.T) {
	ok := Tensor{Name: "ok", DType: dtype.U8, Shape: []int64{1}, Data: []byte{1}}
	tests := []struct {
		name    string
		tensors []Tensor
		meta    map[string]string
		tensor  string
		field   string
	}{
		{"empty name", []Tensor{ok, {Name: "", DType: dtype.U8, Shape: []int64{0}}}, nil, "", FieldName},
		{"duplicate name", []Tensor{ok, ok}, nil, "ok", FieldName},
		{"reserved name", []Tensor{{Name: "__metadata__", DType: dtype.U8, Shape: []int64{0}}}, nil, "__metadata__", FieldName},
		{"invalid UTF-8 name", []Tensor{{Name: "a\xff", DType: dtype.U8, Shape: []int64{0}}}, nil, "a\xff", FieldName},
		{"unknown dtype", []Tensor{{Name: "x", DType: "F128", Shape: []int64{0}}}, nil, "x", FieldDType},
		{"empty dtype", []Tensor{{Name: "x", Shape: []int64{0}}}, nil, "x", FieldDType},
		{"negative dim", []Tensor{{Name: "x", DType: dtype.U8, Shape: []int64{-1}}}, nil, "x", FieldShape},
		{"overflowing shape", []Tensor{{Name: "x", DType: dtype.F32, Shape: []int64{1 << 62}}}, nil, "x", FieldShape},
		{"short data", []Tensor{{Name: "x", DType: dtype.F32, Shape: []int64{2}, Data: make([]byte, 7)}}, nil, "x", FieldData},
		{"long data", []Tensor{{Name: "x", DType: dtype.BF16, Shape: []int64{2}, Data: make([]byte, 5)}}, nil, "x", FieldData},
		{"invalid UTF-8 metadata", []Tensor{ok}, map[string]string{"k": "\xc3"}, "", FieldMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.safetensors")
			err := Write(path, tt.tensors, tt.meta)
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != path || fe.Tensor != tt.tensor || fe.Field != tt.field {
				t.Fatalf("Write: %#v, want FormatError{Tensor %q Field %q}", err, tt.tensor, tt.field)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("Write left %v behind", entries)
			}
			if _, err := Encode(tt.tensors, tt.meta); !errors.As(err, &fe) || fe.File != "" || fe.Field != tt.field {
				t.Errorf("Encode: %v", err)
			}
		})
	}
}

func TestWriteFailureCleansUp(t *testing.T) {
	dir := t.TempDir()
	// A non-empty directory at the target makes the final rename fail.
	path := filepath.Join(dir, "out.safetensors")
	if err := os.MkdirAll(filepath.Join(path, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Write(path, []Tensor{{Name: "x", DType: dtype.U8, Shape: []int64{1}, Data: []byte{1}}}, nil)
	if err == nil {
		t.Fatal("Write over a directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "out.safetensors" || !entries[0].IsDir() {
		t.Errorf("directory holds %v after a failed Write", entries)
	}
	// A missing directory fails before anything is created.
	if err := Write(filepath.Join(dir, "missing", "x.safetensors"), nil, nil); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}

func TestWriteReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.safetensors")
	for i, v := range []byte{1, 2} {
		if err := Write(path, []Tensor{{Name: "x", DType: dtype.U8, Shape: []int64{1}, Data: []byte{v}}}, nil); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := f.Bytes("x")
		if b[0] != v {
			t.Errorf("write %d: read %d", i, b[0])
		}
		f.Close()
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %v", entries)
	}
}

// TestRewriteFixture reads the fixture model and writes it back: the result
// must be byte-identical, since the fixture is sorted by name and packed
// like this writer packs.
func TestRewriteFixture(t *testing.T) {
	f, err := Open(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tensors []Tensor
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		b, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: b})
	}
	got, err := Encode(tensors, f.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("rewriting the fixture gives different bytes (%d vs %d)", len(got), len(want))
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteToError(t *testing.T) {
	big := make([]byte, 3<<20)
	tensors := []Tensor{{Name: "big", DType: dtype.U8, Shape: []int64{int64(len(big))}, Data: big}}
	for _, limit := range []int{0, 10, 1 << 20, 2 << 20} {
		n, err := WriteTo(&failWriter{n: limit}, tensors, nil)
		if err == nil || n != int64(limit) {
			t.Errorf("limit %d: n %d err %v", limit, n, err)
		}
	}
}

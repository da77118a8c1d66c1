package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/format/dtype"
)

func TestOpenFixtures(t *testing.T) {
	tests := []struct {
		path     string
		count    int
		metadata map[string]string
		tensors  []TensorInfo // a few, checked exactly
	}{
		{modelPath, 357, map[string]string{"format": "pt"}, []TensorInfo{
			{Name: "model.embed_tokens.weight", DType: dtype.BF16, Shape: []int64{8192, 128}, Begin: 0, End: 2097152},
			{Name: "model.embedding_norm.weight", DType: dtype.BF16, Shape: []int64{128}, Begin: 2097152, End: 2097408},
			{Name: "model.layers.0.conv.conv.weight", DType: dtype.BF16, Shape: []int64{128, 1, 3}, Begin: 2097408, End: 2098176},
			{Name: "model.layers.7.self_attn.v_proj.weight", DType: dtype.BF16, Shape: []int64{64, 128}, Begin: 13091392, End: 13107776},
		}},
		{hiddenPath, 21, nil, []TensorInfo{
			{Name: "final_norm", DType: dtype.F32, Shape: []int64{66, 128}, Begin: 0, End: 33792},
			{Name: "hidden_states", DType: dtype.F32, Shape: []int64{9, 66, 128}, Begin: 33792, End: 337920},
			{Name: "input_ids", DType: dtype.I32, Shape: []int64{66}, Begin: 337920, End: 338184},
		}},
		{logitsPath, 24, map[string]string{"description": "reference: float32 logits from BF16 weights"}, []TensorInfo{
			{Name: "0.plain_prose.decode_logits", DType: dtype.F32, Shape: []int64{32, 8192}, Begin: 0, End: 1048576},
			{Name: "0.plain_prose.greedy_ids", DType: dtype.I32, Shape: []int64{32}, Begin: 1048576, End: 1048704},
		}},
		{calibPath, 1, map[string]string{"description": "128 x 256 calibration token ids (same as calibration.jsonl)"}, []TensorInfo{
			{Name: "input_ids", DType: dtype.I32, Shape: []int64{128, 256}, Begin: 0, End: 131072},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			f, err := Open(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Path() != tt.path {
				t.Errorf("Path() = %q", f.Path())
			}
			names := f.Names()
			if len(names) != tt.count || !slices.IsSorted(names) {
				t.Errorf("Names(): %d names, sorted %v; want %d sorted", len(names), slices.IsSorted(names), tt.count)
			}
			if tt.metadata != nil {
				if got := f.Metadata(); !equalMaps(got, tt.metadata) {
					t.Errorf("Metadata() = %v, want %v", got, tt.metadata)
				}
			}
			for _, want := range tt.tensors {
				got, ok := f.Info(want.Name)
				if !ok {
					t.Fatalf("Info(%q) not found", want.Name)
				}
				if got.Name != want.Name || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || got.Begin != want.Begin || got.End != want.End {
					t.Errorf("Info(%q) = %+v, want %+v", want.Name, got, want)
				}
				if n := got.NumElements(); n*int64(got.DType.Size()) != got.End-got.Begin {
					t.Errorf("NumElements() = %d", n)
				}
			}
			checkAgainstFile(t, f, tt.path)
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkAgainstFile compares what f reports with an independent decoding of
// the file: encoding/json for the header, plain slicing for the bytes.
func checkAgainstFile(t *testing.T, f *File, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	data := raw[8+n:]
	count := 0
	for name, msg := range hdr {
		if name == "__metadata__" {
			var m map[string]string
			if err := json.Unmarshal(msg, &m); err != nil {
				t.Fatal(err)
			}
			if !equalMaps(m, f.Metadata()) {
				t.Errorf("metadata %v, json gives %v", f.Metadata(), m)
			}
			continue
		}
		count++
		var e struct {
			DType       string   `json:"dtype"`
			Shape       []int64  `json:"shape"`
			DataOffsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			t.Fatal(err)
		}
		info, ok := f.Info(name)
		if !ok || string(info.DType) != e.DType || !slices.Equal(info.Shape, e.Shape) || info.Begin != e.DataOffsets[0] || info.End != e.DataOffsets[1] {
			t.Fatalf("Info(%q) = %+v, json gives %+v", name, info, e)
		}
		b, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(data[e.DataOffsets[0]:e.DataOffsets[1]]) || cap(b) != len(b) {
			t.Fatalf("Bytes(%q) differ from the file's bytes (len %d cap %d)", name, len(b), cap(b))
		}
	}
	if count != len(f.Names()) {
		t.Errorf("json has %d tensors, Names() %d", count, len(f.Names()))
	}
}

func TestFloat32Fixture(t *testing.T) {
	f, err := Open(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const name = "model.embedding_norm.weight"
	got, err := f.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := f.Bytes(name)
	if len(got) != 128 {
		t.Fatalf("len = %d", len(got))
	}
	for i, v := range got {
		if want := uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16; math.Float32bits(v) != want {
			t.Fatalf("element %d = %#08x, want %#08x", i, math.Float32bits(v), want)
		}
	}
}

// TestCalibrationIDs checks the I32 tensor against the same ids written as
// JSON, an independent source.
func TestCalibrationIDs(t *testing.T) {
	f, err := Open(calibPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids, err := f.Float32("input_ids")
	if err != nil {
		t.Fatal(err)
	}
	jf, err := os.Open(calibJSONL)
	if err != nil {
		t.Fatal(err)
	}
	defer jf.Close()
	sc := bufio.NewScanner(jf)
	sc.Buffer(nil, 1<<22)
	row := 0
	for sc.Scan() {
		var rec struct {
			InputIDs []int32 `json:"input_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.InputIDs) != 256 {
			t.Fatalf("row %d has %d ids", row, len(rec.InputIDs))
		}
		for j, id := range rec.InputIDs {
			if ids[row*256+j] != float32(id) {
				t.Fatalf("row %d id %d = %v, jsonl has %d", row, j, ids[row*256+j], id)
			}
		}
		row++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if row != 128 {
		t.Fatalf("%d rows in jsonl", row)
	}
}

func TestNotFoundAndClose(t *testing.T) {
	f, err := Open(calibPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Info("nope"); ok {
		t.Error("Info(nope) found")
	}
	for _, call := range []func() error{
		func() error { _, err := f.Bytes("nope"); return err },
		func() error { _, err := f.Float32("nope"); return err },
	} {
		err := call()
		var nf *NotFoundError
		if !errors.As(err, &nf) || nf.File != calibPath || nf.Tensor != "nope" {
			t.Errorf("error %v, want *NotFoundError for %s", err, calibPath)
		}
		if !strings.Contains(err.Error(), calibPath) {
			t.Errorf("error %q does not name the file", err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Bytes("input_ids"); !errors.Is(err, ErrClosed) {
		t.Errorf("Bytes after Close: %v", err)
	}
	if _, err := f.Float32("input_ids"); !errors.Is(err, ErrClosed) {
		t.Errorf("Float32 after Close: %v", err)
	}
	if err := f.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestFloat32Unconvertible(t *testing.T) {
	b, err := Encode([]Tensor{{Name: "x", DType: dtype.F64, Shape: []int64{1}, Data: make([]byte, 8)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := writeTemp(t, "f64.safetensors", b)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.Float32("x")
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Field != FieldDType || fe.Tensor != "x" || fe.File != p {
		t.Errorf("Float32 of F64: %v", err)
	}
}

func TestOpenNotAFile(t *testing.T) {
	if _, err := Open(t.TempDir()); err == nil {
		t.Error("Open(directory) succeeded")
	}
	_, err := Open("no/such/file.safetensors")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want ErrNotExist", err)
	}
}

func TestConcurrentReads(t *testing.T) {
	f, err := Open(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := f.Names()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(names); i += 4 {
				if _, err := f.Float32(names[i]); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

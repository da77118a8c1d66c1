package safetensors

import (
	"os"
	"testing"
)

// BenchmarkOpen opens and validates the fixture model (357 tensors, a 41 kB
// header); bytes/s counts the header, which is what Open reads and parses.
func BenchmarkOpen(b *testing.B) {
	header, _ := headerOf(b, modelPath)
	b.SetBytes(int64(len(header)))
	for b.Loop() {
		f, err := Open(modelPath)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkParseHeader is BenchmarkOpen without the file system.
func BenchmarkParseHeader(b *testing.B) {
	header, dataLen := headerOf(b, modelPath)
	b.SetBytes(int64(len(header)))
	for b.Loop() {
		if _, err := ParseHeader(header, dataLen); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloat32BF16 converts the fixture's BF16 embedding table
// (8192×128, 2 MiB); bytes/s counts the BF16 source bytes.
func BenchmarkFloat32BF16(b *testing.B) {
	f, err := Open(modelPath)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const name = "model.embed_tokens.weight"
	info, _ := f.Info(name)
	b.SetBytes(info.End - info.Begin)
	for b.Loop() {
		if _, err := f.Float32(name); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite writes the fixture model back to a temporary file,
// including fsync; bytes/s counts the file.
func BenchmarkWrite(b *testing.B) {
	f, err := Open(modelPath)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var tensors []Tensor
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		d, _ := f.Bytes(name)
		tensors = append(tensors, Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: d})
	}
	st, err := os.Stat(modelPath)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	path := b.TempDir() + "/out.safetensors"
	for b.Loop() {
		if err := Write(path, tensors, f.Metadata()); err != nil {
			b.Fatal(err)
		}
	}
}

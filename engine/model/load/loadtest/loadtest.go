// Package loadtest makes damaged copies of checkpoints for the tests of
// the commands and packages that load them.
package loadtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/safetensors"
)

// Damaged copies the Hugging Face checkpoint in src into a temporary
// directory of t with element index of the BF16 tensor set to the bits v
// (a NaN or an infinity, to test that a damaged weight is refused).
func Damaged(t testing.TB, src, tensor string, index int, v uint16) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "model.safetensors" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.Tensor
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		b, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		b = append([]byte(nil), b...)
		if name == tensor {
			if info.DType != dtype.BF16 {
				t.Fatalf("%s is %s", name, info.DType)
			}
			b[2*index], b[2*index+1] = byte(v), byte(v>>8)
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: b})
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

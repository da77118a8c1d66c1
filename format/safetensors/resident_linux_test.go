package safetensors

import (
	"bytes"
	"path/filepath"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/lfmq/lfmq/format/dtype"
)

// TestOpenResident: a file of a few huge pages opened resident holds the
// file's bytes, in read-only memory on a huge-page boundary where huge
// pages are on and memory allows (a write faults), which ReleasePages
// leaves alone and Close unmaps; a file under one huge page is mapped as
// Open maps it.
func TestOpenResident(t *testing.T) {
	const n = 5 << 20
	a := make([]byte, n)
	for i := range a {
		a[i] = byte(i*7 + 1)
	}
	small := []byte("a tensor far smaller than a huge page")
	dir := t.TempDir()
	big, little := filepath.Join(dir, "big.safetensors"), filepath.Join(dir, "small.safetensors")
	if err := Write(big, []Tensor{{Name: "a", DType: dtype.U8, Shape: []int64{n}, Data: a}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Write(little, []Tensor{{Name: "s", DType: dtype.U8, Shape: []int64{int64(len(small))}, Data: small}}, nil); err != nil {
		t.Fatal(err)
	}

	f, err := OpenResident(big)
	if err != nil {
		t.Fatal(err)
	}
	want := hugePagesOn() && memoryFor(n+4096)
	if f.Resident() != want {
		t.Fatalf("Resident() = %v, want %v (huge pages on: %v)", f.Resident(), want, hugePagesOn())
	}
	check := func() {
		t.Helper()
		got, err := f.Bytes("a")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) {
			t.Fatal("tensor a's bytes differ from those written")
		}
	}
	check()
	if f.Resident() {
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(f.buf))); p%hugePage != 0 {
			t.Errorf("the copy starts at %#x, not on a huge-page boundary", p)
		}
		if inMapping(f.buf) {
			t.Error("a resident copy is listed among the file mappings that Write gives pages back from")
		}
		// A write faults: the copy is read-only.
		func() {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if recover() == nil {
					t.Error("a write to the resident copy did not fault")
				}
			}()
			f.buf[len(f.buf)-1] ^= 1
		}()
	}
	if err := f.ReleasePages(); err != nil {
		t.Fatal(err)
	}
	check()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Resident() {
		t.Error("Resident() after Close")
	}

	s, err := OpenResident(little)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Resident() || !s.mapped {
		t.Errorf("a %d-byte file: Resident() %v, mapped %v; want it mapped", len(small), s.Resident(), s.mapped)
	}
	if got, err := s.Bytes("s"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("small file: %q, %v", got, err)
	}
}

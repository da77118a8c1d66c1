package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/lfmq/lfmq/format/dtype"
)

// writeBig writes a safetensors file of one 5 MiB tensor, "a", and returns
// its path and the tensor's bytes.
func writeBig(t *testing.T) (string, []byte) {
	t.Helper()
	const n = 5 << 20
	a := make([]byte, n)
	for i := range a {
		a[i] = byte(i*7 + 1)
	}
	path := filepath.Join(t.TempDir(), "big.safetensors")
	if err := Write(path, []Tensor{{Name: "a", DType: dtype.U8, Shape: []int64{n}, Data: a}}, nil); err != nil {
		t.Fatal(err)
	}
	return path, a
}

// TestCopyResident: the copy holds the file's bytes, starts on a huge-page
// boundary and is read-only (a write faults), whatever the machine's huge
// page setting, which only decides whether OpenResident copies.
func TestCopyResident(t *testing.T) {
	path, _ := writeBig(t)
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf, region, err := copyResident(f, len(want))
	if err != nil || buf == nil {
		t.Fatalf("copyResident: buf %v, %v", buf != nil, err)
	}
	if !bytes.Equal(buf, want) {
		t.Error("the copy differs from the file")
	}
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(buf))); p%hugePage != 0 {
		t.Errorf("the copy starts at %#x, not on a huge-page boundary", p)
	}
	func() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if recover() == nil {
				t.Error("a write to the copy did not fault")
			}
		}()
		buf[len(buf)-1] ^= 1
	}()
	if err := unmapRegion(region); err != nil {
		t.Fatal(err)
	}
}

// TestOpenResident: a file of a few huge pages opened resident is read in
// where huge pages are on and memory allows, and mapped otherwise; its
// tensors read the same either way, before and after ReleasePages (which
// leaves a resident copy alone), a resident copy is not among the mappings
// Write gives pages back from, and Close ends it. A file under one huge
// page is mapped as Open maps it.
func TestOpenResident(t *testing.T) {
	big, a := writeBig(t)
	small := []byte("a tensor far smaller than a huge page")
	little := filepath.Join(t.TempDir(), "small.safetensors")
	if err := Write(little, []Tensor{{Name: "s", DType: dtype.U8, Shape: []int64{int64(len(small))}, Data: small}}, nil); err != nil {
		t.Fatal(err)
	}

	f, err := OpenResident(big)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(big)
	if err != nil {
		t.Fatal(err)
	}
	if want := hugePagesOn() && memoryFor(int(st.Size())); f.Resident() != want || f.mapped == want {
		t.Fatalf("Resident() = %v, mapped %v; want resident %v (huge pages on: %v)", f.Resident(), f.mapped, want, hugePagesOn())
	}
	if f.Resident() && inMapping(f.buf) {
		t.Error("a resident copy is listed among the file mappings that Write gives pages back from")
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

// TestMemoryFor: a size of a few bytes fits and one past the address space
// does not, on this machine's /proc/meminfo.
func TestMemoryFor(t *testing.T) {
	if !memoryFor(4096) {
		t.Error("memoryFor(4096): false")
	}
	if memoryFor(1 << 62) {
		t.Error("memoryFor(2^62): true")
	}
}

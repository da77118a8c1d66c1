package safetensors

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/lfmq/lfmq/format/dtype"
)

// mappedRSS returns the resident bytes of the mapping that starts at buf[0],
// as /proc/self/smaps reports them.
func mappedRSS(t *testing.T, buf []byte) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&buf[0])))
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, start) {
			in = true
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			kb, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping at %s in /proc/self/smaps", start)
	return 0
}

// TestReleasePages: pages read through Bytes count in the process's
// resident set until ReleasePages (whole file) or ReleaseTensorPages (a
// range of one tensor's pages) drops them, and the bytes read afterwards
// are the file's.
func TestReleasePages(t *testing.T) {
	const n = 4 << 20 // bytes per tensor: 1,024 pages
	a, b := make([]byte, n), make([]byte, n)
	for i := range a {
		a[i], b[i] = byte(i*7+1), byte(i*13+5)
	}
	path := filepath.Join(t.TempDir(), "two.safetensors")
	if err := Write(path, []Tensor{{Name: "a", DType: dtype.U8, Shape: []int64{n}, Data: a}, {Name: "b", DType: dtype.U8, Shape: []int64{n}, Data: b}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	touch := func(name string, want []byte) {
		t.Helper()
		got, err := f.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%s: the mapped bytes differ from those written", name)
		}
	}
	touch("a", a)
	touch("b", b)
	if rss := mappedRSS(t, f.buf); rss < 2*n {
		t.Fatalf("after reading both tensors %d bytes of the mapping are resident, want at least %d", rss, 2*n)
	}
	// The first half of a, then the rest: at least those pages go (the
	// kernel may drop the rest of a huge page the range is in), and b's
	// stay, but for the page it shares with a.
	page := int64(os.Getpagesize())
	for _, r := range [][2]int64{{0, n / 2}, {n / 2, n}} {
		if err := f.ReleaseTensorPages("a", r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		if rss := mappedRSS(t, f.buf); rss < n-page || rss > 2*n-r[1]+2*page {
			t.Fatalf("after releasing bytes [0, %d) of a, %d bytes of the mapping are resident, want b's %d and at most %d of a", r[1], rss, n, n-r[1])
		}
	}
	touch("a", a)
	if err := f.ReleasePages(); err != nil {
		t.Fatal(err)
	}
	if rss := mappedRSS(t, f.buf); rss != 0 {
		t.Fatalf("after ReleasePages %d bytes of the mapping are resident, want 0", rss)
	}
	touch("a", a)
	touch("b", b)

	var nf *NotFoundError
	if err := f.ReleaseTensorPages("c", 0, 1); !errors.As(err, &nf) || nf.Tensor != "c" {
		t.Errorf("ReleaseTensorPages of an unknown tensor: %v, want a *NotFoundError naming it", err)
	}
	for _, r := range [][2]int64{{-1, 1}, {2, 1}, {0, n + 1}} {
		if err := f.ReleaseTensorPages("a", r[0], r[1]); err == nil || !strings.Contains(err.Error(), `"a"`) {
			t.Errorf("ReleaseTensorPages(a, %d, %d): %v, want an error naming the tensor", r[0], r[1], err)
		}
	}
	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if err := g.ReleasePages(); !errors.Is(err, ErrClosed) {
		t.Errorf("ReleasePages after Close: %v, want ErrClosed", err)
	}
	if err := g.ReleaseTensorPages("a", 0, n); !errors.Is(err, ErrClosed) {
		t.Errorf("ReleaseTensorPages after Close: %v, want ErrClosed", err)
	}
}

// TestWriteFromMapping: writing a tensor straight from an open File's
// mapping drops the pages it copied from the process's resident memory and
// writes the same bytes; a tensor on the heap is written as it is, and its
// bytes are left alone.
func TestWriteFromMapping(t *testing.T) {
	const n = 3*writeChunk + 12345
	a := make([]byte, n)
	for i := range a {
		a[i] = byte(i*31 + 7)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src.safetensors")
	if err := Write(src, []Tensor{{Name: "a", DType: dtype.U8, Shape: []int64{n}, Data: a}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := f.Bytes("a")
	if err != nil {
		t.Fatal(err)
	}
	if string(m) != string(a) {
		t.Fatal("the mapped bytes differ from those written")
	}
	if rss := mappedRSS(t, f.buf); rss < n {
		t.Fatalf("after reading the tensor %d bytes of the mapping are resident, want at least %d", rss, n)
	}
	heap := make([]byte, n)
	copy(heap, a)
	out := filepath.Join(dir, "out.safetensors")
	if err := Write(out, []Tensor{{Name: "a", DType: dtype.U8, Shape: []int64{n}, Data: m}, {Name: "h", DType: dtype.U8, Shape: []int64{n}, Data: heap}}, nil); err != nil {
		t.Fatal(err)
	}
	// A page at each chunk's ends may stay, and the header's.
	page := int64(os.Getpagesize())
	if rss := mappedRSS(t, f.buf); rss > 10*page {
		t.Errorf("after writing the tensor from the mapping %d bytes of it are resident, want at most %d", rss, 10*page)
	}
	if string(heap) != string(a) {
		t.Error("writing changed the heap tensor's bytes")
	}
	g, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, name := range []string{"a", "h"} {
		b, err := g.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(a) {
			t.Errorf("%s: the written bytes differ from the source's", name)
		}
	}
}

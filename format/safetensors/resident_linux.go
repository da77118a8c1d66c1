//go:build linux

package safetensors

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on Linux's x86-64 and
// arm64 (4 KiB base pages).
const hugePage = 2 << 20

// loadResident reads the first size bytes of f into anonymous memory
// aligned to and advised for transparent huge pages, and makes it
// read-only; region is the whole mapping, for unmap. ok is false, with
// nothing allocated, where that would not pay or is not safe: a file under
// one huge page, huge pages turned off (/sys/kernel/mm/transparent_hugepage/enabled
// "never"), or less than twice size of available memory (the bytes, unlike
// a file mapping's, cannot be given back to the page cache under
// pressure). A failed read is returned.
func loadResident(f *os.File, size int) (buf, region []byte, ok bool, err error) {
	if size < hugePage || !hugePagesOn() || !memoryFor(size) {
		return nil, nil, false, nil
	}
	region, merr := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if merr != nil {
		return nil, nil, false, nil
	}
	off := int((hugePage - uintptr(unsafe.Pointer(unsafe.SliceData(region)))%hugePage) % hugePage)
	buf = region[off : off+size]
	// Advice only: refused, the bytes are the same on small pages.
	_ = unix.Madvise(buf, unix.MADV_HUGEPAGE)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, int64(size)), buf); err != nil {
		_ = unix.Munmap(region)
		return nil, nil, false, err
	}
	// Read-only, as a mapping of the file is: a stray write faults
	// instead of changing a weight.
	if err := unix.Mprotect(region, unix.PROT_READ); err != nil {
		_ = unix.Munmap(region)
		return nil, nil, false, nil
	}
	return buf, region, true, nil
}

// hugePagesOn reports whether the kernel gives transparent huge pages to
// memory advised for them ("always" or "madvise").
func hugePagesOn() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && (bytes.Contains(b, []byte("[always]")) || bytes.Contains(b, []byte("[madvise]")))
}

// memoryFor reports whether /proc/meminfo's MemAvailable is at least twice
// size bytes.
func memoryFor(size int) bool {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		v, found := bytes.CutPrefix(s.Bytes(), []byte("MemAvailable:"))
		if !found {
			continue
		}
		kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
		return err == nil && kb/2 >= int64(size)>>10
	}
	return false
}

func unmapRegion(region []byte) error { return unix.Munmap(region) }

//go:build linux

package safetensors

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on Linux's x86-64 and
// arm64 (4 KiB base pages).
const hugePage = 2 << 20

// loadResident reads f's first size bytes into the process's memory
// (copyResident) where that pays and is safe, and otherwise returns a nil
// buf for the caller to map the file: a file under one huge page, huge
// pages turned off (/sys/kernel/mm/transparent_hugepage/enabled "never"),
// or available memory under twice size (the bytes, unlike a file
// mapping's, cannot be given back to the page cache under pressure).
func loadResident(f *os.File, size int) (buf, region []byte, err error) {
	if size < hugePage || !hugePagesOn() || !memoryFor(size) {
		return nil, nil, nil
	}
	return copyResident(f, size)
}

// copyResident reads the first size bytes of f into anonymous memory
// aligned to and advised for transparent huge pages, and makes it
// read-only; region is the whole mapping, for unmap. A nil buf with a nil
// error is a mapping the kernel refused, for the caller to map the file
// instead; a failed read is returned.
func copyResident(f *os.File, size int) (buf, region []byte, err error) {
	region, err = unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, nil
	}
	off := int((hugePage - uintptr(unsafe.Pointer(unsafe.SliceData(region)))%hugePage) % hugePage)
	buf = region[off : off+size]
	// Advice only: refused, the bytes are the same on small pages.
	_ = unix.Madvise(buf, unix.MADV_HUGEPAGE)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, int64(size)), buf); err != nil {
		_ = unix.Munmap(region)
		return nil, nil, err
	}
	// Read-only, as a mapping of the file is: a stray write faults
	// instead of changing a weight.
	if err := unix.Mprotect(region, unix.PROT_READ); err != nil {
		_ = unix.Munmap(region)
		return nil, nil, nil
	}
	return buf, region, nil
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
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "MemAvailable:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return err == nil && kb/2 >= int64(size)>>10
		}
	}
	return false
}

func unmapRegion(region []byte) error { return unix.Munmap(region) }

//go:build unix

package safetensors

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// load maps the first size bytes of f read-only. The mapping outlives f.
func load(f *os.File, size int) (buf []byte, mapped bool, err error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return nil, false, err
	}
	var merr error
	if err := conn.Control(func(fd uintptr) {
		buf, merr = syscall.Mmap(int(fd), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	}); err != nil {
		return nil, false, err
	}
	if merr != nil {
		return nil, false, &os.PathError{Op: "mmap", Path: f.Name(), Err: merr}
	}
	return buf, true, nil
}

func unmap(buf []byte) error { return syscall.Munmap(buf) }

// dropPages tells the kernel that this process no longer needs the mapped
// pages of b (page-aligned, part of a read-only shared mapping): they leave
// the process's resident set and stay in the page cache, so a later read
// faults them back in with the file's bytes.
func dropPages(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }

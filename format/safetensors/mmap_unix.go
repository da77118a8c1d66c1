//go:build unix

package safetensors

import (
	"os"
	"syscall"
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

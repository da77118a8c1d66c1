//go:build !unix

package safetensors

import (
	"io"
	"os"
)

// load reads the first size bytes of f into memory: the fallback where the
// syscall package has no mmap.
func load(f *os.File, size int) (buf []byte, mapped bool, err error) {
	buf = make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, int64(size)), buf); err != nil {
		return nil, false, err
	}
	return buf, false, nil
}

func unmap([]byte) error { return nil }

// dropPages does nothing: a heap copy has no mapping to give back.
func dropPages([]byte) error { return nil }

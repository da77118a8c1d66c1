package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"slices"
	"sync"

	"github.com/lfmq/lfmq/format/dtype"
)

// File is an open safetensors file. Its methods are safe for concurrent use.
type File struct {
	path   string
	header *Header
	names  []string // sorted

	mu     sync.RWMutex
	buf    []byte // the whole file: a read-only mapping, a resident copy or a heap copy
	data   []byte // buf's data section
	mapped bool   // whether buf is a mapping of the file, to unmap
	region []byte // a resident copy's anonymous mapping, to unmap (OpenResident)
}

// Open opens, memory-maps and validates the safetensors file at path. A file
// that breaks the format gives a *FormatError naming path; other failures
// (missing file, mapping failure) are returned wrapped.
//
// The mapping is read-only and shared with the page cache, so opening a
// large checkpoint costs address space, not memory. Changing or truncating
// the file while it is open is undefined behaviour (on most systems a
// truncated mapping faults), as it is for any memory-mapped reader.
func Open(path string) (*File, error) { return open(path, false) }

// OpenResident is Open that reads the file into the process's own memory,
// on transparent huge pages (Linux), instead of mapping it: for a reader
// that streams the same large tensors again and again, as a decode step
// does its weights. A mapping of the page cache goes on 4 KiB pages, one
// TLB entry each, and the row kernels' jumps between the tile rows of a
// matrix miss the TLB every few microseconds; on a virtual machine each
// miss walks two sets of page tables. Huge pages made LFM3-1.7B's decode
// step 6 to 9 % faster on the development VM (docs/lfm3.md). The copy
// costs a read of the whole file when it is opened, and its memory is the
// process's: ReleasePages does nothing for it. Where it would not pay or
// is not safe (a file under 2 MiB, huge pages turned off, available memory
// under twice the file) the file is mapped as Open maps it; Resident tells
// which it got.
func OpenResident(path string) (*File, error) { return open(path, true) }

func open(path string, resident bool) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("safetensors: %s: not a regular file", path)
	}
	size := st.Size()
	if size < 8 {
		return nil, &FormatError{File: path, Field: FieldHeaderSize,
			Msg: fmt.Sprintf("file is %d bytes, too short for the 8-byte header size", size)}
	}
	// Bound the header before mapping or parsing anything.
	var prefix [8]byte
	if _, err := f.ReadAt(prefix[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if err := checkHeaderSize(binary.LittleEndian.Uint64(prefix[:]), size); err != nil {
		err.File = path
		return nil, err
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("safetensors: %s: %d bytes do not fit in this process's address space", path, size)
	}
	var buf, region []byte
	if resident {
		if buf, region, err = loadResident(f, int(size)); err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", path, err)
		}
	}
	mapped := false
	if buf == nil {
		buf, mapped, err = load(f, int(size))
		if err != nil {
			return nil, fmt.Errorf("safetensors: %w", err)
		}
	}
	sf, err := newFile(path, buf)
	if err != nil {
		if mapped {
			_ = unmap(buf)
		}
		if region != nil {
			_ = unmapRegion(region)
		}
		return nil, err
	}
	sf.mapped, sf.region = mapped, region
	if mapped {
		registerMapping(sf)
	}
	return sf, nil
}

// checkHeaderSize validates the header length n read from the prefix of a
// file of size bytes (size >= 8).
func checkHeaderSize(n uint64, size int64) *FormatError {
	switch {
	case n == 0:
		return &FormatError{Field: FieldHeaderSize, Msg: "header size is 0"}
	case n > MaxHeaderSize:
		return &FormatError{Field: FieldHeaderSize,
			Msg: fmt.Sprintf("header size %d exceeds the limit of %d", n, MaxHeaderSize)}
	case n > uint64(size-8):
		return &FormatError{Field: FieldHeaderSize,
			Msg: fmt.Sprintf("header size %d exceeds the %d bytes after the size prefix (file truncated?)", n, size-8)}
	}
	return nil
}

// newFile validates buf, a whole safetensors file, and wraps it.
func newFile(path string, buf []byte) (*File, error) {
	if len(buf) < 8 {
		return nil, &FormatError{File: path, Field: FieldHeaderSize,
			Msg: fmt.Sprintf("file is %d bytes, too short for the 8-byte header size", len(buf))}
	}
	n := binary.LittleEndian.Uint64(buf)
	if err := checkHeaderSize(n, int64(len(buf))); err != nil {
		err.File = path
		return nil, err
	}
	dataStart := 8 + int(n)
	h, err := ParseHeader(buf[8:dataStart], int64(len(buf)-dataStart))
	if err != nil {
		if fe, ok := err.(*FormatError); ok {
			fe.File = path
		}
		return nil, err
	}
	names := make([]string, len(h.Tensors))
	for i, t := range h.Tensors {
		names[i] = t.Name
	}
	return &File{path: path, header: h, names: names, buf: buf, data: buf[dataStart:]}, nil
}

// Path returns the path the file was opened with.
func (f *File) Path() string { return f.path }

// Names returns the names of the file's tensors, sorted.
func (f *File) Names() []string { return slices.Clone(f.names) }

// Info describes the tensor called name. The shape is the caller's copy.
func (f *File) Info(name string) (TensorInfo, bool) {
	t, ok := f.header.Tensor(name)
	if ok {
		t.Shape = slices.Clone(t.Shape)
	}
	return t, ok
}

// Metadata returns a copy of the header's __metadata__ (empty, not nil, if
// the header has none).
func (f *File) Metadata() map[string]string {
	m := make(map[string]string, len(f.header.Metadata))
	for k, v := range f.header.Metadata {
		m[k] = v
	}
	return m
}

// Bytes returns the little-endian bytes of the tensor called name without
// copying them. The slice aliases the file's read-only mapping: writing to it
// faults, and it must not be used after Close. An unknown name gives a
// *NotFoundError.
func (f *File) Bytes(name string) ([]byte, error) {
	t, ok := f.header.Tensor(name)
	if !ok {
		return nil, &NotFoundError{File: f.path, Tensor: name}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.buf == nil {
		return nil, fmt.Errorf("safetensors: %s: %w", f.path, ErrClosed)
	}
	// The capacity ends with the tensor, so an append cannot reach the next.
	return f.data[t.Begin:t.End:t.End], nil
}

// Float32 returns a float32 copy of the tensor called name, which must be
// BF16, F16, F32, I32 or U8 (see dtype.ToFloat32).
func (f *File) Float32(name string) ([]float32, error) {
	t, ok := f.header.Tensor(name)
	if !ok {
		return nil, &NotFoundError{File: f.path, Tensor: name}
	}
	if !t.DType.Convertible() {
		return nil, &FormatError{File: f.path, Tensor: name, Field: FieldDType,
			Msg: fmt.Sprintf("%s does not convert to float32", t.DType)}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.buf == nil {
		return nil, fmt.Errorf("safetensors: %s: %w", f.path, ErrClosed)
	}
	out := make([]float32, t.NumElements())
	if err := dtype.ToFloat32(t.DType, f.data[t.Begin:t.End], out); err != nil {
		// Unreachable for a validated header; kept so a bug cannot pass silently.
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", f.path, name, err)
	}
	return out, nil
}

// ReleaseAll calls ReleasePages on each of files and joins their errors:
// a checkpoint of several files gives back every file's pages.
func ReleaseAll(files iter.Seq[*File]) error {
	var errs []error
	for f := range files {
		if err := f.ReleasePages(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReleasePages drops the file's pages from the process's resident memory.
// Every page of the mapping that has been read counts in the process's
// resident set (RSS) until it is unmapped, so a long run that reads a whole
// checkpoint once, part by part, would end holding all of it; a caller
// that is done with the pages it read calls ReleasePages. The bytes stay
// in the page cache (the kernel frees them under pressure) and a later
// read faults them back in unchanged, so slices from Bytes stay valid.
// It does nothing for a file read into the process's memory (OpenResident,
// or the heap on systems without mmap): its pages are not the page cache's.
func (f *File) ReleasePages() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.buf == nil {
		return fmt.Errorf("safetensors: %s: %w", f.path, ErrClosed)
	}
	if !f.mapped {
		return nil
	}
	if err := dropPages(f.buf); err != nil {
		return fmt.Errorf("safetensors: %s: madvise: %w", f.path, err)
	}
	return nil
}

// ReleaseTensorPages is ReleasePages for the pages that hold bytes
// [begin, end) of the tensor called name (and the neighbouring bytes that
// share their first and last page), for a caller that reads a large
// tensor piece by piece. An unknown name gives a *NotFoundError, a range
// outside the tensor an error naming it.
func (f *File) ReleaseTensorPages(name string, begin, end int64) error {
	t, ok := f.header.Tensor(name)
	if !ok {
		return &NotFoundError{File: f.path, Tensor: name}
	}
	if begin < 0 || end < begin || end > t.End-t.Begin {
		return fmt.Errorf("safetensors: %s: tensor %q: bytes [%d, %d) outside its %d", f.path, name, begin, end, t.End-t.Begin)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.buf == nil {
		return fmt.Errorf("safetensors: %s: %w", f.path, ErrClosed)
	}
	if !f.mapped || end == begin {
		return nil
	}
	// The mapping starts on a page boundary; the range is widened to whole
	// pages, which madvise requires.
	page := int64(os.Getpagesize())
	off := int64(len(f.buf)-len(f.data)) + t.Begin
	lo := (off + begin) / page * page
	hi := min(int64(len(f.buf)), (off+end+page-1)/page*page)
	if err := dropPages(f.buf[lo:hi]); err != nil {
		return fmt.Errorf("safetensors: %s: madvise: %w", f.path, err)
	}
	return nil
}

// Close releases the mapping. Slices returned by Bytes become invalid.
// Closing twice returns an error wrapping ErrClosed.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buf == nil {
		return fmt.Errorf("safetensors: %s: %w", f.path, ErrClosed)
	}
	unregisterMapping(f)
	buf, region := f.buf, f.region
	f.buf, f.data, f.region = nil, nil, nil
	if f.mapped {
		if err := unmap(buf); err != nil {
			return fmt.Errorf("safetensors: %s: munmap: %w", f.path, err)
		}
	}
	if region != nil {
		if err := unmapRegion(region); err != nil {
			return fmt.Errorf("safetensors: %s: munmap: %w", f.path, err)
		}
	}
	return nil
}

// Resident reports whether OpenResident read the file into the process's
// memory (false: it is mapped, or read into the heap where nothing can be
// mapped).
func (f *File) Resident() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.region != nil
}

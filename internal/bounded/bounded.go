package bounded

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// TooLargeError is a file or stream that holds more than Limit bytes.
type TooLargeError struct {
	Name  string // the file's path; empty for a stream
	Size  int64  // the file's size; -1 when only "more than Limit" is known
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("bounded: %s: more than %d bytes", e.Name, e.Limit)
	}
	return fmt.Sprintf("bounded: %s: %d bytes, more than %d", e.Name, e.Size, e.Limit)
}

// NotRegularError is a path ReadRegularFile refused: a directory, device,
// pipe or socket, which could block or never end.
type NotRegularError struct{ Name string }

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("bounded: %s: not a regular file", e.Name)
}

// ReadError is a file that opened but could not be read. Its text is the
// cause's alone, so that a caller can frame it as it always has ("reading
// PATH: ..."); errors.As tells it from a failure to open.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }

func (e *ReadError) Unwrap() error { return e.Err }

// Read reads r to its end, at most limit bytes: more is a *TooLargeError
// (Size −1). An error of r is returned as it is, with nothing read.
func Read(r io.Reader, limit int64) ([]byte, error) {
	return ReadSized(r, limit, 0)
}

// ReadSized is Read with a buffer sized once for hint bytes (capped at
// limit): a body of hundreds of megabytes whose size is known is not
// grown and copied again as it arrives.
func ReadSized(r io.Reader, limit, hint int64) ([]byte, error) {
	var buf bytes.Buffer
	if hint > 0 {
		// MinRead more than the data, so that reading its end does not
		// grow the buffer again.
		buf.Grow(int(min(hint, limit)) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, &TooLargeError{Size: -1, Limit: limit}
	}
	return buf.Bytes(), nil
}

// ReadFile reads the file at path when it holds at most limit bytes.
// Failing to open or stat it returns os's error as it is; a file over
// the limit is a *TooLargeError, a failed read a *ReadError.
func ReadFile(path string, limit int64) ([]byte, error) {
	return readPath(path, limit, false)
}

// ReadRegularFile is ReadFile for a path that must name a regular file
// (a *NotRegularError otherwise): a key or list file given by a person,
// where a FIFO or a device would block.
func ReadRegularFile(path string, limit int64) ([]byte, error) {
	return readPath(path, limit, true)
}

// ReadRootFile is ReadFile for name inside root, which it cannot leave.
func ReadRootFile(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := Read(f, limit)
	return data, named(err, name)
}

func readPath(path string, limit int64, regular bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpen(f, path, limit, regular)
}

// readOpen reads an opened file: the size it reports is checked first, so
// that a large file is refused before a byte is read, and the read is
// still bounded, for a file that grows or reports no size.
func readOpen(f *os.File, name string, limit int64, regular bool) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case regular && !st.Mode().IsRegular():
		return nil, &NotRegularError{Name: name}
	case st.Mode().IsRegular() && st.Size() > limit:
		return nil, &TooLargeError{Name: name, Size: st.Size(), Limit: limit}
	}
	hint := int64(0)
	if st.Mode().IsRegular() {
		hint = st.Size()
	}
	data, err := ReadSized(f, limit, hint)
	return data, named(err, name)
}

// named gives a stream's TooLargeError the file's name and marks any
// other error as a failed read.
func named(err error, name string) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *TooLargeError:
		e.Name = name
		return e
	default:
		return &ReadError{Err: err}
	}
}

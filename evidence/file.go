package evidence

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write writes f to path as canonical JSON, atomically.
func Write(path string, f *File) error {
	data, err := Marshal(f)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}

// Read reads and parses the evidence file at path.
func Read(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("evidence: reading %s: %w", path, err)
	}
	return Parse(path, data)
}

// AtomicFile is a file that appears under its name only when Commit
// succeeds: it is written to a temporary name in the same directory,
// synced, renamed, and the directory synced (style.md §7).
type AtomicFile struct {
	f    *os.File
	path string
	done bool
}

// CreateAtomic starts writing the file path.
func CreateAtomic(path string) (*AtomicFile, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	return &AtomicFile{f: f, path: path}, nil
}

// Write implements io.Writer.
func (a *AtomicFile) Write(p []byte) (int, error) { return a.f.Write(p) }

// Commit makes the file appear under its name.
func (a *AtomicFile) Commit() error {
	if a.done {
		return errors.New("evidence: AtomicFile committed or aborted twice")
	}
	a.done = true
	tmp := a.f.Name()
	err := a.f.Sync()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, a.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("evidence: writing %s: %w", a.path, err)
	}
	if d, err := os.Open(filepath.Dir(a.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Abort discards the file; it is a no-op after Commit.
func (a *AtomicFile) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.f.Close()
	os.Remove(a.f.Name())
}

// WriteFileAtomic writes data to path atomically.
func WriteFileAtomic(path string, data []byte) error {
	a, err := CreateAtomic(path)
	if err != nil {
		return err
	}
	if _, err := a.Write(data); err != nil {
		a.Abort()
		return fmt.Errorf("evidence: writing %s: %w", path, err)
	}
	return a.Commit()
}

package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File is a file that appears under its name only when Commit succeeds:
// it is written to a temporary name in the same directory, synced,
// renamed, and the directory synced, so a crash leaves the old file or the
// new one, never a torn one.
type File struct {
	f    *os.File
	path string
	done bool
}

// Create starts writing the file path.
func Create(path string) (*File, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("durable: %w", err)
	}
	return &File{f: f, path: path}, nil
}

// Write implements io.Writer.
func (a *File) Write(p []byte) (int, error) { return a.f.Write(p) }

// Commit makes the file appear under its name.
func (a *File) Commit() error {
	if a.done {
		return errors.New("durable: File committed or aborted twice")
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
		return fmt.Errorf("durable: writing %s: %w", a.path, err)
	}
	return SyncDir(filepath.Dir(a.path))
}

// Abort discards the file; it is a no-op after Commit.
func (a *File) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.f.Close()
	os.Remove(a.f.Name())
}

// WriteFile writes data to path atomically, mode 0644.
func WriteFile(path string, data []byte) error {
	a, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := a.Write(data); err != nil {
		a.Abort()
		return fmt.Errorf("durable: writing %s: %w", path, err)
	}
	return a.Commit()
}

// Rename gives a finished file, written under the temporary name part, its
// final name: it syncs the file, renames it and syncs the directory, so a
// crash leaves the file complete under one of the two names.
func Rename(part, final string) error {
	f, err := os.OpenFile(part, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(part, final)
	}
	if err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	return SyncDir(filepath.Dir(final))
}

package lfmq1

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// HashFiles hashes every file the manifest lists and compares it with the
// manifest: the CheckFiles check, as a step of its own, so that a loader
// can open a checkpoint with CheckStructure (fast, whatever its size) and
// hash it while it already works. Files are hashed up to four at a time.
// The result joins one *MismatchError per file that differs, sorted by
// path; it is ctx.Err() if ctx ends first.
func (c *Checkpoint) HashFiles(ctx context.Context) error {
	files := c.Manifest.Files
	findings := make([]error, len(files))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, fe := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sum, _, err := hashFile(ctx, filepath.Join(c.Dir, fe.Path))
			switch {
			case err != nil:
				findings[i] = err
			case sum != fe.SHA256:
				findings[i] = &MismatchError{Path: fe.Path, Kind: "hash", Want: fe.SHA256, Got: sum}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	var out []error
	for _, f := range findings {
		if f != nil {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Error() < out[j].Error() })
	return errors.Join(out...)
}

// hashFile returns the sha256 of the file at path and its size, reading
// 1 MiB at a time and stopping between reads once ctx ends.
func hashFile(ctx context.Context, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("lfmq1: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", n, err
		}
		m, err := f.Read(buf)
		h.Write(buf[:m])
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", n, fmt.Errorf("lfmq1: reading %s: %w", path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

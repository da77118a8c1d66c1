package evidence

import (
	"fmt"
	"io"
	"os"

	"github.com/lfmq/lfmq/format/durable"
)

// Write writes f to path as canonical JSON, atomically.
func Write(path string, f *File) error {
	data, err := Marshal(f)
	if err != nil {
		return err
	}
	return durable.WriteFile(path, data)
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

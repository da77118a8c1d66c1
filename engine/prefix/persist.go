package prefix

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/format/durable"
)

// FileName is the prefix cache's file inside a server's cache directory.
const FileName = "prefix-cache.lfmq"

// fileMagic starts the file; a JSON header line follows.
const fileMagic = "lfmq-prefix-cache-1\n"

// Header says whose state a saved cache holds: blocks are only reused by
// the same weights (Identity, the checkpoint identity) computed by the
// same engine (Runtime: version, source digest and binary hash), because
// only then are they bit-identical to what the server would compute.
type Header struct {
	Identity string `json:"identity"`
	Runtime  string `json:"runtime"`
	Blocks   int    `json:"blocks"`
}

// StaleError reports a saved cache that belongs to other weights or
// another engine; the server starts cold instead.
type StaleError struct {
	Path      string
	Field     string
	Want, Got string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("prefix: %s: %s is %q, this server's is %q", e.Path, e.Field, e.Got, e.Want)
}

// maxSpanBytes bounds one saved block (a 64-token block of a model with a
// 32k-wide KV would be 16 MiB; anything past 1 GiB is corrupt).
const maxSpanBytes = 1 << 30

// Save writes the cache to path atomically (temporary file, fsync,
// rename), least recently used block first, so that Load restores the
// order.
func (c *Cache) Save(path string, h Header) error {
	// A block whose drafter context was given up is not kept
	// (kv.Span.DraftGone): a server that reads it back could not draft
	// from it, and the next to compute the block stores it whole.
	var keep []*entry // least recently used first
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		if e := el.Value.(*entry); !e.span.DraftGone() {
			keep = append(keep, e)
		}
	}
	h.Blocks = len(keep)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	defer os.Remove(tmp)
	w := bufio.NewWriterSize(f, 1<<20)
	hj, _ := json.Marshal(h)
	w.WriteString(fileMagic)
	w.Write(hj)
	w.WriteByte('\n')
	for _, e := range keep {
		data, err := e.span.MarshalBinary()
		if err != nil {
			f.Close()
			return fmt.Errorf("prefix: %w", err)
		}
		w.Write(e.key[:])
		w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(data))))
		w.Write(data)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("prefix: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("prefix: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	return durable.SyncDir(filepath.Dir(path))
}

// SpanReader decodes a saved block into a span: *model.KVPool (into its
// pages) or *model.Model (its own pool).
type SpanReader interface {
	UnmarshalSpan(data []byte) (*kv.Span, error)
}

// Load reads a cache saved by Save into c, as long as its header matches
// want (else a *StaleError and nothing is loaded) and within limit tokens
// (the most recently used blocks are kept; only those are decoded, into
// pages of m). A missing file loads nothing and is no error; a corrupt one
// is an error and loads nothing.
func (c *Cache) Load(path string, want Header, m SpanReader, limit int) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("prefix: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	bad := func(msg string) (int, error) { return 0, fmt.Errorf("prefix: %s: %s", path, msg) }
	magic := make([]byte, len(fileMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != fileMagic {
		return bad("not a prefix cache file")
	}
	line, err := r.ReadSlice('\n')
	if err != nil {
		return bad("truncated header")
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return bad("header: " + err.Error())
	}
	switch {
	case h.Identity != want.Identity:
		return 0, &StaleError{Path: path, Field: "identity", Want: want.Identity, Got: h.Identity}
	case h.Runtime != want.Runtime:
		return 0, &StaleError{Path: path, Field: "runtime", Want: want.Runtime, Got: h.Runtime}
	case h.Blocks < 0:
		return bad("negative block count")
	}
	type block struct {
		key  Key
		data []byte
	}
	var blocks []block
	for i := range h.Blocks {
		var b block
		var n [8]byte
		if _, err := io.ReadFull(r, b.key[:]); err != nil {
			return bad(fmt.Sprintf("block %d: truncated", i))
		}
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return bad(fmt.Sprintf("block %d: truncated", i))
		}
		size := binary.LittleEndian.Uint64(n[:])
		if size > maxSpanBytes {
			return bad(fmt.Sprintf("block %d: %d bytes", i, size))
		}
		// Read in steps, so that a corrupt size costs no more memory than
		// the file holds.
		var data bytes.Buffer
		if n, err := io.CopyN(&data, r, int64(size)); err != nil || n != int64(size) {
			return bad(fmt.Sprintf("block %d: truncated", i))
		}
		b.data = data.Bytes()
		blocks = append(blocks, b)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return bad("trailing bytes")
	}
	// The file holds the least recently used block first: decode the
	// newest blocks that fit limit (BlockSize tokens each).
	first := max(0, len(blocks)-max(0, limit)/BlockSize)
	spans := make([]*kv.Span, 0, len(blocks)-first)
	freeAll := func() {
		for _, sp := range spans {
			sp.Free()
		}
	}
	for i, b := range blocks[first:] {
		sp, err := m.UnmarshalSpan(b.data)
		if err != nil {
			freeAll()
			return bad(fmt.Sprintf("block %d: %v", first+i, err))
		}
		if sp.End()-sp.Start() != BlockSize {
			spans = append(spans, sp)
			freeAll()
			return bad(fmt.Sprintf("block %d: %d tokens, not a block of %d", first+i, sp.End()-sp.Start(), BlockSize))
		}
		spans = append(spans, sp)
	}
	for i, sp := range spans {
		c.Insert(blocks[first+i].key, sp)
	}
	return c.Blocks(), nil
}

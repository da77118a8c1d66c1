// Package hf opens a Hugging Face checkpoint directory: a single
// model.safetensors or shards listed by model.safetensors.index.json, seen as
// one set of named tensors.
//
// It resolves names to shards and checks that the index and the shards agree;
// it knows nothing of any model's tensor names or shapes (engine/config does).
package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/lfmq/lfmq/format/safetensors"
	"github.com/lfmq/lfmq/internal/bounded"
)

// IndexFile is the name of the shard index of a sharded checkpoint.
const IndexFile = "model.safetensors.index.json"

// SingleFile is the name of an unsharded checkpoint's weights.
const SingleFile = "model.safetensors"

// maxIndexBytes bounds the shard index; real ones are tens of kilobytes.
const maxIndexBytes = 64 << 20

// Error reports a checkpoint directory that cannot be read as a set of
// tensors. File is the offending file, Tensor the tensor when one is at fault.
type Error struct {
	File   string
	Tensor string
	Msg    string
}

func (e *Error) Error() string {
	if e.Tensor != "" {
		return fmt.Sprintf("hf: %s: tensor %q: %s", e.File, e.Tensor, e.Msg)
	}
	return fmt.Sprintf("hf: %s: %s", e.File, e.Msg)
}

// Checkpoint is an open Hugging Face checkpoint. Tensor bytes are memory-mapped
// and valid until Close.
type Checkpoint struct {
	dir    string
	files  []*safetensors.File
	byName map[string]*safetensors.File
	names  []string
}

// Open opens the safetensors weights of dir.
func Open(dir string) (*Checkpoint, error) { return open(dir, safetensors.Open) }

// OpenResident is Open with the shards read into the process's memory on
// transparent huge pages where that pays (safetensors.OpenResident): for
// an engine that streams the weights at every decode step.
func OpenResident(dir string) (*Checkpoint, error) { return open(dir, safetensors.OpenResident) }

// open is Open with openFile opening each shard.
func open(dir string, openFile func(string) (*safetensors.File, error)) (*Checkpoint, error) {
	shards, err := shardList(dir)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{dir: dir, byName: map[string]*safetensors.File{}}
	for _, shard := range shards.files {
		f, err := openFile(filepath.Join(dir, shard))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.files = append(c.files, f)
		for _, name := range f.Names() {
			if prev, dup := c.byName[name]; dup {
				c.Close()
				return nil, &Error{File: f.Path(), Tensor: name, Msg: "also present in " + prev.Path()}
			}
			c.byName[name] = f
			c.names = append(c.names, name)
		}
	}
	if shards.weightMap != nil {
		if err := c.checkIndex(shards.weightMap); err != nil {
			c.Close()
			return nil, err
		}
	}
	sort.Strings(c.names)
	return c, nil
}

// Shards returns the safetensors files a checkpoint directory's weights
// are in, sorted: the shards model.safetensors.index.json names, or
// model.safetensors alone. It reads the index only; the files named may be
// missing.
func Shards(dir string) ([]string, error) {
	s, err := shardList(dir)
	return s.files, err
}

type shardSet struct {
	files     []string
	weightMap map[string]string
}

func shardList(dir string) (shardSet, error) {
	indexPath := filepath.Join(dir, IndexFile)
	data, err := readBounded(indexPath, maxIndexBytes)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, SingleFile)); err != nil {
			return shardSet{}, &Error{File: dir, Msg: "no " + SingleFile + " and no " + IndexFile + " (is this a Hugging Face checkpoint directory?)"}
		}
		return shardSet{files: []string{SingleFile}}, nil
	}
	if err != nil {
		return shardSet{}, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return shardSet{}, &Error{File: indexPath, Msg: "invalid JSON: " + err.Error()}
	}
	if len(idx.WeightMap) == 0 {
		return shardSet{}, &Error{File: indexPath, Msg: "weight_map is missing or empty"}
	}
	seen := map[string]bool{}
	var files []string
	for name, shard := range idx.WeightMap {
		if shard == "" || strings.ContainsAny(shard, `/\`) || shard == "." || shard == ".." {
			return shardSet{}, &Error{File: indexPath, Tensor: name, Msg: fmt.Sprintf("shard %q is not a plain file name in the checkpoint directory", shard)}
		}
		if !seen[shard] {
			seen[shard] = true
			files = append(files, shard)
		}
	}
	sort.Strings(files)
	return shardSet{files: files, weightMap: idx.WeightMap}, nil
}

func (c *Checkpoint) checkIndex(weightMap map[string]string) error {
	indexPath := filepath.Join(c.dir, IndexFile)
	var errs []error
	for name, shard := range weightMap {
		f, ok := c.byName[name]
		if !ok {
			errs = append(errs, &Error{File: indexPath, Tensor: name, Msg: "listed in the index but absent from " + shard})
			continue
		}
		if filepath.Base(f.Path()) != shard {
			errs = append(errs, &Error{File: indexPath, Tensor: name, Msg: fmt.Sprintf("index says %s, found in %s", shard, filepath.Base(f.Path()))})
		}
	}
	for _, name := range c.names {
		if _, ok := weightMap[name]; !ok {
			errs = append(errs, &Error{File: c.byName[name].Path(), Tensor: name, Msg: "not listed in " + IndexFile})
		}
	}
	sortErrors(errs)
	return errors.Join(errs...)
}

func sortErrors(errs []error) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
}

func readBounded(path string, limit int64) ([]byte, error) {
	data, err := bounded.ReadFile(path, limit)
	var big *bounded.TooLargeError
	if errors.As(err, &big) {
		return nil, &Error{File: path, Msg: fmt.Sprintf("%d bytes, larger than the %d-byte limit", big.Size, limit)}
	}
	if _, ok := err.(*bounded.ReadError); ok {
		return nil, fmt.Errorf("hf: %s: %w", path, err)
	}
	return data, err
}

// Dir returns the checkpoint directory.
func (c *Checkpoint) Dir() string { return c.dir }

// Names returns every tensor name, sorted.
func (c *Checkpoint) Names() []string { return append([]string(nil), c.names...) }

// Info describes the named tensor.
func (c *Checkpoint) Info(name string) (safetensors.TensorInfo, bool) {
	f, ok := c.byName[name]
	if !ok {
		return safetensors.TensorInfo{}, false
	}
	return f.Info(name)
}

// File returns the shard holding the named tensor.
func (c *Checkpoint) File(name string) (*safetensors.File, bool) {
	f, ok := c.byName[name]
	return f, ok
}

// Bytes returns the raw little-endian bytes of the named tensor (memory-mapped,
// read-only).
func (c *Checkpoint) Bytes(name string) ([]byte, error) {
	f, ok := c.byName[name]
	if !ok {
		return nil, &Error{File: c.dir, Tensor: name, Msg: "no such tensor in the checkpoint"}
	}
	return f.Bytes(name)
}

// Float32 returns the named tensor converted to float32.
func (c *Checkpoint) Float32(name string) ([]float32, error) {
	f, ok := c.byName[name]
	if !ok {
		return nil, &Error{File: c.dir, Tensor: name, Msg: "no such tensor in the checkpoint"}
	}
	return f.Float32(name)
}

// ReleasePages drops every shard's pages that the process has read from
// its resident memory (safetensors.File.ReleasePages): they stay in the
// page cache, and slices from Bytes stay valid.
func (c *Checkpoint) ReleasePages() error {
	return safetensors.ReleaseAll(slices.Values(c.files))
}

// ReleaseTensorPages is ReleasePages for the pages of bytes [begin, end)
// of the named tensor (safetensors.File.ReleaseTensorPages).
func (c *Checkpoint) ReleaseTensorPages(name string, begin, end int64) error {
	f, ok := c.byName[name]
	if !ok {
		return &Error{File: c.dir, Tensor: name, Msg: "no such tensor in the checkpoint"}
	}
	return f.ReleaseTensorPages(name, begin, end)
}

// Close unmaps every shard.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.files = nil
	return errors.Join(errs...)
}

// cacheCommit and cacheRepo match the commit and OWNER/NAME of a
// Hugging Face cache path.
var (
	cacheCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)
	cacheRepo   = regexp.MustCompile(`^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$`)
)

// CacheOrigin returns the repository and commit of a directory that is a
// snapshot of the Hugging Face cache (…/models--OWNER--NAME/snapshots/COMMIT,
// or a link to one), so that a checkpoint read from the cache records where
// it came from whichever way it was named; ok is false for any other
// directory.
func CacheOrigin(dir string) (repo, commit string, ok bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", false
	}
	if repo, commit, ok := cachePath(abs); ok {
		return repo, commit, true
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return cachePath(real)
	}
	return "", "", false
}

// cachePath parses a clean absolute snapshot path.
func cachePath(abs string) (repo, commit string, ok bool) {
	commit = filepath.Base(abs)
	snapshots := filepath.Dir(abs)
	if !cacheCommit.MatchString(commit) || filepath.Base(snapshots) != "snapshots" {
		return "", "", false
	}
	rest, found := strings.CutPrefix(filepath.Base(filepath.Dir(snapshots)), "models--")
	owner, name, found2 := strings.Cut(rest, "--")
	repo = owner + "/" + name
	if !found || !found2 || !cacheRepo.MatchString(repo) {
		return "", "", false
	}
	return repo, commit, true
}

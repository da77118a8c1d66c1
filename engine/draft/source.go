package draft

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// Architecture is the manifest architecture of a drafter quantized by lfmq
// quantize --drafter: an lfmq-1 checkpoint of DSpark tensors
// (docs/lfmq-1.md, "A drafter").
const Architecture = lfmq1.DrafterArchitecture

// CheckpointFile is the safetensors file of a quantized drafter: every
// tensor, under the names the published drafter gives them.
const CheckpointFile = "drafter.safetensors"

// storage is how a tensor's bytes hold its values.
type storage string

const (
	storeBF16 storage = "BF16"
	storeF16  storage = "F16"
	storeF32  storage = "F32"
	// storeBFP8 is BFP8 tiles of an lfmq-1 checkpoint (docs/bfp.md).
	storeBFP8 storage = "BFP8"
)

// dtype is the element type of a float storage.
func (s storage) dtype() dtype.DType { return dtype.DType(s) }

// tensorInfo is a tensor's logical shape and storage.
type tensorInfo struct {
	shape []int
	store storage
}

// source is where a drafter's tensors are read from: the published
// safetensors, an lfmq-1 checkpoint or tensors in memory.
type source interface {
	names() []string
	info(name string) (tensorInfo, bool)
	bytes(name string) ([]byte, error)
	// file is the path of the file holding name, for errors.
	file(name string) (string, bool)
	close() error
}

// openSource opens the drafter's tensors in dir: an lfmq-1 checkpoint when
// dir holds a manifest, else the published safetensors.
func openSource(dir string) (source, error) {
	if lfmq1.IsCheckpoint(dir) {
		return openLFMQ1(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, CheckpointFile)); err == nil {
		// A quantized drafter's file without its manifest: its BFP8
		// tiles cannot be checked, and as safetensors they are U8.
		return nil, &TensorError{Dir: dir, File: filepath.Join(dir, CheckpointFile), Tensor: "*",
			Msg: "the file of a quantized drafter, but " + lfmq1.ManifestFile + " is missing: without it the drafter cannot be checked; copy the whole drafter directory again"}
	}
	ck, err := hf.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("drafter: %w", err)
	}
	return &hfSource{ck}, nil
}

type hfSource struct{ ck *hf.Checkpoint }

func (s *hfSource) names() []string { return s.ck.Names() }
func (s *hfSource) close() error    { return s.ck.Close() }

func (s *hfSource) info(name string) (tensorInfo, bool) {
	info, ok := s.ck.Info(name)
	if !ok {
		return tensorInfo{}, false
	}
	return tensorInfo{shape: ints(info.Shape), store: storage(info.DType)}, true
}

func (s *hfSource) bytes(name string) ([]byte, error) { return s.ck.Bytes(name) }

func (s *hfSource) file(name string) (string, bool) {
	f, ok := s.ck.File(name)
	if !ok {
		return "", false
	}
	return f.Path(), true
}

// lfmq1Source is a quantized drafter. Its files are hashed against the
// manifest when it is opened (lfmq1.CheckFiles): a drafter is a few
// hundred megabytes at most, read whole at once, so there is nothing to
// gain from checking it in the background as a model's checkpoint is.
type lfmq1Source struct {
	dir string
	ck  *lfmq1.Checkpoint
}

func openLFMQ1(dir string) (source, error) {
	// What the manifest says it is comes first: a model's checkpoint
	// given as a drafter is refused as such, not file by file.
	man, _, err := lfmq1.ReadManifest(dir)
	if err != nil {
		return nil, fmt.Errorf("drafter %s: %w", dir, err)
	}
	if a := man.Architecture; a != Architecture {
		return nil, fmt.Errorf("drafter %s: %s says architecture %q, want %q: this lfmq-1 checkpoint is not a drafter (lfmq quantize --drafter writes one)",
			dir, filepath.Join(dir, lfmq1.ManifestFile), a, Architecture)
	}
	ck, err := lfmq1.Open(dir, lfmq1.CheckFiles)
	if err != nil {
		return nil, fmt.Errorf("drafter %s: %w", dir, err)
	}
	return &lfmq1Source{dir: dir, ck: ck}, nil
}

func (s *lfmq1Source) close() error { return s.ck.Close() }

func (s *lfmq1Source) names() []string {
	out := make([]string, len(s.ck.Manifest.Tensors))
	for i, t := range s.ck.Manifest.Tensors {
		out[i] = t.Name
	}
	return out
}

func (s *lfmq1Source) info(name string) (tensorInfo, bool) {
	e, ok := s.ck.Manifest.Tensor(name)
	if !ok {
		return tensorInfo{}, false
	}
	return tensorInfo{shape: ints(e.Shape), store: lfmq1Storage(e.Format, e.DType)}, true
}

func (s *lfmq1Source) bytes(name string) ([]byte, error) {
	t, err := s.ck.Tensor(name)
	if err != nil {
		return nil, err
	}
	return t.Data, nil
}

func (s *lfmq1Source) file(name string) (string, bool) {
	e, ok := s.ck.Manifest.Tensor(name)
	if !ok {
		return "", false
	}
	return filepath.Join(s.dir, e.File), true
}

// lfmq1Storage is the storage of an lfmq-1 tensor. The manifest's format
// must agree with the stored dtype (lfmq1.Open checked the dtype against
// the manifest), or the bytes would be misread: any other pair is refused
// by the loader as a dtype it cannot run.
func lfmq1Storage(f lfmq1.TensorFormat, dt string) storage {
	switch {
	case f == lfmq1.BF16 && dt == string(dtype.BF16):
		return storeBF16
	case f == lfmq1.F32 && dt == string(dtype.F32):
		return storeF32
	case f == lfmq1.BFP8 && dt == string(dtype.U8):
		return storeBFP8
	}
	return storage(fmt.Sprintf("%s stored as %s", f, dt))
}

// memSource is tensors in memory, as an lfmq-1 drafter stores them
// (FromTensors).
type memSource struct {
	byName map[string]lfmq1.Tensor
	order  []string
}

func (s *memSource) names() []string { return s.order }
func (s *memSource) close() error    { return nil }

func (s *memSource) info(name string) (tensorInfo, bool) {
	t, ok := s.byName[name]
	if !ok {
		return tensorInfo{}, false
	}
	return tensorInfo{shape: ints(t.Shape), store: lfmq1Storage(t.Format, string(t.DType))}, true
}

func (s *memSource) bytes(name string) ([]byte, error) {
	t, ok := s.byName[name]
	if !ok {
		return nil, errors.New("no tensor " + name)
	}
	return t.Data, nil
}

func (s *memSource) file(string) (string, bool) { return "", false }

func ints(s []int64) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[i] = int(v)
	}
	return out
}

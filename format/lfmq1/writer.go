package lfmq1

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/format/safetensors"
)

// Tensor is one tensor to store.
type Tensor struct {
	Name   string
	Format TensorFormat
	// Shape is the logical (Hugging Face) shape.
	Shape []int64
	// DType and StoredShape describe Data as safetensors stores it: U8
	// [tiles, tile_bytes] for BFP, else the element type and Shape.
	DType       dtype.DType
	StoredShape []int64
	Data        []byte
}

// Writer builds a checkpoint in a temporary sibling directory and moves it
// into place on Commit, so an interrupted run never leaves a directory that
// looks like a checkpoint.
type Writer struct {
	final     string
	tmp       string
	resumable bool
	tensors   []TensorEntry
	files     []FileEntry
	names     map[string]bool
	done      bool
}

// Create starts a checkpoint that Commit will place at dir. dir must not exist
// or be an empty directory.
func Create(dir string) (*Writer, error) {
	if err := checkFinal(dir); err != nil {
		return nil, err
	}
	final := absDir(dir)
	parent := filepath.Dir(final)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("lfmq1: %w", err)
	}
	tmp, err := mkdirUnique(parent, "."+filepath.Base(final)+".partial-")
	if err != nil {
		return nil, fmt.Errorf("lfmq1: %w", err)
	}
	return &Writer{final: final, tmp: tmp, names: map[string]bool{}}, nil
}

// absDir is dir made absolute, so that an output given as "." (an empty
// current directory) or ".." is built beside it, under its own name, and
// renamed into place, rather than inside itself.
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return filepath.Clean(dir)
}

// mkdirUnique makes a new directory parent/prefix<random> with mode 0755
// less the umask. It is os.MkdirTemp but for the mode: MkdirTemp's 0700
// would become the checkpoint's, readable by its owner alone, where a
// resumable run's directory (os.Mkdir, 0755) is readable by all.
func mkdirUnique(parent, prefix string) (string, error) {
	for range 1000 {
		dir := filepath.Join(parent, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		err := os.Mkdir(dir, 0o755)
		if !errors.Is(err, fs.ErrExist) {
			return dir, err
		}
	}
	return "", fmt.Errorf("no unused name %s* in %s", prefix, parent)
}

// OutputExistsError refuses to write a checkpoint into a directory that
// already holds something: lfmq never overwrites.
type OutputExistsError struct{ Dir string }

func (e *OutputExistsError) Error() string {
	return fmt.Sprintf("lfmq1: output directory %s exists and is not empty; give a new directory, or remove this one", e.Dir)
}

// checkFinal refuses a destination that exists and is not empty.
func checkFinal(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return &OutputExistsError{Dir: dir}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lfmq1: output directory: %w", err)
	}
	return nil
}

// PartialDir returns the directory in which CreateResumable builds the
// checkpoint for dir: ".BASE.partial" beside it. Its name is fixed so that
// a later run can find an interrupted one; being hidden and without a
// manifest, it never looks like a checkpoint.
func PartialDir(dir string) string {
	clean := absDir(dir)
	return filepath.Join(filepath.Dir(clean), "."+filepath.Base(clean)+".partial")
}

// PartialExistsError reports an interrupted run's partial directory where
// a new run would start; the caller must resume it or remove it.
type PartialExistsError struct {
	Dir     string // the checkpoint being made
	Partial string // its partial directory
}

func (e *PartialExistsError) Error() string {
	return fmt.Sprintf("lfmq1: %s holds an interrupted run for %s; resume it or remove it", e.Partial, e.Dir)
}

// CreateResumable is Create for long runs that may be interrupted: the
// checkpoint is built in PartialDir(dir) rather than a random directory. If
// that directory exists, resume reuses it with its contents (resumed is
// then true) and otherwise a *PartialExistsError refuses to touch it. The
// caller may keep its own progress files in the directory (Dir); Commit
// removes everything in it that was not written through this Writer before
// moving it into place. Keep leaves the directory for a later resume.
func CreateResumable(dir string, resume bool) (w *Writer, resumed bool, err error) {
	if err := checkFinal(dir); err != nil {
		return nil, false, err
	}
	partial := PartialDir(dir)
	if err := os.MkdirAll(filepath.Dir(partial), 0o755); err != nil {
		return nil, false, fmt.Errorf("lfmq1: %w", err)
	}
	err = os.Mkdir(partial, 0o755)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrExist) && resume:
		resumed = true
	case errors.Is(err, os.ErrExist):
		return nil, false, &PartialExistsError{Dir: dir, Partial: partial}
	default:
		return nil, false, fmt.Errorf("lfmq1: %w", err)
	}
	return &Writer{final: absDir(dir), tmp: partial, resumable: true, names: map[string]bool{}}, resumed, nil
}

// Dir returns the directory the Writer builds the checkpoint in.
func (w *Writer) Dir() string { return w.tmp }

// Keep ends a Writer from CreateResumable without committing and leaves
// its directory, with everything written so far, for a later resume. For a
// Writer from Create, which cannot be resumed, it is Abort.
func (w *Writer) Keep() {
	if !w.resumable {
		w.Abort()
		return
	}
	w.done = true
}

// WriteFile stores tensors in the safetensors file name (e.g. GlobalFile or
// LayerFile(3, n)). Each BFP tensor's format and logical shape are recorded
// in the file's __metadata__ so the file describes itself.
func (w *Writer) WriteFile(name string, tensors []Tensor) error {
	if err := w.checkName(name); err != nil {
		return err
	}
	st := make([]safetensors.Tensor, len(tensors))
	meta := map[string]string{"format": FormatName}
	for i, t := range tensors {
		if !t.Format.Valid() {
			return fmt.Errorf("lfmq1: %s: tensor %q: unknown format %q", name, t.Name, t.Format)
		}
		if t.Format.IsBFP() {
			meta["lfmq."+t.Name] = BFPMetadata(t.Format, t.Shape)
		}
		st[i] = safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.StoredShape, Data: t.Data}
		sum := sha256.Sum256(t.Data)
		w.tensors = append(w.tensors, TensorEntry{
			Name: t.Name, File: name, Format: t.Format, Shape: t.Shape,
			DType: string(t.DType), StoredShape: t.StoredShape, SHA256: hex.EncodeToString(sum[:]),
		})
	}
	path := filepath.Join(w.tmp, name)
	if err := safetensors.Write(path, st, meta); err != nil {
		return err
	}
	return w.recordFile(name)
}

// BFPMetadata is the __metadata__ value recorded for a BFP tensor:
// "bfp4_b;[out,in]".
func BFPMetadata(f TensorFormat, shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return string(f) + ";[" + strings.Join(parts, ",") + "]"
}

// CopyFile copies src unmodified into the checkpoint as name.
func (w *Writer) CopyFile(src, name string) error {
	if err := w.checkName(name); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("lfmq1: %w", err)
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(w.tmp, name))
	if err != nil {
		return fmt.Errorf("lfmq1: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("lfmq1: copying %s: %w", src, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("lfmq1: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("lfmq1: %w", err)
	}
	return w.recordFile(name)
}

func (w *Writer) checkName(name string) error {
	if w.done {
		return errors.New("lfmq1: writer already committed or aborted")
	}
	if name == "" || name == ManifestFile || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return fmt.Errorf("lfmq1: %q is not a valid checkpoint file name", name)
	}
	if w.names[name] {
		return fmt.Errorf("lfmq1: file %s written twice", name)
	}
	w.names[name] = true
	return nil
}

func (w *Writer) recordFile(name string) error {
	sum, size, err := HashFile(filepath.Join(w.tmp, name))
	if err != nil {
		return err
	}
	w.files = append(w.files, FileEntry{Path: name, Size: size, SHA256: sum})
	return nil
}

// Commit completes m with the format name, the tensor and file lists and the
// metrics digest, writes manifest.json, and moves the checkpoint into place.
// It returns the manifest's sha256, the checkpoint's identity.
func (w *Writer) Commit(m *Manifest, metrics any) (string, error) {
	if w.done {
		return "", errors.New("lfmq1: writer already committed or aborted")
	}
	if w.resumable {
		if err := w.sweep(); err != nil {
			return "", err
		}
	}
	m.Format = FormatName
	m.Tensors = append([]TensorEntry(nil), w.tensors...)
	sort.Slice(m.Tensors, func(i, j int) bool { return m.Tensors[i].Name < m.Tensors[j].Name })
	for i := 1; i < len(m.Tensors); i++ {
		if m.Tensors[i].Name == m.Tensors[i-1].Name {
			w.Abort()
			return "", fmt.Errorf("lfmq1: tensor %q stored twice (%s and %s)", m.Tensors[i].Name, m.Tensors[i-1].File, m.Tensors[i].File)
		}
	}
	m.Files = append([]FileEntry(nil), w.files...)
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	if metrics == nil {
		metrics = map[string]any{}
	}
	mj, err := canonjson.Marshal(metrics)
	if err != nil {
		w.Abort()
		return "", err
	}
	m.Metrics = mj
	sum := sha256.Sum256(mj)
	m.MetricsSHA256 = hex.EncodeToString(sum[:])
	data, err := canonjson.Marshal(m)
	if err != nil {
		w.Abort()
		return "", err
	}
	if err := writeSynced(filepath.Join(w.tmp, ManifestFile), data); err != nil {
		w.Abort()
		return "", err
	}
	if err := durable.SyncDir(w.tmp); err != nil {
		w.Abort()
		return "", err
	}
	// An empty directory left at the destination is replaced; Create refused
	// a non-empty one.
	if err := os.Remove(w.final); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.Abort()
		return "", fmt.Errorf("lfmq1: replacing %s: %w", w.final, err)
	}
	if err := os.Rename(w.tmp, w.final); err != nil {
		w.Abort()
		return "", fmt.Errorf("lfmq1: %w", err)
	}
	w.done = true
	if err := durable.SyncDir(filepath.Dir(filepath.Clean(w.final))); err != nil {
		return "", fmt.Errorf("lfmq1: %w", err)
	}
	msum := sha256.Sum256(data)
	return hex.EncodeToString(msum[:]), nil
}

// sweep removes from a resumable Writer's directory everything this Writer
// did not write: an earlier run's progress records and temporary files must
// not become part of the checkpoint.
func (w *Writer) sweep() error {
	entries, err := os.ReadDir(w.tmp)
	if err != nil {
		return fmt.Errorf("lfmq1: %w", err)
	}
	for _, e := range entries {
		if !w.names[e.Name()] {
			if err := os.RemoveAll(filepath.Join(w.tmp, e.Name())); err != nil {
				return fmt.Errorf("lfmq1: %w", err)
			}
		}
	}
	return nil
}

// Abort removes everything written so far.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	os.RemoveAll(w.tmp)
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("lfmq1: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("lfmq1: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("lfmq1: %w", err)
	}
	return f.Close()
}

// HashFile returns the sha256 (lower-case hex) and size of the file at path.
func HashFile(path string) (string, int64, error) {
	return hashFile(context.Background(), path)
}

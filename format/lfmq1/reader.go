package lfmq1

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/safetensors"
	"github.com/lfmq/lfmq/internal/strictjson"
)

// maxManifestBytes bounds manifest.json before it is parsed. A real manifest
// (≈ 2,500 tensors plus per-expert metrics) is well under a megabyte.
const maxManifestBytes = 64 << 20

// Check selects how much of a checkpoint Open verifies against its manifest.
type Check int

const (
	// CheckStructure checks the manifest, file sizes, and that every tensor
	// is where the manifest says with the recorded dtype and shapes.
	CheckStructure Check = iota
	// CheckFiles also hashes every file.
	CheckFiles
	// CheckTensors also hashes every tensor's bytes, so a damaged file is
	// traced to the tensor that differs.
	CheckTensors
)

// MismatchError is one disagreement between the manifest and the checkpoint
// on disk. Kind is "missing", "extra", "size", "hash", "dtype", "shape",
// "metadata" or "file"; Tensor is empty for file-level findings.
type MismatchError struct {
	Path   string
	Tensor string
	Kind   string
	Want   string
	Got    string
}

func (e *MismatchError) Error() string {
	where := e.Path
	if e.Tensor != "" {
		where += fmt.Sprintf(": tensor %q", e.Tensor)
	}
	switch {
	case e.Want == "" && e.Got == "":
		return fmt.Sprintf("lfmq1: %s: %s", where, e.Kind)
	case e.Want == "":
		return fmt.Sprintf("lfmq1: %s: %s: %s", where, e.Kind, e.Got)
	}
	return fmt.Sprintf("lfmq1: %s: %s mismatch: manifest says %s, found %s", where, e.Kind, e.Want, e.Got)
}

// ManifestError reports a manifest.json that cannot be used.
type ManifestError struct {
	Path string
	Msg  string
	// Missing is set when there is no manifest.json at all.
	Missing bool
}

func (e *ManifestError) Error() string { return fmt.Sprintf("lfmq1: %s: %s", e.Path, e.Msg) }

// Checkpoint is an open lfmq-1 checkpoint; tensor bytes are memory-mapped and
// valid until Close.
type Checkpoint struct {
	Dir      string
	Manifest *Manifest
	// ManifestSHA256 is the sha256 of manifest.json: the checkpoint's identity.
	ManifestSHA256 string
	files          map[string]*safetensors.File
}

// IsCheckpoint reports whether dir holds an lfmq-1 manifest.
func IsCheckpoint(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestFile))
	return err == nil
}

// LostManifest reports whether dir holds lfmq-1 checkpoint files (its
// GlobalFile, which no Hugging Face checkpoint has) but no manifest: a
// partial copy of a checkpoint, or an unfinished run's directory. Such a
// directory is to be refused as unverifiable (ReadManifest's error), not
// read as a Hugging Face checkpoint without weights.
func LostManifest(dir string) bool {
	if IsCheckpoint(dir) {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, GlobalFile))
	return err == nil
}

// ReadManifest reads and strictly parses dir/manifest.json. It returns the
// manifest and its sha256.
func ReadManifest(dir string) (*Manifest, string, error) {
	path := filepath.Join(dir, ManifestFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", &ManifestError{Path: path, Msg: "missing: without it the checkpoint's files cannot be checked; copy the whole checkpoint again", Missing: true}
	}
	if err != nil {
		return nil, "", fmt.Errorf("lfmq1: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("lfmq1: %w", err)
	}
	if st.Size() > maxManifestBytes {
		return nil, "", &ManifestError{Path: path, Msg: fmt.Sprintf("%d bytes, larger than the %d-byte limit", st.Size(), maxManifestBytes)}
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && len(data) > 0 {
		return nil, "", fmt.Errorf("lfmq1: reading %s: %w", path, err)
	}
	m, err := ParseManifest(path, data)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	return m, hex.EncodeToString(sum[:]), nil
}

// ParseManifest decodes manifest bytes strictly: unknown keys, trailing data,
// a format other than lfmq-1, malformed digests, unsorted or duplicate
// entries and a metrics digest that does not match are all errors. name is
// used in messages.
func ParseManifest(name string, data []byte) (*Manifest, error) {
	var m Manifest
	if err := strictjson.Unmarshal(data, maxManifestBytes, &m); err != nil {
		return nil, &ManifestError{Path: name, Msg: "invalid JSON: " + err.Error()}
	}
	bad := func(format string, args ...any) error {
		return &ManifestError{Path: name, Msg: fmt.Sprintf(format, args...)}
	}
	if m.Format != FormatName {
		return nil, bad("format is %q, want %q", m.Format, FormatName)
	}
	for i, t := range m.Tensors {
		if t.Name == "" {
			return nil, bad("tensors[%d]: empty name", i)
		}
		if i > 0 && m.Tensors[i-1].Name >= t.Name {
			return nil, bad("tensors[%d] %q: not sorted or duplicated after %q", i, t.Name, m.Tensors[i-1].Name)
		}
		if !t.Format.Valid() {
			return nil, bad("tensor %q: unknown format %q", t.Name, t.Format)
		}
		if !ValidSHA256(t.SHA256) {
			return nil, bad("tensor %q: sha256 %q is not 64 lower-case hex digits", t.Name, t.SHA256)
		}
		if !safeFileName(t.File) {
			return nil, bad("tensor %q: file %q is not a plain file name", t.Name, t.File)
		}
	}
	for i, f := range m.Files {
		if !safeFileName(f.Path) || f.Path == ManifestFile {
			return nil, bad("files[%d]: %q is not a plain file name of the checkpoint", i, f.Path)
		}
		if i > 0 && m.Files[i-1].Path >= f.Path {
			return nil, bad("files[%d] %q: not sorted or duplicated", i, f.Path)
		}
		if !ValidSHA256(f.SHA256) || f.Size < 0 {
			return nil, bad("file %q: bad sha256 or size", f.Path)
		}
	}
	if len(m.Metrics) == 0 {
		return nil, bad("metrics missing")
	}
	canon, err := canonjson.Marshal(m.Metrics)
	if err != nil {
		return nil, bad("metrics: %v", err)
	}
	if sum := sha256.Sum256(canon); hex.EncodeToString(sum[:]) != m.MetricsSHA256 {
		return nil, bad("metrics_sha256 %s does not match the metrics (%s)", m.MetricsSHA256, hex.EncodeToString(sum[:]))
	}
	return &m, nil
}

// ValidSHA256 reports whether s is exactly 64 lower-case hex digits, the
// form of every digest lfmq writes.
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func safeFileName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 255 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Open opens the checkpoint in dir and checks it against its manifest to the
// level asked. Every disagreement is reported: the error joins one
// *MismatchError per finding, sorted, so errors.As finds the first.
func Open(dir string, check Check) (*Checkpoint, error) { return open(dir, check, safetensors.Open) }

// OpenResident is Open with the files read into the process's memory on
// transparent huge pages where that pays (safetensors.OpenResident): for
// an engine that streams the weights at every decode step.
func OpenResident(dir string, check Check) (*Checkpoint, error) {
	return open(dir, check, safetensors.OpenResident)
}

// open is Open with openFile opening each safetensors file.
func open(dir string, check Check, openFile func(string) (*safetensors.File, error)) (*Checkpoint, error) {
	m, msum, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Dir: dir, Manifest: m, ManifestSHA256: msum, files: map[string]*safetensors.File{}}
	var findings []error
	add := func(e *MismatchError) { findings = append(findings, e) }

	listed := map[string]FileEntry{}
	for _, f := range m.Files {
		listed[f.Path] = f
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("lfmq1: %w", err)
	}
	for _, e := range entries {
		if e.Name() == ManifestFile || e.Name() == DrafterDir && e.IsDir() {
			// A drafter directory is a checkpoint of its own, opened
			// and checked on its own.
			continue
		}
		if _, ok := listed[e.Name()]; !ok {
			add(&MismatchError{Path: e.Name(), Kind: "extra", Got: "not listed in the manifest"})
		}
	}
	damaged := map[string]bool{} // files already reported: their headers are not read
	for _, fe := range m.Files {
		path := filepath.Join(dir, fe.Path)
		st, err := os.Lstat(path)
		if err != nil {
			add(&MismatchError{Path: fe.Path, Kind: "missing"})
			damaged[fe.Path] = true
			continue
		}
		if !st.Mode().IsRegular() {
			add(&MismatchError{Path: fe.Path, Kind: "file", Got: "not a regular file"})
			damaged[fe.Path] = true
			continue
		}
		if st.Size() != fe.Size {
			add(&MismatchError{Path: fe.Path, Kind: "size", Want: fmt.Sprint(fe.Size), Got: fmt.Sprint(st.Size())})
			damaged[fe.Path] = true
			continue
		}
		if check >= CheckFiles {
			sum, _, err := HashFile(path)
			if err != nil {
				c.Close()
				return nil, err
			}
			if sum != fe.SHA256 {
				add(&MismatchError{Path: fe.Path, Kind: "hash", Want: fe.SHA256, Got: sum})
			}
		}
	}
	byFile := map[string][]TensorEntry{}
	for _, t := range m.Tensors {
		if _, ok := listed[t.File]; !ok {
			add(&MismatchError{Path: t.File, Tensor: t.Name, Kind: "missing", Got: "tensor's file is not in the manifest's file list"})
			continue
		}
		byFile[t.File] = append(byFile[t.File], t)
	}
	for _, fe := range m.Files {
		if filepath.Ext(fe.Path) != ".safetensors" || damaged[fe.Path] {
			continue
		}
		f, err := openFile(filepath.Join(dir, fe.Path))
		if err != nil {
			// The file has the listed size but not a readable header:
			// it differs from what the manifest describes.
			add(&MismatchError{Path: fe.Path, Kind: "header", Got: err.Error()})
			continue
		}
		c.files[fe.Path] = f
		findings = append(findings, checkFile(fe.Path, f, byFile[fe.Path], check)...)
	}
	if len(findings) > 0 {
		c.Close()
		sort.SliceStable(findings, func(i, j int) bool { return findings[i].Error() < findings[j].Error() })
		return nil, errors.Join(findings...)
	}
	return c, nil
}

func checkFile(path string, f *safetensors.File, want []TensorEntry, check Check) []error {
	var out []error
	add := func(e *MismatchError) { out = append(out, e) }
	expected := map[string]bool{}
	meta := f.Metadata()
	for _, t := range want {
		expected[t.Name] = true
		info, ok := f.Info(t.Name)
		if !ok {
			add(&MismatchError{Path: path, Tensor: t.Name, Kind: "missing"})
			continue
		}
		if string(info.DType) != t.DType {
			add(&MismatchError{Path: path, Tensor: t.Name, Kind: "dtype", Want: t.DType, Got: string(info.DType)})
		}
		if !slices.Equal(info.Shape, t.StoredShape) {
			add(&MismatchError{Path: path, Tensor: t.Name, Kind: "shape", Want: fmt.Sprint(t.StoredShape), Got: fmt.Sprint(info.Shape)})
		}
		if t.Format.IsBFP() {
			if got, w := meta["lfmq."+t.Name], BFPMetadata(t.Format, t.Shape); got != w {
				add(&MismatchError{Path: path, Tensor: t.Name, Kind: "metadata", Want: w, Got: fmt.Sprintf("%q", got)})
			}
		}
		if check >= CheckTensors {
			data, err := f.Bytes(t.Name)
			if err != nil {
				out = append(out, err)
				continue
			}
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != t.SHA256 {
				add(&MismatchError{Path: path, Tensor: t.Name, Kind: "hash", Want: t.SHA256, Got: got})
			}
		}
	}
	for _, name := range f.Names() {
		if !expected[name] {
			add(&MismatchError{Path: path, Tensor: name, Kind: "extra", Got: "tensor not in the manifest"})
		}
	}
	return out
}

// StoredTensor is a tensor read back: its manifest entry and its memory-mapped bytes.
type StoredTensor struct {
	TensorEntry
	Data []byte
}

// Tensor returns the named tensor.
func (c *Checkpoint) Tensor(name string) (StoredTensor, error) {
	e, ok := c.Manifest.Tensor(name)
	if !ok {
		return StoredTensor{}, &MismatchError{Path: ManifestFile, Tensor: name, Kind: "missing", Got: "no such tensor in the checkpoint"}
	}
	f, ok := c.files[e.File]
	if !ok {
		return StoredTensor{}, &MismatchError{Path: e.File, Tensor: name, Kind: "missing"}
	}
	data, err := f.Bytes(name)
	if err != nil {
		return StoredTensor{}, err
	}
	return StoredTensor{TensorEntry: e, Data: data}, nil
}

// Close unmaps every file.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.files = map[string]*safetensors.File{}
	return errors.Join(errs...)
}

// ReleasePages drops the pages of the checkpoint's files that the process
// has read from its resident memory (safetensors.File.ReleasePages); the
// tensors stay readable.
func (c *Checkpoint) ReleasePages() error {
	return safetensors.ReleaseAll(maps.Values(c.files))
}

// Findings lists the single findings of an error Open returned: the
// leaves of its joined errors (one *MismatchError each, and any other
// error as it is), in Open's order.
func Findings(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Findings(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

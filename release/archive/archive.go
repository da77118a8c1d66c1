package archive

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/lfmq/lfmq/verify/sums"
)

// Level is the gzip level of every archive. The output bytes depend on it
// and on the klauspost/compress version (pinned by go.sum).
const Level = gzip.BestCompression

// ModTime is the modification time of every entry.
var ModTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Bounds applied when reading an archive.
const (
	MaxFiles      = 100_000
	MaxFileBytes  = 256 << 20
	MaxTotalBytes = 1 << 30
)

// ErrInvalid is the sentinel of every refused archive.
var ErrInvalid = errors.New("release/archive: invalid archive")

// Error reports an archive entry that cannot be written or read. Path names
// the entry (empty for the archive as a whole).
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "release/archive: " + e.Msg
	}
	return fmt.Sprintf("release/archive: %q: %s", e.Path, e.Msg)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// File is one regular file of an archive.
type File struct {
	// Path is relative to the archive's top directory, '/'-separated,
	// drawn from the bundle character set (sums.BundlePath).
	Path string
	// Exec marks an executable script (mode 0755 instead of 0644).
	Exec bool
	Data []byte
}

// Write writes files as a deterministic tar.gz with every entry under
// prefix + "/". Input order does not matter; paths must be unique and safe,
// and no file may also be the directory of another.
func Write(w io.Writer, prefix string, files []File) error {
	if err := sums.CheckPath(prefix, sums.BundlePath); err != nil || strings.Contains(prefix, "/") {
		return &Error{Path: prefix, Msg: "prefix must be one safe path segment"}
	}
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	type entry struct {
		name string
		file *File
	}
	// Directory names end in "/", so each sorts right before its
	// contents (it is their prefix); the whole list is sorted by bytes.
	var entries []entry
	dirs := map[string]bool{}
	files2 := map[string]bool{}
	for i := range sorted {
		f := &sorted[i]
		if err := sums.CheckPath(f.Path, sums.BundlePath); err != nil {
			return &Error{Path: f.Path, Msg: err.Error()}
		}
		if files2[f.Path] {
			return &Error{Path: f.Path, Msg: "listed twice"}
		}
		files2[f.Path] = true
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		entries = append(entries, entry{name: prefix + "/" + f.Path, file: f})
	}
	for d := range dirs {
		if files2[d] {
			return &Error{Path: d, Msg: "both a file and a directory"}
		}
		entries = append(entries, entry{name: prefix + "/" + d + "/"})
	}
	entries = append(entries, entry{name: prefix + "/"})
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })

	zw, err := gzip.NewWriterLevel(w, Level)
	if err != nil {
		return fmt.Errorf("release/archive: %w", err)
	}
	// klauspost writes the header time unconditionally in some versions;
	// Unix(0, 0) is written as 0 in every one
	// (docs/release.md, "Reproducibility").
	zw.ModTime = time.Unix(0, 0)
	zw.Name = ""
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.name,
			ModTime: ModTime,
			Uid:     0,
			Gid:     0,
			Format:  tar.FormatUSTAR,
		}
		if e.file == nil {
			hdr.Typeflag = tar.TypeDir
			hdr.Mode = 0o755
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Mode = 0o644
			if e.file.Exec {
				hdr.Mode = 0o755
			}
			hdr.Size = int64(len(e.file.Data))
		}
		if !fitsUSTAR(hdr.Name) {
			hdr.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return &Error{Path: e.name, Msg: err.Error()}
		}
		if e.file != nil {
			if _, err := tw.Write(e.file.Data); err != nil {
				return fmt.Errorf("release/archive: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("release/archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("release/archive: %w", err)
	}
	return nil
}

// fitsUSTAR reports whether name fits USTAR's 100-byte name field, or its
// 155-byte prefix plus 100-byte name split at a slash.
func fitsUSTAR(name string) bool {
	if len(name) <= 100 {
		return true
	}
	if len(name) > 256 {
		return false
	}
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '/' && i <= 155 && len(name)-i-1 <= 100 && len(name)-i-1 > 0 {
			return true
		}
	}
	return false
}

// ReadDir reads every regular file under root (sorted by path), with the
// executable bit of its mode. Symlinks and other non-regular entries are
// refused: an archive holds exactly what is on disk.
func ReadDir(root string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			return &Error{Path: rel, Msg: "not a regular file"}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: rel, Exec: info.Mode()&0o111 != 0, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// Read reads an archive strictly: gzip then tar, only directories and
// regular files, all under one top-level directory (returned as prefix),
// safe unique paths, directories before their contents, bounded counts and
// sizes. Errors wrap ErrInvalid.
func Read(r io.Reader) (prefix string, files []File, err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return "", nil, &Error{Msg: "gzip: " + err.Error()}
	}
	zr.Multistream(false)
	tr := tar.NewReader(zr)
	seenDirs := map[string]bool{}
	seenFiles := map[string]bool{}
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, &Error{Msg: "tar: " + err.Error()}
		}
		if n > MaxFiles {
			return "", nil, &Error{Msg: fmt.Sprintf("more than %d entries", MaxFiles)}
		}
		name := hdr.Name
		isDir := hdr.Typeflag == tar.TypeDir
		if isDir {
			name = strings.TrimSuffix(name, "/")
		}
		if err := sums.CheckPath(name, sums.BundlePath); err != nil {
			return "", nil, &Error{Path: hdr.Name, Msg: err.Error()}
		}
		top, rel, _ := strings.Cut(name, "/")
		if prefix == "" {
			if !isDir || rel != "" {
				return "", nil, &Error{Path: hdr.Name, Msg: "the first entry must be the top-level directory"}
			}
			prefix = top
			seenDirs[top] = true
			continue
		}
		if top != prefix || rel == "" {
			return "", nil, &Error{Path: hdr.Name, Msg: fmt.Sprintf("outside the top-level directory %q", prefix)}
		}
		if !seenDirs[path.Dir(name)] {
			return "", nil, &Error{Path: hdr.Name, Msg: "its directory has no earlier entry"}
		}
		if seenDirs[name] || seenFiles[name] {
			return "", nil, &Error{Path: hdr.Name, Msg: "duplicate entry"}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			seenDirs[name] = true
		case tar.TypeReg:
			if hdr.Size < 0 || hdr.Size > MaxFileBytes || total+hdr.Size > MaxTotalBytes {
				return "", nil, &Error{Path: hdr.Name, Msg: fmt.Sprintf("size %d over the limits", hdr.Size)}
			}
			var buf bytes.Buffer
			if _, err := io.CopyN(&buf, tr, hdr.Size); err != nil {
				return "", nil, &Error{Path: hdr.Name, Msg: "reading: " + err.Error()}
			}
			total += hdr.Size
			seenFiles[name] = true
			files = append(files, File{Path: rel, Exec: hdr.Mode&0o111 != 0, Data: buf.Bytes()})
		default:
			return "", nil, &Error{Path: hdr.Name, Msg: fmt.Sprintf("type %q is neither a regular file nor a directory", hdr.Typeflag)}
		}
	}
	if prefix == "" {
		return "", nil, &Error{Msg: "empty archive"}
	}
	return prefix, files, nil
}

// Extract reads an archive (Read) and writes its files under dir, which must
// not exist; it returns the path of the extracted top-level directory.
func Extract(r io.Reader, dir string) (string, error) {
	prefix, files, err := Read(r)
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("release/archive: %w", err)
	}
	top := filepath.Join(dir, prefix)
	if err := os.Mkdir(top, 0o755); err != nil {
		return "", fmt.Errorf("release/archive: %w", err)
	}
	for _, f := range files {
		p := filepath.Join(top, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("release/archive: %w", err)
		}
		mode := os.FileMode(0o644)
		if f.Exec {
			mode = 0o755
		}
		if err := os.WriteFile(p, f.Data, mode); err != nil {
			return "", fmt.Errorf("release/archive: %w", err)
		}
	}
	return top, nil
}

package sums

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/internal/strictjson"
)

// Schema is the value of runtime-release.json's "schema" key.
const Schema = "lfmq.runtime-release/1"

// CheckpointFormat is the only checkpoint format a release carries.
const CheckpointFormat = "lfmq-1"

// ManifestPath is where a release keeps its checkpoint manifest.
const ManifestPath = "checkpoint/manifest.json"

// DrafterManifestPath is where a release with a drafter keeps the
// drafter's manifest: the drafter is an lfmq-1 checkpoint of its own under
// drafter/ (docs/release.md, "A drafter").
const DrafterManifestPath = "drafter/manifest.json"

// SourceArchivePath is where a release keeps the runtime's source.
const SourceArchivePath = "runtime/lfmq-src.tar.gz"

// RuntimeRelease is the content of runtime-release.json
// (docs/release.md, "runtime-release.json").
type RuntimeRelease struct {
	Schema string `json:"schema"`
	// ReleaseID is "<base model name>-lfmq1-<revision>".
	ReleaseID string `json:"release_id"`
	// Revision is the hub tag the release is published under.
	Revision   string     `json:"revision"`
	Lfmq       Lfmq       `json:"lfmq"`
	Toolchain  Toolchain  `json:"toolchain"`
	BaseModel  BaseModel  `json:"base_model"`
	Checkpoint Checkpoint `json:"checkpoint"`
	// Drafter pins the release's DSpark drafter, when it has one; a
	// release without one has no drafter key, as before drafters.
	Drafter *Checkpoint `json:"drafter,omitempty"`
	Runtime Runtime     `json:"runtime"`
	// Files lists every file of the release except runtime-release.json and
	// SHA256SUMS, sorted by path bytes.
	Files []File `json:"files"`
}

// Lfmq identifies the lfmq that built the runtime binaries.
type Lfmq struct {
	Version string `json:"version"`
	// SourceSHA256 is the sha256 of runtime/lfmq-src.tar.gz.
	SourceSHA256 string `json:"source_sha256"`
	// SourceDirty lists, for a release built with --allow-dirty from a
	// source tree with uncommitted changes, the archived files that
	// differed from its git commit; absent for a clean or unversioned
	// tree. The archive holds them as built either way.
	SourceDirty []string `json:"source_dirty,omitempty"`
}

// Toolchain records how the runtime binaries were built
// (docs/release.md, "Reproducibility").
type Toolchain struct {
	// Go is the toolchain's version, e.g. "go1.26.8".
	Go         string `json:"go"`
	CGOEnabled bool   `json:"cgo_enabled"`
	// Flags are the go build flags other than -ldflags and -o.
	Flags []string `json:"flags"`
	// GOFLAGS is the GOFLAGS environment value of the build.
	GOFLAGS string `json:"goflags"`
	// Ldflags is the exact -ldflags value.
	Ldflags string `json:"ldflags"`
	GOAMD64 string `json:"goamd64"`
	GOARM64 string `json:"goarm64"`
	// GOEXPERIMENT is empty unless the release enables an experiment.
	GOEXPERIMENT string `json:"goexperiment"`
	// KlauspostCompress is the compressor version that wrote the archive.
	KlauspostCompress string `json:"klauspost_compress"`
}

// BaseModel names the source checkpoint.
type BaseModel struct {
	// Repo is the hub repo id, e.g. "LiquidAI/LFM2-8B-A1B".
	Repo string `json:"repo"`
	// Revision is the source's 40-hex commit when known, else empty.
	Revision string `json:"revision"`
}

// Checkpoint pins the release's lfmq-1 checkpoint.
type Checkpoint struct {
	Format         string `json:"format"`
	Manifest       string `json:"manifest"`
	ManifestSHA256 string `json:"manifest_sha256"`
}

// Runtime lists the runtime binaries and their source archive.
type Runtime struct {
	// Binaries are sorted by platform.
	Binaries []Binary `json:"binaries"`
	Source   File     `json:"source"`
}

// Binary is one runtime binary.
type Binary struct {
	// Platform is "GOOS/GOARCH".
	Platform string `json:"platform"`
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// File is one file of the release.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// FieldError reports a runtime-release.json field that breaks the format.
// Err is ErrMalformed or ErrUnsafePath.
type FieldError struct {
	// Field is a JSON path such as "files[3].sha256".
	Field string
	Msg   string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("verify: %s: %s", RuntimeReleaseFile, e.Msg)
	}
	return fmt.Sprintf("verify: %s: %s: %s", RuntimeReleaseFile, e.Field, e.Msg)
}

// Unwrap returns ErrMalformed or ErrUnsafePath.
func (e *FieldError) Unwrap() error { return e.Err }

var (
	platformRe = regexp.MustCompile(`^[a-z0-9]+/[a-z0-9]+$`)
	nameRe     = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	repoRe     = regexp.MustCompile(`^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$`)
	commitRe   = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// BinaryPath returns the release path of the runtime binary for a platform:
// "runtime/lfmq-<os>-<arch>", with ".exe" on windows.
func BinaryPath(goos, goarch string) string {
	p := "runtime/lfmq-" + goos + "-" + goarch
	if goos == "windows" {
		p += ".exe"
	}
	return p
}

// ValidName reports whether s is a non-empty name of [A-Za-z0-9._-] other
// than "." and "..": what a revision tag and a release id must be.
func ValidName(s string) bool {
	return len(s) <= 255 && nameRe.MatchString(s) && s != "." && s != ".."
}

// ValidRepo reports whether s is a hub repo id "owner/name".
func ValidRepo(s string) bool {
	if len(s) > 255 || !repoRe.MatchString(s) {
		return false
	}
	owner, name, _ := strings.Cut(s, "/")
	return ValidName(owner) && ValidName(name)
}

// Binary returns the runtime entry for a platform.
func (r *RuntimeRelease) Binary(goos, goarch string) (Binary, bool) {
	for _, b := range r.Runtime.Binaries {
		if b.Platform == goos+"/"+goarch {
			return b, true
		}
	}
	return Binary{}, false
}

// File returns the files entry for path.
func (r *RuntimeRelease) File(path string) (File, bool) {
	i, ok := slices.BinarySearchFunc(r.Files, path, func(f File, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return File{}, false
	}
	return r.Files[i], true
}

// Marshal validates r and returns its canonical JSON encoding.
func (r *RuntimeRelease) Marshal() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return canonjson.Marshal(r)
}

// ParseRuntimeRelease reads runtime-release.json strictly: bounded size,
// canonical JSON (sorted keys, two-space indent, trailing newline), no
// unknown keys, and every field valid (Validate). Errors are *FieldError.
func ParseRuntimeRelease(data []byte) (*RuntimeRelease, error) {
	var r RuntimeRelease
	if err := strictjson.Unmarshal(data, MaxListBytes, &r); err != nil {
		return nil, &FieldError{Msg: "invalid JSON: " + err.Error(), Err: ErrMalformed}
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if !canonjson.IsCanonical(data) {
		return nil, &FieldError{Msg: "not canonical JSON (sorted keys, two-space indent, trailing newline)", Err: ErrMalformed}
	}
	return &r, nil
}

// Validate checks every field: the schema, names, digests, sizes, safe
// sorted unique paths, and that the runtime and checkpoint entries are among
// the files with the same size and digest.
func (r *RuntimeRelease) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...), Err: ErrMalformed}
	}
	checkFile := func(field string, f File) error {
		if err := CheckPath(f.Path, BundlePath); err != nil {
			return &FieldError{Field: field + ".path", Msg: err.Error(), Err: ErrUnsafePath}
		}
		if f.Path == SumsFile || f.Path == RuntimeReleaseFile {
			return bad(field+".path", "%q cannot list itself or SHA256SUMS", f.Path)
		}
		if f.Size < 0 {
			return bad(field+".size", "negative size %d", f.Size)
		}
		if !ValidSHA256(f.SHA256) {
			return bad(field+".sha256", "%q is not 64 lower-case hex digits", f.SHA256)
		}
		return nil
	}
	switch {
	case r.Schema != Schema:
		return bad("schema", "%q, want %q", r.Schema, Schema)
	case !ValidName(r.Revision):
		return bad("revision", "%q is not a name of [A-Za-z0-9._-]", r.Revision)
	case !ValidName(r.ReleaseID) || !strings.HasSuffix(r.ReleaseID, "-lfmq1-"+r.Revision):
		return bad("release_id", "%q is not '<model>-lfmq1-%s'", r.ReleaseID, r.Revision)
	case r.Lfmq.Version == "" || len(r.Lfmq.Version) > 255:
		return bad("lfmq.version", "empty or too long")
	case !ValidSHA256(r.Lfmq.SourceSHA256):
		return bad("lfmq.source_sha256", "%q is not 64 lower-case hex digits", r.Lfmq.SourceSHA256)
	case !strings.HasPrefix(r.Toolchain.Go, "go"):
		return bad("toolchain.go", "%q is not a Go version", r.Toolchain.Go)
	case r.Toolchain.CGOEnabled:
		return bad("toolchain.cgo_enabled", "runtime binaries are built with CGO_ENABLED=0")
	case r.Toolchain.Ldflags == "":
		return bad("toolchain.ldflags", "empty")
	case !ValidRepo(r.BaseModel.Repo):
		return bad("base_model.repo", "%q is not a hub repo id 'owner/name'", r.BaseModel.Repo)
	case r.BaseModel.Revision != "" && !commitRe.MatchString(r.BaseModel.Revision):
		return bad("base_model.revision", "%q is not a 40-hex commit", r.BaseModel.Revision)
	case r.Checkpoint.Format != CheckpointFormat:
		return bad("checkpoint.format", "%q, want %q", r.Checkpoint.Format, CheckpointFormat)
	case r.Checkpoint.Manifest != ManifestPath:
		return bad("checkpoint.manifest", "%q, want %q", r.Checkpoint.Manifest, ManifestPath)
	case !ValidSHA256(r.Checkpoint.ManifestSHA256):
		return bad("checkpoint.manifest_sha256", "%q is not 64 lower-case hex digits", r.Checkpoint.ManifestSHA256)
	case len(r.Files) == 0:
		return bad("files", "empty")
	case len(r.Files) > MaxEntries:
		return bad("files", "%d entries, more than %d", len(r.Files), MaxEntries)
	case len(r.Runtime.Binaries) == 0:
		return bad("runtime.binaries", "empty")
	}
	for i, f := range r.Files {
		field := fmt.Sprintf("files[%d]", i)
		if err := checkFile(field, f); err != nil {
			return err
		}
		if i > 0 && r.Files[i-1].Path >= f.Path {
			return bad(field+".path", "%q not sorted or duplicated after %q", f.Path, r.Files[i-1].Path)
		}
	}
	// Every file must be a regular file, never also a directory of another.
	for i := 1; i < len(r.Files); i++ {
		if strings.HasPrefix(r.Files[i].Path, r.Files[i-1].Path+"/") {
			return bad(fmt.Sprintf("files[%d].path", i), "%q is inside %q, which is listed as a file", r.Files[i].Path, r.Files[i-1].Path)
		}
	}
	same := func(field string, f File) error {
		got, ok := r.File(f.Path)
		if !ok {
			return bad(field, "%q is not among the files", f.Path)
		}
		if got != f {
			return bad(field, "%q: size %d sha256 %s, files say size %d sha256 %s", f.Path, f.Size, f.SHA256, got.Size, got.SHA256)
		}
		return nil
	}
	src := r.Runtime.Source
	if err := checkFile("runtime.source", src); err != nil {
		return err
	}
	if src.Path != SourceArchivePath {
		return bad("runtime.source.path", "%q, want %q", src.Path, SourceArchivePath)
	}
	if src.SHA256 != r.Lfmq.SourceSHA256 {
		return bad("runtime.source.sha256", "%s differs from lfmq.source_sha256 %s", src.SHA256, r.Lfmq.SourceSHA256)
	}
	if err := same("runtime.source", src); err != nil {
		return err
	}
	for i, b := range r.Runtime.Binaries {
		field := fmt.Sprintf("runtime.binaries[%d]", i)
		if !platformRe.MatchString(b.Platform) {
			return bad(field+".platform", "%q is not GOOS/GOARCH", b.Platform)
		}
		if i > 0 && r.Runtime.Binaries[i-1].Platform >= b.Platform {
			return bad(field+".platform", "%q not sorted or duplicated", b.Platform)
		}
		goos, goarch, _ := strings.Cut(b.Platform, "/")
		if want := BinaryPath(goos, goarch); b.Path != want {
			return bad(field+".path", "%q, want %q", b.Path, want)
		}
		f := File{Path: b.Path, Size: b.Size, SHA256: b.SHA256}
		if err := checkFile(field, f); err != nil {
			return err
		}
		if err := same(field, f); err != nil {
			return err
		}
	}
	if _, ok := r.File(ManifestPath); !ok {
		return bad("files", "%q is not among the files", ManifestPath)
	}
	if d := r.Drafter; d != nil {
		switch {
		case d.Format != CheckpointFormat:
			return bad("drafter.format", "%q, want %q", d.Format, CheckpointFormat)
		case d.Manifest != DrafterManifestPath:
			return bad("drafter.manifest", "%q, want %q", d.Manifest, DrafterManifestPath)
		case !ValidSHA256(d.ManifestSHA256):
			return bad("drafter.manifest_sha256", "%q is not 64 lower-case hex digits", d.ManifestSHA256)
		}
		if _, ok := r.File(DrafterManifestPath); !ok {
			return bad("files", "%q is not among the files", DrafterManifestPath)
		}
	}
	return nil
}

// IsListError reports whether err came from one of this package's parsers
// (a *SyntaxError or *FieldError).
func IsListError(err error) bool {
	var se *SyntaxError
	var fe *FieldError
	return errors.As(err, &se) || errors.As(err, &fe)
}

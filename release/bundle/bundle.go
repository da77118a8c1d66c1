package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/lfmq/lfmq/evidence/card"
	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

// DefaultPlatforms are the platforms built when none are asked for.
var DefaultPlatforms = []Platform{{"darwin", "arm64"}, {"linux", "amd64"}, {"linux", "arm64"}}

// Build settings of the runtime binaries
// (docs/release.md, "Reproducibility"). They are recorded in
// runtime-release.json.
const (
	GOAMD64 = "v1"
	GOARM64 = "v8.0"
	// goflags is the GOFLAGS of the build: the vendored dependencies of
	// the archive, never the network or a module cache.
	goflags = "-mod=vendor"
)

// buildFlags are the go build flags besides -ldflags and -o.
var buildFlags = []string{"-trimpath", "-buildvcs=false"}

// GitAttributes is the release's .gitattributes: large and binary files go
// to Git LFS on the hub.
const GitAttributes = `checkpoint/*.safetensors filter=lfs diff=lfs merge=lfs -text
runtime/* filter=lfs diff=lfs merge=lfs -text
*.tar.gz filter=lfs diff=lfs merge=lfs -text
`

// DrafterGitAttributes is added to GitAttributes in a release with a
// drafter: its tensors go to Git LFS too. A release without one keeps the
// bytes it always had.
const DrafterGitAttributes = "drafter/*.safetensors filter=lfs diff=lfs merge=lfs -text\n"

// Platform is a GOOS/GOARCH pair.
type Platform struct{ GOOS, GOARCH string }

// String returns "GOOS/GOARCH".
func (p Platform) String() string { return p.GOOS + "/" + p.GOARCH }

var platformRe = regexp.MustCompile(`^([a-z0-9]+)/([a-z0-9]+)$`)

// ParsePlatforms parses a comma-separated "os/arch" list; the result is
// sorted and unique.
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		m := platformRe.FindStringSubmatch(f)
		if m == nil {
			return nil, &InputError{Path: "--platforms", Msg: fmt.Sprintf("%q is not os/arch", f)}
		}
		out = append(out, Platform{m[1], m[2]})
	}
	slices.SortFunc(out, func(a, b Platform) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out), nil
}

// EvidenceFile is an evidence file as it goes into the release.
type EvidenceFile struct {
	// Path is the release path, "evidence/<name>".
	Path string
	Data []byte
}

// Options configures Build.
type Options struct {
	// CheckpointDir is the lfmq-1 checkpoint; OutDir the release directory
	// to create (it must not exist, or be empty).
	CheckpointDir string
	OutDir        string
	// DrafterDir, if set, is a drafter for the checkpoint's model, made by
	// lfmq quantize --drafter (an lfmq-1 checkpoint of architecture
	// dspark whose acceptance was measured on this checkpoint): the
	// release carries it under drafter/ (docs/release.md, "A drafter").
	DrafterDir string
	// SourceDir is the root of the lfmq module to build the runtime from.
	SourceDir string
	// AllowDirty builds from a SourceDir whose archived files differ from
	// its git commit (UncommittedFiles) instead of refusing it with a
	// *DirtyError; the files are then listed in runtime-release.json
	// (lfmq.source_dirty) and the model card says so.
	AllowDirty bool
	// EvidenceDir, if set, holds evidence JSON files (and SVG plots).
	EvidenceDir string
	// Revision is the hub tag of the release.
	Revision string
	// BaseModel is the source's hub repo id; BaseRevision its commit (40
	// hex) when known.
	BaseModel    string
	BaseRevision string
	// HubRepo is the hub repo id ("owner/name") the release is published
	// under (required): the card's download commands name it.
	HubRepo string
	// LicenseFile is the source model's licence (required); NoticeFiles
	// its NOTICE files, copied to the release root under their names.
	LicenseFile string
	NoticeFiles []string
	// SourceCard, if set, is the source model's README.md: its front
	// matter's license, license_name, license_link and language are
	// carried over (docs/release.md, "The model card").
	SourceCard string
	// License overrides the card's licence metadata field by field; with
	// neither it nor a source card, it is recognised from the licence text
	// (card.DetectLicense). Language overrides the card's languages.
	License  card.License
	Language []string
	// Platforms to build; DefaultPlatforms when empty.
	Platforms []Platform
	// Version is the lfmq version stamped into the binaries.
	Version string
	// GoCommand is the go command (default "go" on PATH).
	GoCommand string
	// BuildProcs, if positive, is passed to the go command as GOMAXPROCS
	// and -p; the output does not depend on it.
	BuildProcs int
	// BuildBinary, if set, replaces the go build of one runtime binary: it
	// must write out from the extracted source in dir. Tests use it to skip
	// compiling; releases leave it nil.
	BuildBinary func(ctx context.Context, p Platform, dir, ldflags, out string) error
	// Quality renders the card's quality section from the evidence files
	// (RenderQuality, which lfmq release build passes); nil leaves the
	// card listing the files. It is given the checkpoint's manifest sha256 so that it can
	// refuse evidence that never scored this checkpoint (return an
	// *InputError) and mark the rows that did. It runs before the
	// checkpoint is copied and the runtime built, so a refusal costs
	// nothing.
	Quality func(files []EvidenceFile, manifestSHA256 string) ([]string, error)
	// Log, if set, receives one line per step.
	Log io.Writer
}

// Result describes a built release.
type Result struct {
	Dir       string
	ReleaseID string
	// Digest is the sha256 of SHA256SUMS: the release digest for the hub
	// tag message.
	Digest         string
	ManifestSHA256 string
	// DrafterManifestSHA256 is the drafter's identity, when the release
	// carries one.
	DrafterManifestSHA256 string
	SourceSHA256          string
	Runtime               []sums.Binary
	// Files and Bytes count the files SHA256SUMS lists (every file of the
	// release but SHA256SUMS itself): the count lfmq verify reports for
	// the same release.
	Files int
	Bytes int64
}

// InputError reports an input the builder refuses. Path names the file,
// directory or flag.
type InputError struct {
	Path string
	Msg  string
	// Option is true when an option cannot work as given: a value that is
	// missing or malformed, a path that does not exist or is of the wrong
	// kind, an output directory that is not empty, a licence that needs
	// naming by option. It is false when the contents of an input are
	// refused. A command maps the first to a usage error, the second to a
	// failure.
	Option bool
}

// optionError is an InputError in the value of flag, which is path.
func optionError(flag, path, msg string) *InputError {
	return &InputError{Path: flag + " " + path, Msg: msg, Option: true}
}

// acceptedLicenses lists the licence ids for an error message.
func acceptedLicenses() string {
	return "accepted: " + strings.Join(card.LicenseIDs, ", ") + ` (a licence not listed is "other", with --license-name)`
}

func (e *InputError) Error() string { return fmt.Sprintf("bundle: %s: %s", e.Path, e.Msg) }

// ToolchainError reports a Go toolchain other than the one go.mod pins.
type ToolchainError struct {
	Want, Got string
}

func (e *ToolchainError) Error() string {
	return fmt.Sprintf("bundle: go.mod pins toolchain %s, the go command is %s (reproducible builds need the pinned one)", e.Want, e.Got)
}

// BuildError reports a failed go command, with its output.
type BuildError struct {
	Platform string
	Args     []string
	Output   string
	Err      error
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("bundle: go %s (%s): %v\n%s", strings.Join(e.Args, " "), e.Platform, e.Err, strings.TrimSpace(e.Output))
}

// Unwrap returns the go command's error.
func (e *BuildError) Unwrap() error { return e.Err }

// ReleaseID returns "<base model name>-lfmq1-<revision>".
func ReleaseID(baseModel, revision string) string {
	_, name, _ := strings.Cut(baseModel, "/")
	return name + "-lfmq1-" + revision
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

func (o *Options) check() error {
	switch {
	case o.CheckpointDir == "":
		return &InputError{Path: "--checkpoint", Msg: "required", Option: true}
	case o.OutDir == "":
		return &InputError{Path: "--out", Msg: "required", Option: true}
	case o.SourceDir == "":
		return &InputError{Path: "--source", Msg: "required", Option: true}
	case o.LicenseFile == "":
		return &InputError{Path: "--license", Msg: "a release needs the source model's licence file", Option: true}
	case o.HubRepo == "":
		return &InputError{Path: "--hub-repo", Msg: "required (owner/name): the model card's download commands name the repo the release is published under", Option: true}
	case !sums.ValidRepo(o.HubRepo):
		return &InputError{Path: "--hub-repo", Msg: fmt.Sprintf("%q is not a hub repo id 'owner/name'", o.HubRepo), Option: true}
	case !sums.ValidName(o.Revision):
		return &InputError{Path: "--revision", Msg: fmt.Sprintf("%q is not a tag of [A-Za-z0-9._-]", o.Revision), Option: true}
	case !sums.ValidRepo(o.BaseModel):
		return &InputError{Path: "--base-model", Msg: fmt.Sprintf("%q is not a hub repo id 'owner/name'", o.BaseModel), Option: true}
	case o.BaseRevision != "" && !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(o.BaseRevision):
		return &InputError{Path: "--base-revision", Msg: fmt.Sprintf("%q is not a 40-hex commit", o.BaseRevision), Option: true}
	case o.License.ID != "" && !card.KnownLicense(o.License.ID):
		return &InputError{Path: "--license-id", Msg: fmt.Sprintf("%q is not a Hugging Face licence id; %s", o.License.ID, acceptedLicenses()), Option: true}
	case o.License.ID == "other" && o.License.Name == "":
		return &InputError{Path: "--license-name", Msg: "required with --license-id other: the card names the licence", Option: true}
	case o.Version == "" || !sums.ValidName("lfmq-"+o.Version):
		// The version is this binary's, not an option: a bad one is a
		// build of lfmq that cannot make releases.
		return &InputError{Path: "version", Msg: fmt.Sprintf("%q cannot name the source archive's directory", o.Version)}
	}
	if !sums.ValidName(ReleaseID(o.BaseModel, o.Revision)) {
		return &InputError{Path: "--base-model", Msg: "gives an invalid release id", Option: true}
	}
	return nil
}

// checkPaths checks that every path option names an existing file or
// directory of the right kind, so that a mistyped path is refused at once
// as a bad option, not minutes into the build as a failed read.
func (o *Options) checkPaths() error {
	for _, d := range []struct{ flag, path string }{
		{"--checkpoint", o.CheckpointDir}, {"--drafter", o.DrafterDir}, {"--source", o.SourceDir}, {"--evidence", o.EvidenceDir},
	} {
		if d.path == "" {
			continue
		}
		info, err := os.Stat(d.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return optionError(d.flag, d.path, "no such directory")
		case err != nil:
			return optionError(d.flag, d.path, err.Error())
		case !info.IsDir():
			return optionError(d.flag, d.path, "not a directory")
		}
	}
	files := []struct{ flag, path string }{{"--license", o.LicenseFile}, {"--source-card", o.SourceCard}}
	for _, n := range o.NoticeFiles {
		files = append(files, struct{ flag, path string }{"--notice", n})
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		// Lstat, as readInput: a link is refused, not followed.
		info, err := os.Lstat(f.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return optionError(f.flag, f.path, "no such file")
		case err != nil:
			return optionError(f.flag, f.path, err.Error())
		case !info.Mode().IsRegular():
			return optionError(f.flag, f.path, "not a regular file")
		}
	}
	if mod, err := readModulePath(filepath.Join(o.SourceDir, "go.mod")); err != nil || mod != ModulePath {
		return optionError("--source", o.SourceDir, "not the root of the "+ModulePath+" module (a go.mod declaring it)")
	}
	return nil
}

// Build assembles the release. Every input is checked first; the
// checkpoint is checked against its manifest while it is copied.
func Build(ctx context.Context, opts Options) (*Result, error) {
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms
	}
	opts.Platforms = slices.Clone(opts.Platforms)
	slices.SortFunc(opts.Platforms, func(a, b Platform) int { return strings.Compare(a.String(), b.String()) })
	opts.Platforms = slices.Compact(opts.Platforms)
	if opts.GoCommand == "" {
		opts.GoCommand = "go"
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := opts.checkPaths(); err != nil {
		return nil, err
	}
	if err := opts.checkPlatforms(ctx); err != nil {
		return nil, err
	}
	out, err := filepath.Abs(opts.OutDir)
	if err != nil {
		return nil, err
	}
	if info, err := os.Stat(out); err == nil && !info.IsDir() {
		return nil, optionError("--out", opts.OutDir, "exists and is not a directory")
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		// Never mixed with or replacing an earlier release.
		return nil, optionError("--out", opts.OutDir, "exists and is not empty; give a new or empty directory")
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	stage, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(stage)
		}
	}()
	if err := os.Chmod(stage, 0o755); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	work, err := os.MkdirTemp("", "lfmq-release-")
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer os.RemoveAll(work)

	b := &builder{opts: &opts, stage: stage, work: work}
	res, err := b.build(ctx)
	if err != nil {
		return nil, err
	}
	if err := syncTree(stage); err != nil {
		return nil, err
	}
	if err := os.Remove(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if err := os.Rename(stage, out); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	done = true
	if err := durable.SyncDir(filepath.Dir(out)); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	res.Dir = out
	return res, nil
}

type builder struct {
	opts  *Options
	stage string
	work  string
	env   goEnv
	// dirty are the archived files that differ from the source's commit.
	dirty []string
}

// goEnv is what the builder takes from the caller's go environment.
type goEnv struct {
	cache, path, modcache, version string
	proxy                          []string
}

func (b *builder) build(ctx context.Context) (*Result, error) {
	o := b.opts
	for _, sub := range []string{"checkpoint", "runtime"} {
		if err := os.Mkdir(filepath.Join(b.stage, sub), 0o755); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
	}

	// Inputs first, so a bad one fails before minutes of building.
	dirty, _, err := UncommittedFiles(ctx, o.SourceDir)
	if err != nil {
		return nil, err
	}
	if len(dirty) > 0 && !o.AllowDirty {
		return nil, &DirtyError{Dir: o.SourceDir, Files: dirty}
	}
	b.dirty = dirty
	if len(dirty) > 0 {
		o.logf("building from a source tree with %d uncommitted files (--allow-dirty)", len(dirty))
	}
	lic, err := readInput(o.LicenseFile)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(lic)) == 0 {
		return nil, &InputError{Path: o.LicenseFile, Msg: "empty licence file"}
	}
	lmeta, langs, err := resolveLicense(o, lic)
	if err != nil {
		return nil, err
	}
	notices, err := b.notices()
	if err != nil {
		return nil, err
	}
	evidence, err := readEvidence(o.EvidenceDir)
	if err != nil {
		return nil, err
	}
	var quality []string
	var qualityFor string // the manifest sha256 the quality tables were checked against
	if o.Quality != nil && len(evidence) > 0 {
		if qualityFor, _, err = lfmq1.HashFile(filepath.Join(o.CheckpointDir, lfmq1.ManifestFile)); err != nil {
			return nil, err
		}
		if quality, err = o.Quality(evidence, qualityFor); err != nil {
			var ie *InputError
			if errors.As(err, &ie) {
				return nil, err
			}
			return nil, fmt.Errorf("bundle: rendering the quality tables: %w", err)
		}
	}
	o.logf("checking and copying the checkpoint %s", o.CheckpointDir)
	manifest, manifestSHA, err := copyCheckpoint(ctx, o.CheckpointDir, filepath.Join(b.stage, "checkpoint"))
	if err != nil {
		return nil, err
	}
	if qualityFor != "" && qualityFor != manifestSHA {
		// The checkpoint changed under the build: the evidence was checked
		// against another manifest than the one released.
		return nil, &lfmq1.MismatchError{Path: lfmq1.ManifestFile, Kind: "hash", Want: qualityFor, Got: manifestSHA}
	}
	var drafter *card.Drafter
	if o.DrafterDir != "" {
		o.logf("checking and copying the drafter %s", o.DrafterDir)
		if drafter, err = copyDrafter(ctx, o.DrafterDir, filepath.Join(b.stage, "drafter"), manifestSHA); err != nil {
			return nil, err
		}
	}

	// The runtime: archive, then binaries built from the extracted archive.
	tc, srcArchive, err := b.sourceArchive(ctx)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(srcArchive)
	srcSHA := hex.EncodeToString(sum[:])
	if err := writeFile(filepath.Join(b.stage, filepath.FromSlash(sums.SourceArchivePath)), srcArchive, 0o644); err != nil {
		return nil, err
	}
	tc.Ldflags = ldflags(o.Version, srcSHA)
	binaries, err := b.buildBinaries(ctx, srcArchive, tc.Ldflags)
	if err != nil {
		return nil, err
	}

	// Pass-through files.
	if err := writeFile(filepath.Join(b.stage, "LICENSE"), lic, 0o644); err != nil {
		return nil, err
	}
	var noticeNames []string
	for _, n := range notices {
		noticeNames = append(noticeNames, n.Path)
		if err := writeFile(filepath.Join(b.stage, n.Path), n.Data, 0o644); err != nil {
			return nil, err
		}
	}
	var evidencePaths []string
	if len(evidence) > 0 {
		if err := os.Mkdir(filepath.Join(b.stage, "evidence"), 0o755); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
	}
	for _, e := range evidence {
		evidencePaths = append(evidencePaths, e.Path)
		if err := writeFile(filepath.Join(b.stage, filepath.FromSlash(e.Path)), e.Data, 0o644); err != nil {
			return nil, err
		}
	}
	attrs := GitAttributes
	if drafter != nil {
		attrs += DrafterGitAttributes
	}
	if err := writeFile(filepath.Join(b.stage, ".gitattributes"), []byte(attrs), 0o644); err != nil {
		return nil, err
	}

	// The card, from what is known before it.
	var plots []card.Plot
	for _, e := range evidence {
		if path.Ext(e.Path) == ".svg" {
			alt := svgTitle(e.Data)
			if alt == "" {
				alt = "Plot " + path.Base(e.Path)
			}
			plots = append(plots, card.Plot{Path: e.Path, Alt: alt})
		}
	}
	releaseID := ReleaseID(o.BaseModel, o.Revision)
	in := card.Input{
		ReleaseID: releaseID, Revision: o.Revision, HubRepo: o.HubRepo,
		BaseModel: o.BaseModel, BaseRevision: o.BaseRevision,
		LfmqVersion: o.Version, Manifest: manifest, ManifestSHA256: manifestSHA,
		Source:  card.Runtime{Path: sums.SourceArchivePath, Size: int64(len(srcArchive)), SHA256: srcSHA},
		License: lmeta, Language: langs,
		Notices: noticeNames, Evidence: evidencePaths, Plots: plots, Quality: quality,
		SourceDirty: b.dirty, Drafter: drafter,
	}
	for _, bin := range binaries {
		in.Runtime = append(in.Runtime, card.Runtime{Platform: bin.Platform, Path: bin.Path, Size: bin.Size, SHA256: bin.SHA256})
	}
	readme, err := card.Render(in)
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(b.stage, "README.md"), readme, 0o644); err != nil {
		return nil, err
	}

	// The lists: runtime-release.json over every file so far, then
	// SHA256SUMS over every file but itself.
	files, err := listFiles(b.stage)
	if err != nil {
		return nil, err
	}
	rr := &sums.RuntimeRelease{
		Schema: sums.Schema, ReleaseID: releaseID, Revision: o.Revision,
		Lfmq:       sums.Lfmq{Version: o.Version, SourceSHA256: srcSHA, SourceDirty: b.dirty},
		Toolchain:  tc,
		BaseModel:  sums.BaseModel{Repo: o.BaseModel, Revision: o.BaseRevision},
		Checkpoint: sums.Checkpoint{Format: sums.CheckpointFormat, Manifest: sums.ManifestPath, ManifestSHA256: manifestSHA},
		Runtime: sums.Runtime{
			Binaries: binaries,
			Source:   sums.File{Path: sums.SourceArchivePath, Size: int64(len(srcArchive)), SHA256: srcSHA},
		},
		Files: files,
	}
	if drafter != nil {
		rr.Drafter = &sums.Checkpoint{Format: sums.CheckpointFormat, Manifest: sums.DrafterManifestPath, ManifestSHA256: drafter.ManifestSHA256}
	}
	rrData, err := rr.Marshal()
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(b.stage, sums.RuntimeReleaseFile), rrData, 0o644); err != nil {
		return nil, err
	}
	rrSum := sha256.Sum256(rrData)
	entries := []sums.Entry{{Path: sums.RuntimeReleaseFile, SHA256: hex.EncodeToString(rrSum[:])}}
	var total int64 = int64(len(rrData))
	for _, f := range files {
		entries = append(entries, sums.Entry{Path: f.Path, SHA256: f.SHA256})
		total += f.Size
	}
	sumsData, err := sums.Format(entries, sums.BundlePath)
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(b.stage, sums.SumsFile), sumsData, 0o644); err != nil {
		return nil, err
	}
	digest := sha256.Sum256(sumsData)

	// Check the result as a user would before it becomes visible.
	o.logf("verifying the release")
	rep, err := verify.Release(ctx, b.stage, verify.Options{})
	if err != nil {
		return nil, err
	}
	if err := rep.Err(); err != nil {
		return nil, fmt.Errorf("bundle: the built release does not verify: %w", err)
	}
	res := &Result{
		ReleaseID: releaseID, Digest: hex.EncodeToString(digest[:]),
		ManifestSHA256: manifestSHA, SourceSHA256: srcSHA, Runtime: binaries,
		Files: len(entries), Bytes: total,
	}
	if drafter != nil {
		res.DrafterManifestSHA256 = drafter.ManifestSHA256
	}
	return res, nil
}

// ldflags returns the exact -ldflags of the runtime binaries: stripped, no
// build id, version and source digest stamped.
func ldflags(version, sourceSHA string) string {
	return fmt.Sprintf("-s -w -buildid= -X %s/version.Version=%s -X %s/version.SourceDigest=%s", ModulePath, version, ModulePath, sourceSHA)
}

// readInput reads a small input file (licence, notice), refusing links and
// anything over 16 MiB.
func readInput(p string) ([]byte, error) {
	info, err := os.Lstat(p)
	if err != nil {
		return nil, &InputError{Path: p, Msg: err.Error()}
	}
	if !info.Mode().IsRegular() {
		return nil, &InputError{Path: p, Msg: "not a regular file"}
	}
	if info.Size() > 16<<20 {
		return nil, &InputError{Path: p, Msg: "larger than 16 MiB"}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return data, nil
}

// reserved are the release's top-level names a notice cannot take.
var reserved = []string{"README.md", "LICENSE", ".gitattributes", "checkpoint", "runtime", "evidence", sums.RuntimeReleaseFile, sums.SumsFile, verify.SignatureFile, ".git", ".cache"}

func (b *builder) notices() ([]EvidenceFile, error) {
	var out []EvidenceFile
	for _, p := range b.opts.NoticeFiles {
		name := filepath.Base(p)
		if !sums.ValidName(name) || slices.Contains(reserved, name) {
			return nil, optionError("--notice", p, fmt.Sprintf("%q cannot be a top-level file of the release", name))
		}
		if slices.ContainsFunc(out, func(e EvidenceFile) bool { return e.Path == name }) {
			return nil, optionError("--notice", p, "two notices named "+name)
		}
		data, err := readInput(p)
		if err != nil {
			return nil, err
		}
		out = append(out, EvidenceFile{Path: name, Data: data})
	}
	slices.SortFunc(out, func(a, b EvidenceFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// readEvidence reads the evidence directory: *.json files (valid JSON) and
// *.svg plots, nothing else.
func readEvidence(dir string) ([]EvidenceFile, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &InputError{Path: dir, Msg: err.Error()}
	}
	var out []EvidenceFile
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		where := "--evidence " + dir
		switch {
		case e.IsDir():
			return nil, &InputError{Path: where, Msg: fmt.Sprintf("%s is a directory; an evidence directory holds only files (*.json evidence, *.svg plots), not subdirectories: move its files up or out", name)}
		case e.Type()&fs.ModeSymlink != 0:
			return nil, &InputError{Path: where, Msg: fmt.Sprintf("%s is a symbolic link; an evidence directory holds only regular files (a link is not followed): copy the file in", name)}
		case !e.Type().IsRegular():
			return nil, &InputError{Path: where, Msg: fmt.Sprintf("%s is not a regular file; an evidence directory holds only regular files (*.json evidence, *.svg plots)", name)}
		case !sums.ValidName(name):
			return nil, &InputError{Path: where, Msg: fmt.Sprintf("%q: an evidence file's name may hold only letters, digits and . _ - (it becomes a path in the release)", name)}
		}
		ext := path.Ext(name)
		if ext != ".json" && ext != ".svg" {
			return nil, &InputError{Path: p, Msg: "not an evidence file (*.json) or plot (*.svg)"}
		}
		data, err := readInput(p)
		if err != nil {
			return nil, err
		}
		if ext == ".json" && !json.Valid(data) {
			return nil, &InputError{Path: p, Msg: "not valid JSON"}
		}
		out = append(out, EvidenceFile{Path: "evidence/" + name, Data: data})
	}
	if len(out) == 0 {
		return nil, &InputError{Path: dir, Msg: "no evidence files"}
	}
	return out, nil
}

// svgTitle returns an SVG's title, for the alternative text of its image on
// the card: its <title> element, the SVG way of naming a graphic, else its
// first <text> element, where lfmq score --plot writes the plot's title;
// "" when it has neither.
func svgTitle(data []byte) string {
	d := xml.NewDecoder(bytes.NewReader(data))
	var first string
	for {
		tok, err := d.Token()
		if err != nil {
			return first
		}
		se, ok := tok.(xml.StartElement)
		if !ok || (se.Name.Local != "title" && se.Name.Local != "text") {
			continue
		}
		s := elementText(d)
		if se.Name.Local == "title" && s != "" {
			return s
		}
		if first == "" {
			first = s
		}
	}
}

// elementText reads up to the end of the element just started and returns
// its text, nested elements' included, on one line.
func elementText(d *xml.Decoder) string {
	var b strings.Builder
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			b.Write(t)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// copyCheckpoint checks the checkpoint's structure, then copies the
// manifest and every file it lists, hashing each copy against the manifest.
func copyCheckpoint(ctx context.Context, src, dst string) (*lfmq1.Manifest, string, error) {
	ck, err := lfmq1.Open(src, lfmq1.CheckStructure)
	if err != nil {
		return nil, "", err
	}
	m, msum := ck.Manifest, ck.ManifestSHA256
	ck.Close()
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		got, n, err := copyHashed(filepath.Join(src, f.Path), filepath.Join(dst, f.Path))
		if err != nil {
			return nil, "", err
		}
		if n != f.Size {
			return nil, "", &lfmq1.MismatchError{Path: f.Path, Kind: "size", Want: fmt.Sprint(f.Size), Got: fmt.Sprint(n)}
		}
		if got != f.SHA256 {
			return nil, "", &lfmq1.MismatchError{Path: f.Path, Kind: "hash", Want: f.SHA256, Got: got}
		}
	}
	got, _, err := copyHashed(filepath.Join(src, lfmq1.ManifestFile), filepath.Join(dst, lfmq1.ManifestFile))
	if err != nil {
		return nil, "", err
	}
	if got != msum {
		return nil, "", &lfmq1.MismatchError{Path: lfmq1.ManifestFile, Kind: "hash", Want: msum, Got: got, Tensor: ""}
	}
	return m, msum, nil
}

// DrafterError refuses a --drafter that a release cannot carry for its
// checkpoint.
type DrafterError struct{ Dir, Msg string }

func (e *DrafterError) Error() string { return fmt.Sprintf("bundle: --drafter %s: %s", e.Dir, e.Msg) }

// copyDrafter checks that src is a drafter for the checkpoint of manifest
// sha256 target (an lfmq-1 checkpoint of architecture dspark whose
// acceptance was measured on that checkpoint), copies it as
// copyCheckpoint does and returns what the card says of it.
func copyDrafter(ctx context.Context, src, dst, target string) (*card.Drafter, error) {
	m, sum, err := lfmq1.ReadManifest(src)
	if err != nil {
		return nil, err
	}
	if m.Architecture != lfmq1.DrafterArchitecture {
		return nil, &DrafterError{Dir: src, Msg: fmt.Sprintf("%s says architecture %q, not %q: not a drafter made by lfmq quantize --drafter", lfmq1.ManifestFile, m.Architecture, lfmq1.DrafterArchitecture)}
	}
	var metrics struct {
		Acceptance *card.DrafterAcceptance `json:"acceptance"`
	}
	if err := json.Unmarshal(m.Metrics, &metrics); err != nil || metrics.Acceptance == nil {
		return nil, &DrafterError{Dir: src, Msg: "its manifest records no acceptance (metrics.acceptance): quantize the drafter with lfmq quantize --drafter"}
	}
	if got := metrics.Acceptance.TargetManifestSHA256; got != target {
		return nil, &DrafterError{Dir: src, Msg: fmt.Sprintf("its acceptance was measured on the model of manifest sha256 %s, not on this checkpoint (%s): quantize the drafter with this checkpoint (lfmq quantize --drafter)", got, target)}
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	m, msum, err := copyCheckpoint(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	if msum != sum {
		// The drafter changed under the build: what was checked is not
		// what was copied.
		return nil, &lfmq1.MismatchError{Path: filepath.Join(src, lfmq1.ManifestFile), Kind: "hash", Want: sum, Got: msum}
	}
	return &card.Drafter{Manifest: m, ManifestSHA256: msum, Acceptance: *metrics.Acceptance}, nil
}

func copyHashed(src, dst string) (string, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, fmt.Errorf("bundle: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", 0, fmt.Errorf("bundle: %w", err)
	}
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(out, h), in, make([]byte, 1<<20))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, fmt.Errorf("bundle: copying %s: %w", src, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// listFiles hashes every file under dir, sorted by path bytes.
func listFiles(dir string) ([]sums.File, error) {
	var out []sums.File
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if err := sums.CheckPath(rel, sums.BundlePath); err != nil {
			return &InputError{Path: rel, Msg: err.Error()}
		}
		if !d.Type().IsRegular() {
			return &InputError{Path: rel, Msg: "not a regular file"}
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.CopyBuffer(h, f, make([]byte, 1<<20))
		if err != nil {
			return err
		}
		out = append(out, sums.File{Path: rel, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b sums.File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func writeFile(p string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

// syncTree fsyncs every file and directory under dir.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("bundle: syncing %s: %w", p, err)
		}
		return nil
	})
}

// compressVersion is the klauspost/compress version linked into this
// binary: the one that writes the archive.
func compressVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/klauspost/compress" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "unknown"
}

// checkPlatforms refuses a platform the toolchain does not build for (a
// typo such as linux/amd65) before the checkpoint is copied and the source
// vendored, rather than after, as go build's own failure. The list is the
// toolchain's own (go tool dist list); when it cannot be had, the build
// reports the go command's failure later as it would anyway.
func (o *Options) checkPlatforms(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, o.GoCommand, "tool", "dist", "list")
	cmd.Dir = o.SourceDir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	known := strings.Fields(string(out))
	for _, p := range o.Platforms {
		if !slices.Contains(known, p.String()) {
			return &InputError{Path: "--platforms", Msg: fmt.Sprintf("%s is not a platform this Go toolchain builds for (go tool dist list names them)", p), Option: true}
		}
	}
	return nil
}

// runGo runs the go command in dir with exactly env.
func (b *builder) runGo(ctx context.Context, dir, platform string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.opts.GoCommand, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// The go command was killed because the build was cancelled
			// (Ctrl-C): say so, not "signal: killed".
			return "", fmt.Errorf("bundle: go %s (%s): %w", args[0], platform, ctx.Err())
		}
		return "", &BuildError{Platform: platform, Args: args, Output: out.String(), Err: err}
	}
	return out.String(), nil
}

// resolveLicense gives the card's licence metadata and languages: the
// source card's, overridden by the options, else recognised from the
// licence text.
func resolveLicense(o *Options, text []byte) (card.License, []string, error) {
	var l card.License
	var langs []string
	if o.SourceCard != "" {
		data, err := readInput(o.SourceCard)
		if err != nil {
			return l, nil, err
		}
		fm, err := card.ParseFrontMatter(data)
		if err != nil {
			return l, nil, &InputError{Path: o.SourceCard, Msg: err.Error()}
		}
		if fm.License.ID != "" && !card.KnownLicense(fm.License.ID) && o.License.ID == "" {
			return l, nil, &InputError{Path: o.SourceCard, Msg: fmt.Sprintf("license %q is not a Hugging Face licence id; give --license-id (%s)", fm.License.ID, acceptedLicenses())}
		}
		l, langs = fm.License, fm.Language
	}
	if l.ID == "" && o.License.ID == "" {
		if d, ok := card.DetectLicense(text); ok {
			l = d
		}
	}
	if o.License.ID != "" {
		l = card.License{ID: o.License.ID}
	}
	if o.License.Name != "" {
		l.Name = o.License.Name
	}
	if o.License.Link != "" {
		l.Link = o.License.Link
	}
	if len(o.Language) > 0 {
		langs = o.Language
	}
	switch {
	case l.ID == "":
		// The text is fine; the command line has to name the licence.
		return l, nil, &InputError{Path: o.LicenseFile, Msg: "licence not recognised; give --license-id (and --license-name for other) or --source-card", Option: true}
	case l.ID == "other" && l.Name == "":
		// check refuses --license-id other without a name, so this is the
		// source card's license without its license_name.
		return l, nil, &InputError{Path: o.SourceCard, Msg: "license \"other\" without a license_name; give --license-name"}
	}
	return l, langs, nil
}

// BaseModelFromConfig returns the hub repo id recorded in a checkpoint's
// config.json as "_name_or_path", when it is one ("owner/name", not a local
// path).
func BaseModelFromConfig(checkpointDir string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(checkpointDir, "config.json"))
	if err != nil || len(data) > 16<<20 {
		return "", false
	}
	var cfg struct {
		NameOrPath string `json:"_name_or_path"`
	}
	if json.Unmarshal(data, &cfg) != nil || !sums.ValidRepo(cfg.NameOrPath) {
		return "", false
	}
	return cfg.NameOrPath, true
}

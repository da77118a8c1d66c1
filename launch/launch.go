package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

// DefaultCacheDir is the server's cache directory inside a release when no
// other is given: under .cache/, which verification ignores.
const DefaultCacheDir = ".cache/lfmq/serve"

// IdentityFile labels a cache directory with the release it belongs to.
const IdentityFile = "lfmq-cache.json"

// identitySchema is the identity file's schema.
const identitySchema = "lfmq.cache-identity/1"

// Options configures Prepare.
type Options struct {
	// ReleaseDir is the release to launch. Alternatively CacheRoot, Repo
	// and Revision name what lfmq download fetched:
	// CacheRoot/<owner>--<name>/<revision>.
	ReleaseDir string
	CacheRoot  string
	Repo       string
	Revision   string
	// CacheDir is the server's cache directory (default: DefaultCacheDir
	// inside the release).
	CacheDir string
	// Serve are flags passed to the runtime's serve after the ones launch
	// sets (--model, --served-model-name unless given, --cache-dir).
	Serve []string
	// GOOS and GOARCH select the runtime (default: this process's).
	GOOS, GOARCH string
	// Verify configures the verification of the release.
	Verify verify.Options
	// DryRun checks everything but writes nothing (no cache label, no
	// execute bit): for --print-command.
	DryRun bool
	// NoDrafter serves a release that carries a drafter without it
	// (launch --drafter off). Otherwise the runtime serves with the
	// release's drafter, unless Serve gives a --drafter of its own.
	NoDrafter bool
}

// Plan is a verified release ready to run.
type Plan struct {
	// ReleaseDir is the release, absolute.
	ReleaseDir string
	// Binary is the runtime to execute, absolute; Args its arguments
	// after the program name.
	Binary string
	Args   []string
	// CacheDir is the bound cache directory, absolute.
	CacheDir string
	// The pins the cache is bound to.
	ReleaseID, ManifestSHA256, RuntimeSHA256 string
	// Report is the release's verification.
	Report *verify.Report
	// MadeExecutable reports that the runtime arrived without its
	// execute bit (a hub download does not keep file modes) and got it.
	MadeExecutable bool
	// Drafter is the release's drafter the runtime serves with, absolute;
	// empty when it serves without one (none in the release, --drafter
	// off, or a --drafter of the caller's).
	Drafter string
}

// DrafterError is a drafter flag a release cannot honour: drafting flags
// for a release without a drafter.
type DrafterError struct{ Msg string }

func (e *DrafterError) Error() string { return "launch: " + e.Msg }

// PlatformError reports a release without a runtime for this platform.
type PlatformError struct {
	Platform  string
	Available []string
	// Checkpoint is the release's checkpoint directory, for the command
	// that serves it without a bundled runtime.
	Checkpoint string
}

func (e *PlatformError) Error() string {
	return fmt.Sprintf("launch: the release has no runtime for %s (it has: %s); run lfmq serve --model %s with an lfmq built for this platform",
		e.Platform, strings.Join(e.Available, ", "), ShellQuote(e.Checkpoint))
}

// CacheError reports a cache directory that does not belong to the
// release: Kind "foreign" (labelled for another release, checkpoint or
// runtime) or "unlabelled" (not empty and without an identity file).
type CacheError struct {
	Dir   string
	Kind  string
	Field string // foreign: the differing field
	Want  string
	Got   string
}

func (e *CacheError) Error() string {
	if e.Kind == "unlabelled" {
		return fmt.Sprintf("launch: cache directory %s is not empty and has no %s: it is not a cache of this release; give another --cache-dir or empty it", e.Dir, IdentityFile)
	}
	return fmt.Sprintf("launch: cache directory %s belongs to another release: its %s is %s, this release's is %s; give another --cache-dir or remove it", e.Dir, e.Field, e.Got, e.Want)
}

// identity is the content of IdentityFile.
type identity struct {
	Schema         string `json:"schema"`
	ReleaseID      string `json:"release_id"`
	ManifestSHA256 string `json:"manifest_sha256"`
	RuntimeSHA256  string `json:"runtime_sha256"`
}

// Dir returns the release directory Options name.
func (o *Options) Dir() (string, error) {
	switch {
	case o.ReleaseDir != "" && (o.CacheRoot != "" || o.Repo != "" || o.Revision != ""):
		return "", errors.New("launch: give a release directory, or a cache root with a repo and a revision, not both")
	case o.ReleaseDir != "":
		return o.ReleaseDir, nil
	case o.CacheRoot == "" || o.Repo == "" || o.Revision == "":
		return "", errors.New("launch: give a release directory, or a cache root with a repo and a revision")
	case !sums.ValidRepo(o.Repo):
		return "", fmt.Errorf("launch: repo %q: want OWNER/NAME of [A-Za-z0-9._-]", o.Repo)
	case !sums.ValidName(o.Revision):
		return "", fmt.Errorf("launch: revision %q is not a name of [A-Za-z0-9._-]", o.Revision)
	}
	return filepath.Join(o.CacheRoot, strings.Replace(o.Repo, "/", "--", 1), o.Revision), nil
}

// Prepare verifies the release and returns the plan to run it. Findings
// of the verification come back as the report's error (a
// *verify.FindingsError: errors.As finds each *verify.MismatchError); a
// runtime that differs from its pin is a *verify.MismatchError too.
func Prepare(ctx context.Context, opts Options) (*Plan, error) {
	dir, err := opts.Dir()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("launch: %s is not a directory (a release: lfmq release build, or lfmq download)", dir)
	}
	rep, err := verify.Release(ctx, dir, opts.Verify)
	if err != nil {
		return nil, err
	}
	p := &Plan{ReleaseDir: dir, Report: rep}
	if err := rep.Err(); err != nil {
		return p, err
	}
	data, err := os.ReadFile(filepath.Join(dir, sums.RuntimeReleaseFile))
	if err != nil {
		return p, fmt.Errorf("launch: %w", err)
	}
	rr, err := sums.ParseRuntimeRelease(data)
	if err != nil {
		return p, err
	}
	goos, goarch := opts.GOOS, opts.GOARCH
	if goos == "" {
		goos = runtime.GOOS
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	platform := goos + "/" + goarch
	var bin *sums.Binary
	var have []string
	for i, b := range rr.Runtime.Binaries {
		have = append(have, b.Platform)
		if b.Platform == platform {
			bin = &rr.Runtime.Binaries[i]
		}
	}
	if bin == nil {
		return p, &PlatformError{Platform: platform, Available: have, Checkpoint: filepath.Join(dir, "checkpoint")}
	}
	p.Binary = filepath.Join(dir, filepath.FromSlash(bin.Path))
	p.ReleaseID, p.ManifestSHA256, p.RuntimeSHA256 = rr.ReleaseID, rr.Checkpoint.ManifestSHA256, bin.SHA256
	// The runtime is hashed again right before it runs: the bytes that
	// execute are the pinned ones.
	sum, size, err := lfmq1.HashFile(p.Binary)
	if err != nil {
		return p, fmt.Errorf("launch: %w", err)
	}
	if sum != bin.SHA256 || size != bin.Size {
		return p, &verify.MismatchError{Path: bin.Path, Kind: verify.KindHash, WantSHA256: bin.SHA256, GotSHA256: sum,
			WantSize: bin.Size, GotSize: size, Authority: sums.RuntimeReleaseFile}
	}
	if err := p.makeExecutable(opts.DryRun); err != nil {
		return p, err
	}
	p.CacheDir = opts.CacheDir
	if p.CacheDir == "" {
		p.CacheDir = filepath.Join(dir, filepath.FromSlash(DefaultCacheDir))
	}
	if p.CacheDir, err = filepath.Abs(p.CacheDir); err != nil {
		return p, fmt.Errorf("launch: %w", err)
	}
	if err := p.bindCache(opts.DryRun); err != nil {
		return p, err
	}
	p.Args = []string{"serve", "--model", filepath.Join(dir, "checkpoint")}
	if !hasFlag(opts.Serve, "served-model-name") {
		p.Args = append(p.Args, "--served-model-name", rr.ReleaseID)
	}
	p.Args = append(p.Args, "--cache-dir", p.CacheDir)
	if rr.Drafter != nil && !opts.NoDrafter && !hasFlag(opts.Serve, "drafter") {
		// The release's drafter was verified with the rest
		// (docs/release.md, "A drafter").
		p.Drafter = filepath.Join(dir, "drafter")
		p.Args = append(p.Args, "--drafter", p.Drafter)
	}
	if p.Drafter == "" && !hasFlag(opts.Serve, "drafter") {
		for _, f := range []string{"draft-depth", "draft-costs"} {
			if hasFlag(opts.Serve, f) {
				why := "the release has no drafter"
				if rr.Drafter != nil {
					why = "--drafter off serves without the release's drafter"
				}
				return p, &DrafterError{Msg: fmt.Sprintf("--%s sets how the drafter runs, but %s", f, why)}
			}
		}
	}
	p.Args = append(p.Args, opts.Serve...)
	return p, nil
}

// hasFlag reports whether args set --name (as --name V or --name=V).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

// makeExecutable gives the runtime its execute bits if it lacks them: hub
// downloads (hf download, or a copy through a tool that drops modes) do
// not keep file modes, and the mode is not part of what is verified.
func (p *Plan) makeExecutable(dry bool) error {
	st, err := os.Stat(p.Binary)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if runtime.GOOS == "windows" || st.Mode().Perm()&0o111 == 0o111 {
		return nil
	}
	p.MadeExecutable = true
	if dry {
		return nil
	}
	if err := os.Chmod(p.Binary, st.Mode().Perm()|0o111); err != nil {
		return fmt.Errorf("launch: making the runtime executable: %w", err)
	}
	return nil
}

// bindCache checks the cache directory's identity file against the
// release, labelling an empty or new directory.
func (p *Plan) bindCache(dry bool) error {
	want := identity{Schema: identitySchema, ReleaseID: p.ReleaseID, ManifestSHA256: p.ManifestSHA256, RuntimeSHA256: p.RuntimeSHA256}
	label := filepath.Join(p.CacheDir, IdentityFile)
	data, err := os.ReadFile(label)
	switch {
	case err == nil:
		var got identity
		if err := json.Unmarshal(data, &got); err != nil || got.Schema != identitySchema {
			return &CacheError{Dir: p.CacheDir, Kind: "foreign", Field: IdentityFile, Want: identitySchema, Got: "an unreadable label"}
		}
		for _, f := range [][3]string{{"release_id", want.ReleaseID, got.ReleaseID}, {"manifest_sha256", want.ManifestSHA256, got.ManifestSHA256}, {"runtime_sha256", want.RuntimeSHA256, got.RuntimeSHA256}} {
			if f[1] != f[2] {
				return &CacheError{Dir: p.CacheDir, Kind: "foreign", Field: f[0], Want: f[1], Got: f[2]}
			}
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("launch: %w", err)
	}
	entries, err := os.ReadDir(p.CacheDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("launch: %w", err)
	}
	if len(entries) > 0 {
		return &CacheError{Dir: p.CacheDir, Kind: "unlabelled"}
	}
	if dry {
		return nil
	}
	if err := os.MkdirAll(p.CacheDir, 0o755); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	out, _ := json.MarshalIndent(want, "", "  ")
	tmp := label + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if err := os.Rename(tmp, label); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	return nil
}

// Command returns the plan as one shell line: the runtime and its
// arguments, each quoted when it needs to be.
func (p *Plan) Command() string {
	parts := []string{ShellQuote(p.Binary)}
	for _, a := range p.Args {
		parts = append(parts, ShellQuote(a))
	}
	return strings.Join(parts, " ")
}

// ShellQuote single-quotes a word for a POSIX shell when it has anything
// but letters, digits and -_./=:,@+%, so printed commands can be pasted.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

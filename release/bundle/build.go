package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/release/archive"
	"github.com/lfmq/lfmq/verify/sums"
)

// callerEnv reads, from the caller's environment, the few go settings the
// clean build environment carries over: the caches (they do not change the
// output) and, for `go mod vendor` only, how to reach modules.
func (b *builder) callerEnv(ctx context.Context) error {
	cmd := []string{"env", "-json", "GOCACHE", "GOPATH", "GOMODCACHE", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOINSECURE"}
	out, err := b.runGo(ctx, b.opts.SourceDir, "host", os.Environ(), cmd...)
	if err != nil {
		return err
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return fmt.Errorf("bundle: go env: %w", err)
	}
	b.env = goEnv{cache: m["GOCACHE"], path: m["GOPATH"], modcache: m["GOMODCACHE"]}
	for _, k := range []string{"GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOINSECURE"} {
		if v := m[k]; v != "" {
			b.env.proxy = append(b.env.proxy, k+"="+v)
		}
	}
	return nil
}

// cleanEnv is the whole environment of the go command: nothing inherited
// but PATH and HOME, the caches, and settings that pin the result.
// GOENV=off keeps a user's go env file out; GOWORK=off a go.work above the
// tree; GOTOOLCHAIN=local a toolchain switch.
func (b *builder) cleanEnv(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"GOCACHE=" + b.env.cache,
		"GOPATH=" + b.env.path,
		"GOMODCACHE=" + b.env.modcache,
		"GOENV=off",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"CGO_ENABLED=0",
	}
	if b.opts.BuildProcs > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(b.opts.BuildProcs))
	}
	return append(env, extra...)
}

// sourceArchive checks the toolchain, stages the module's source with
// vendored dependencies and returns the toolchain record and the archive.
func (b *builder) sourceArchive(ctx context.Context) (sums.Toolchain, []byte, error) {
	o := b.opts
	var tc sums.Toolchain
	if err := b.callerEnv(ctx); err != nil {
		return tc, nil, err
	}
	out, err := b.runGo(ctx, o.SourceDir, "host", b.cleanEnv(), "env", "GOVERSION")
	if err != nil {
		return tc, nil, err
	}
	goVersion := strings.TrimSpace(out)
	gomod, err := os.ReadFile(filepath.Join(o.SourceDir, "go.mod"))
	if err != nil {
		return tc, nil, &InputError{Path: o.SourceDir, Msg: err.Error()}
	}
	if want := toolchainLine(gomod); want != "" && want != goVersion {
		return tc, nil, &ToolchainError{Want: want, Got: goVersion}
	}
	tc = sums.Toolchain{
		Go: goVersion, CGOEnabled: false, Flags: buildFlags, GOFLAGS: goflags,
		GOAMD64: GOAMD64, GOARM64: GOARM64, KlauspostCompress: compressVersion(),
	}

	o.logf("collecting the source of %s", o.SourceDir)
	files, err := SourceFiles(o.SourceDir)
	if err != nil {
		return tc, nil, err
	}
	stage := filepath.Join(b.work, "src")
	for _, f := range files {
		mode := os.FileMode(0o644)
		if f.Exec {
			mode = 0o755
		}
		if err := writeFile(filepath.Join(stage, filepath.FromSlash(f.Path)), f.Data, mode); err != nil {
			return tc, nil, err
		}
	}
	o.logf("vendoring the dependencies (go mod vendor)")
	if _, err := b.runGo(ctx, stage, "host", b.cleanEnv(append([]string{"GOFLAGS=-mod=mod"}, b.env.proxy...)...), "mod", "vendor"); err != nil {
		return tc, nil, err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		after, err := os.ReadFile(filepath.Join(stage, name))
		if err != nil {
			return tc, nil, fmt.Errorf("bundle: %w", err)
		}
		i := indexFile(files, name)
		if i < 0 || !bytes.Equal(after, files[i].Data) {
			return tc, nil, &InputError{Path: filepath.Join(o.SourceDir, name), Msg: "go mod vendor had to change it; run go mod tidy first"}
		}
	}
	var vendored []archive.File
	if _, err := os.Stat(filepath.Join(stage, "vendor")); err == nil {
		// A module without dependencies has no vendor directory.
		if vendored, err = archive.ReadDir(filepath.Join(stage, "vendor")); err != nil {
			return tc, nil, err
		}
	}
	for _, f := range vendored {
		f.Path = "vendor/" + f.Path
		files = append(files, f)
	}
	var buf bytes.Buffer
	if err := archive.Write(&buf, "lfmq-"+o.Version, files); err != nil {
		return tc, nil, err
	}
	o.logf("source archive: %d files, %d bytes", len(files), buf.Len())
	return tc, buf.Bytes(), nil
}

func indexFile(files []archive.File, p string) int {
	for i, f := range files {
		if f.Path == p {
			return i
		}
	}
	return -1
}

// buildBinaries extracts the archive and builds lfmq in it for every
// platform, into the stage's runtime directory.
func (b *builder) buildBinaries(ctx context.Context, srcArchive []byte, ld string) ([]sums.Binary, error) {
	o := b.opts
	top, err := archive.Extract(bytes.NewReader(srcArchive), filepath.Join(b.work, "extract"))
	if err != nil {
		return nil, err
	}
	var out []sums.Binary
	for _, p := range o.Platforms {
		rel := sums.BinaryPath(p.GOOS, p.GOARCH)
		dst := filepath.Join(b.stage, filepath.FromSlash(rel))
		o.logf("building %s", rel)
		if o.BuildBinary != nil {
			if err := o.BuildBinary(ctx, p, top, ld, dst); err != nil {
				return nil, err
			}
		} else if err := b.goBuild(ctx, p, top, ld, dst); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(dst)
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		if err := os.Chmod(dst, 0o755); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		sum := sha256.Sum256(data)
		out = append(out, sums.Binary{Platform: p.String(), Path: rel, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	return out, nil
}

// goBuild builds ./cmd/lfmq in dir for p into dst, in the clean
// environment.
func (b *builder) goBuild(ctx context.Context, p Platform, dir, ld, dst string) error {
	args := append([]string{"build"}, buildFlags...)
	if b.opts.BuildProcs > 0 {
		args = append(args, "-p", strconv.Itoa(b.opts.BuildProcs))
	}
	args = append(args, "-ldflags", ld, "-o", dst, "./cmd/lfmq")
	env := b.cleanEnv("GOOS="+p.GOOS, "GOARCH="+p.GOARCH, "GOAMD64="+GOAMD64, "GOARM64="+GOARM64, "GOFLAGS="+goflags, "GOPROXY=off")
	_, err := b.runGo(ctx, dir, p.String(), env, args...)
	return err
}

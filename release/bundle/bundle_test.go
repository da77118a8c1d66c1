package bundle_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/quant"
	"github.com/lfmq/lfmq/release/archive"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSourceFiles(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"go.mod": "module github.com/lfmq/lfmq\n", "go.sum": "", "Makefile": "all:\n",
		"README.md": "r", "LICENSE": "l", "SHA256SUMS": "not source",
		"cmd/lfmq/main.go": "package main", "cmd/lfmq/main_test.go": "package main",
		"cmd/lfmq/lfmq.test": "binary", "cmd/lfmq/notes.md": "not built",
		"engine/kernels/dot_amd64.s": "TEXT", "engine/kernels/k.go": "package kernels", "engine/kernels/k.h": "#define",
		"engine/chat/t.go":              "package chat\n\n//go:embed templates \"quoted-name.txt\"\nvar x string\n",
		"engine/chat/templates/a.jinja": "a", "engine/chat/templates/_hidden.jinja": "h",
		"engine/chat/quoted-name.txt": "q",
		"engine/chat/testdata/x.json": "t", "testdata/model/config.json": "{}",
		"vendor/modules.txt": "old", ".ci/run": "#!/bin/sh", ".git/HEAD": "ref",
		"bin/lfmq": "binary", "demo-out/x": "output", "_old/x.go": "package old",
		"tools/sub/go.mod": "module other\n", "tools/sub/x.go": "package x",
		"scripts/gen.sh": "#!/bin/sh",
	})
	files, err := bundle.SourceFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	want := []string{
		"LICENSE", "Makefile", "README.md", "cmd/lfmq/main.go",
		"engine/chat/quoted-name.txt", "engine/chat/t.go", "engine/chat/templates/a.jinja",
		"engine/kernels/dot_amd64.s", "engine/kernels/k.go", "engine/kernels/k.h", "go.mod", "go.sum",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestParsePlatforms(t *testing.T) {
	p, err := bundle.ParsePlatforms("linux/arm64, darwin/arm64,linux/arm64")
	if err != nil || len(p) != 2 || p[0].String() != "darwin/arm64" || p[1].String() != "linux/arm64" {
		t.Errorf("got %v %v", p, err)
	}
	for _, bad := range []string{"", "linux", "linux/", "Linux/amd64", "linux/amd64/v3"} {
		if _, err := bundle.ParsePlatforms(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	ckpt := bundletest.Checkpoint(t)
	src := bundletest.Source(t)
	// writeFile writes data to a new file named name and returns its path.
	writeFile := func(t *testing.T, name, data string) string {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, []byte(data), 0o644)
		return p
	}
	tests := []struct {
		name string
		edit func(t *testing.T, o *bundle.Options)
		want func(err error) bool
		// outExists: the test itself puts something at the output path.
		outExists bool
	}{
		// Options that cannot work as given.
		{"no licence", func(t *testing.T, o *bundle.Options) { o.LicenseFile = "" }, isOption("--license"), false},
		{"licence missing", func(t *testing.T, o *bundle.Options) { o.LicenseFile = filepath.Join(t.TempDir(), "nope") }, isOption("--license", "no such file"), false},
		{"licence is a directory", func(t *testing.T, o *bundle.Options) { o.LicenseFile = t.TempDir() }, isOption("--license", "not a regular file"), false},
		{"licence not recognised", func(t *testing.T, o *bundle.Options) {
			o.LicenseFile = writeFile(t, "L", "All rights reserved.\n")
		}, isOption("--license-id"), false},
		{"unknown licence id", func(t *testing.T, o *bundle.Options) { o.License.ID = "foo" },
			isOption("--license-id", `"foo" is not a Hugging Face licence id`, "accepted: apache-2.0, mit,", "llama3.1", "other"), false},
		{"other without name", func(t *testing.T, o *bundle.Options) { o.License.ID = "other" }, isOption("--license-name"), false},
		{"no hub repo", func(t *testing.T, o *bundle.Options) { o.HubRepo = "" }, isOption("--hub-repo", "download commands"), false},
		{"bad hub repo", func(t *testing.T, o *bundle.Options) { o.HubRepo = "OWNER REPO" }, isOption("--hub-repo", "not a hub repo id"), false},
		{"bad revision", func(t *testing.T, o *bundle.Options) { o.Revision = "../v1" }, isOption("--revision"), false},
		{"bad base model", func(t *testing.T, o *bundle.Options) { o.BaseModel = "just-a-name" }, isOption("--base-model"), false},
		{"checkpoint missing", func(t *testing.T, o *bundle.Options) { o.CheckpointDir = filepath.Join(t.TempDir(), "nope") }, isOption("--checkpoint", "no such directory"), false},
		{"source not the module", func(t *testing.T, o *bundle.Options) { o.SourceDir = t.TempDir() }, isOption("--source", "module"), false},
		{"evidence missing", func(t *testing.T, o *bundle.Options) { o.EvidenceDir = filepath.Join(t.TempDir(), "nope") }, isOption("--evidence", "no such directory"), false},
		{"evidence is a file", func(t *testing.T, o *bundle.Options) { o.EvidenceDir = writeFile(t, "e.json", "{}") }, isOption("--evidence", "not a directory"), false},
		{"unknown platform", func(t *testing.T, o *bundle.Options) {
			o.Platforms = []bundle.Platform{{GOOS: "linux", GOARCH: "amd65"}}
		}, isOption("--platforms", "linux/amd65 is not a platform", "go tool dist list"), false},
		{"source card missing", func(t *testing.T, o *bundle.Options) { o.SourceCard = filepath.Join(t.TempDir(), "README.md") }, isOption("--source-card", "no such file"), false},
		{"notice named LICENSE", func(t *testing.T, o *bundle.Options) {
			o.NoticeFiles = []string{writeFile(t, "LICENSE", "x")}
		}, isOption("--notice"), false},
		{"notice named SHA256SUMS.sig", func(t *testing.T, o *bundle.Options) {
			o.NoticeFiles = []string{writeFile(t, "SHA256SUMS.sig", "x")}
		}, isOption("--notice"), false},
		{"out not empty", func(t *testing.T, o *bundle.Options) {
			os.MkdirAll(o.OutDir, 0o755)
			os.WriteFile(filepath.Join(o.OutDir, "x"), nil, 0o644)
		}, isOption("--out", "not empty"), true},
		{"out is a file", func(t *testing.T, o *bundle.Options) {
			os.WriteFile(o.OutDir, nil, 0o644)
		}, isOption("--out", "not a directory"), true},
		// Inputs whose contents are refused.
		{"empty licence", func(t *testing.T, o *bundle.Options) { o.LicenseFile = writeFile(t, "L", "\n") }, isContent("empty licence"), false},
		{"source card licence unknown", func(t *testing.T, o *bundle.Options) {
			o.SourceCard = writeFile(t, "README.md", "---\nlicense: foo\n---\n")
		}, isContent(`license "foo"`, "--license-id", "accepted:"), false},
		{"source card other unnamed", func(t *testing.T, o *bundle.Options) {
			o.SourceCard = writeFile(t, "README.md", "---\nlicense: other\n---\n")
		}, isContent("license_name", "--license-name"), false},
		{"source card front matter", func(t *testing.T, o *bundle.Options) {
			o.SourceCard = writeFile(t, "README.md", "---\nlicense: mit\n")
		}, isContent("front matter"), false},
		{"evidence not json", func(t *testing.T, o *bundle.Options) {
			o.EvidenceDir = t.TempDir()
			os.WriteFile(filepath.Join(o.EvidenceDir, "a.json"), []byte("{"), 0o644)
		}, isContent("not valid JSON"), false},
		{"evidence stray file", func(t *testing.T, o *bundle.Options) {
			o.EvidenceDir = t.TempDir()
			os.WriteFile(filepath.Join(o.EvidenceDir, "notes.txt"), []byte("x"), 0o644)
		}, isContent("not an evidence file"), false},
		{"damaged checkpoint", func(t *testing.T, o *bundle.Options) {
			dir := filepath.Join(t.TempDir(), "ck")
			bundletest.CopyDir(t, ckpt, dir)
			p := filepath.Join(dir, "layer-00.safetensors")
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 1
			os.WriteFile(p, b, 0o644)
			o.CheckpointDir = dir
		}, func(err error) bool { var m *lfmq1.MismatchError; return errors.As(err, &m) && m.Kind == "hash" }, false},
		{"toolchain pin", func(t *testing.T, o *bundle.Options) {
			dir := filepath.Join(t.TempDir(), "src")
			bundletest.CopyDir(t, src, dir)
			os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module github.com/lfmq/lfmq\n\ngo 1.26.0\n\ntoolchain go1.26.0-not-this-one\n"), 0o644)
			o.SourceDir = dir
		}, func(err error) bool { var te *bundle.ToolchainError; return errors.As(err, &te) }, false},
		{"quality hook refuses the evidence", func(t *testing.T, o *bundle.Options) {
			o.EvidenceDir = t.TempDir()
			os.WriteFile(filepath.Join(o.EvidenceDir, "score.json"), []byte("{}\n"), 0o644)
			o.Quality = func([]bundle.EvidenceFile, string) ([]string, error) {
				return nil, &bundle.InputError{Path: "--evidence score.json", Msg: "another checkpoint's", Option: true}
			}
			// Refused before the runtime is built.
			o.BuildBinary = func(context.Context, bundle.Platform, string, string, string) error {
				return errors.New("built a runtime for refused evidence")
			}
		}, isOption("--evidence score.json", "another checkpoint's"), false},
		{"build fails", func(t *testing.T, o *bundle.Options) {
			o.BuildBinary = func(context.Context, bundle.Platform, string, string, string) error {
				return errors.New("compiler on fire")
			}
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "compiler on fire") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			opts := bundletest.Options(t, ckpt, src, filepath.Join(parent, "release"))
			tt.edit(t, &opts)
			_, err := bundle.Build(context.Background(), opts)
			if !tt.want(err) {
				t.Fatalf("err = %v", err)
			}
			// Nothing that looks like a release is left behind.
			entries, _ := os.ReadDir(parent)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".release.tmp-") {
					t.Errorf("temporary directory %s left behind", e.Name())
				}
				if e.Name() == "release" && !tt.outExists {
					t.Error("a release directory appeared")
				}
			}
		})
	}
}

// isOption accepts an *InputError marked as an option error whose message
// has every one of want.
func isOption(want ...string) func(error) bool {
	return isInputError(true, want)
}

// isContent accepts an *InputError about an input's contents whose message
// has every one of want.
func isContent(want ...string) func(error) bool {
	return isInputError(false, want)
}

func isInputError(option bool, want []string) func(error) bool {
	return func(err error) bool {
		var ie *bundle.InputError
		if !errors.As(err, &ie) || ie.Option != option {
			return false
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				return false
			}
		}
		return true
	}
}

func TestBuildContents(t *testing.T) {
	ckpt := bundletest.Checkpoint(t)
	src := bundletest.Source(t)
	out := filepath.Join(t.TempDir(), "release")
	opts := bundletest.Options(t, ckpt, src, out)
	opts.EvidenceDir = t.TempDir()
	os.WriteFile(filepath.Join(opts.EvidenceDir, "fidelity-rtn.json"), []byte(`{"kl": 0.05}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(opts.EvidenceDir, "kl.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"><text x="1">KL per token: chat</text></svg>`+"\n"), 0o644)
	os.WriteFile(filepath.Join(opts.EvidenceDir, "untitled.svg"), []byte("<svg/>\n"), 0o644)
	var seen []string
	var seenSHA string
	opts.Quality = func(files []bundle.EvidenceFile, manifestSHA256 string) ([]string, error) {
		for _, f := range files {
			seen = append(seen, f.Path)
		}
		seenSHA = manifestSHA256
		return []string{"### Fidelity\n\n| candidate | KL |\n|---|---:|\n| RTN | 0.05 |\n"}, nil
	}
	res, err := bundle.Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"evidence/fidelity-rtn.json", "evidence/kl.svg", "evidence/untitled.svg"}) || seenSHA != res.ManifestSHA256 {
		t.Errorf("quality hook saw %v and manifest sha256 %s, want %s", seen, seenSHA, res.ManifestSHA256)
	}
	readme, _ := os.ReadFile(filepath.Join(out, "README.md"))
	for _, want := range []string{"| RTN | 0.05 |", "license: apache-2.0", "base_model: test/tiny-lfm2-moe", "`NOTICE`", "`evidence/fidelity-rtn.json`",
		"lfmq download https://huggingface.co/" + bundletest.HubRepo + " --revision v1",
		// Plots are images with relative links: the SVG's title as the
		// alternative text, else the file's name.
		"![KL per token: chat](evidence/kl.svg)", "![Plot untitled.svg](evidence/untitled.svg)"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README lacks %q", want)
		}
	}
	lic, _ := os.ReadFile(filepath.Join(out, "LICENSE"))
	if string(lic) != bundletest.License {
		t.Error("LICENSE not passed through byte for byte")
	}
	data, _ := os.ReadFile(filepath.Join(out, sums.RuntimeReleaseFile))
	rr, err := sums.ParseRuntimeRelease(data)
	if err != nil {
		t.Fatal(err)
	}
	if rr.ReleaseID != res.ReleaseID || rr.ReleaseID != "tiny-lfm2-moe-lfmq1-v1" || rr.Checkpoint.ManifestSHA256 != res.ManifestSHA256 {
		t.Errorf("runtime-release %+v", rr)
	}
	if rr.Toolchain.Go != runtimeGoVersion(t) || rr.Toolchain.KlauspostCompress == "" || !strings.Contains(rr.Toolchain.Ldflags, "SourceDigest="+rr.Lfmq.SourceSHA256) {
		t.Errorf("toolchain %+v", rr.Toolchain)
	}
	for _, p := range []string{".gitattributes", "LICENSE", "NOTICE", "README.md", "checkpoint/manifest.json",
		"evidence/fidelity-rtn.json", "evidence/kl.svg", "runtime/lfmq-darwin-arm64", "runtime/lfmq-linux-amd64", "runtime/lfmq-src.tar.gz"} {
		if _, ok := rr.File(p); !ok {
			t.Errorf("runtime-release.json lacks %s", p)
		}
	}
	if _, ok := rr.File(sums.RuntimeReleaseFile); ok {
		t.Error("runtime-release.json lists itself")
	}
	// The source archive holds the module and nothing of the machine.
	f, _ := os.Open(filepath.Join(out, "runtime", "lfmq-src.tar.gz"))
	defer f.Close()
	prefix, files, err := archive.Read(f)
	if err != nil || prefix != "lfmq-0.0.0-test" || len(files) != 4 {
		t.Errorf("archive %q %d files %v", prefix, len(files), err)
	}
	rep, err := verify.Release(context.Background(), out, verify.Options{Deep: true})
	if err != nil || !rep.OK {
		t.Fatalf("built release does not verify: %v %+v", err, rep.Findings)
	}
}

func runtimeGoVersion(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestReproducible builds a release twice with real go builds (linux/amd64
// here; every default platform with -tags long) and compares every byte.
// The two builds share nothing the output could depend on: the source
// archive is extracted into two directories, the releases go to different
// directories, GOMAXPROCS and the build parallelism differ, and the second
// build runs cold: an empty GOCACHE, an empty GOPATH and module cache, and
// the modules from the first one's download cache as a file:// proxy (no
// network). A build whose bytes depend on a cache's contents or path, or on
// where the source lies, fails here.
//
// The source is a snapshot: the source archive of the working tree,
// extracted. That also checks that the archive is a fixed point: archiving
// the extracted archive gives the same bytes.
func TestReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lfmq twice, once with a cold cache")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root, err := bundle.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ckpt := bundletest.Checkpoint(t)
	snapOut := filepath.Join(t.TempDir(), "snapshot")
	snap := bundletest.Options(t, ckpt, root, snapOut)
	snap.AllowDirty = true // the tree under test, edits included
	if _, err := bundle.Build(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	srcArchive, _ := os.ReadFile(filepath.Join(snapOut, "runtime", "lfmq-src.tar.gz"))
	extract := func(dir string) string {
		t.Helper()
		src, err := archive.Extract(bytes.NewReader(srcArchive), dir)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	evidence := t.TempDir()
	os.WriteFile(filepath.Join(evidence, "fidelity.json"), []byte("{\"kl\": 0.01}\n"), 0o644)

	build := func(src, out string, procs int) *bundle.Result {
		t.Helper()
		opts := bundletest.Options(t, ckpt, src, out)
		opts.BuildBinary = nil // the real go build
		opts.Platforms = reproPlatforms
		opts.EvidenceDir = evidence
		opts.BuildProcs = procs
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		res, err := bundle.Build(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a := build(extract(filepath.Join(t.TempDir(), "src")), filepath.Join(t.TempDir(), "first", "release"), 1)

	cold := coldGoEnv(t)
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	b := build(extract(filepath.Join(elsewhere, "source")), filepath.Join(elsewhere, "second-name"), max(2, runtime.NumCPU()))
	cold.check(t)
	if a.Digest != b.Digest {
		t.Errorf("release digests differ: %s %s", a.Digest, b.Digest)
	}
	compareTrees(t, a.Dir, b.Dir)
	got, _ := os.ReadFile(filepath.Join(a.Dir, "runtime", "lfmq-src.tar.gz"))
	if !bytes.Equal(got, srcArchive) {
		t.Error("archiving the extracted archive changed its bytes")
	}

	// GNU sha256sum -c passes inside the release.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
		cmd.Dir = a.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}
	// The binary for this machine runs and reports the archive's digest.
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		out, err := exec.Command(filepath.Join(a.Dir, "runtime", "lfmq-linux-amd64"), "version").Output()
		if err != nil || !strings.Contains(string(out), "source sha256 "+a.SourceSHA256) || !strings.Contains(string(out), "lfmq 0.0.0-test") {
			t.Errorf("runtime version: %v\n%s", err, out)
		}
	}
}

// coldEnv is a go environment with nothing cached.
type coldEnv struct{ cache, modcache string }

// coldGoEnv points the go command of the rest of the test at an empty
// GOCACHE, GOPATH and GOMODCACHE. The modules come from the current module
// cache's download directory used as a file:// GOPROXY, which holds the
// zips `go mod download` fetched and verified; go.sum pins each of them and
// Build refuses a go.sum that go mod vendor changes, so GOSUMDB is not
// needed. Nothing is fetched from the network.
func coldGoEnv(t *testing.T) coldEnv {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	download := filepath.Join(strings.TrimSpace(string(out)), "cache", "download")
	if _, err := os.Stat(download); err != nil {
		t.Fatalf("no module download cache to serve the cold build: %v", err)
	}
	dir := t.TempDir()
	c := coldEnv{cache: filepath.Join(dir, "gocache"), modcache: filepath.Join(dir, "gopath", "pkg", "mod")}
	t.Setenv("GOCACHE", c.cache)
	t.Setenv("GOPATH", filepath.Join(dir, "gopath"))
	t.Setenv("GOMODCACHE", c.modcache)
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(download))
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOFLAGS", "")
	// The module cache is read-only: go clean -modcache removes it before
	// the temporary directory's own cleanup (cleanups run last first).
	t.Cleanup(func() {
		cmd := exec.Command("go", "clean", "-modcache")
		cmd.Env = append(os.Environ(), "GOMODCACHE="+c.modcache)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go clean -modcache: %v\n%s", err, out)
		}
	})
	return c
}

// check fails the test unless the build really ran in the cold
// environment: it must have filled the empty caches.
func (c coldEnv) check(t *testing.T) {
	t.Helper()
	for _, dir := range []string{c.cache, filepath.Join(c.modcache, "github.com", "klauspost")} {
		if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
			t.Errorf("the cold build did not use %s (%v): the build's go environment is not the caller's", dir, err)
		}
	}
}

func compareTrees(t *testing.T, a, b string) {
	t.Helper()
	list := func(dir string) map[string][]byte {
		m := map[string][]byte{}
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				m[rel], _ = os.ReadFile(p)
			}
			return err
		})
		return m
	}
	ma, mb := list(a), list(b)
	if len(ma) != len(mb) || len(ma) == 0 {
		t.Errorf("%d files vs %d", len(ma), len(mb))
	}
	for p, da := range ma {
		if !bytes.Equal(da, mb[p]) {
			t.Errorf("%s differs between the two builds", p)
		}
	}
}

// TestBuildWithDrafter builds a release with a drafter twice: the drafter
// is under drafter/, every file of it in SHA256SUMS and runtime-release.json,
// its manifest pinned there and named on the card with its acceptance,
// its tensors under Git LFS; the two builds are byte-identical; the
// release verifies deeply, and a changed drafter byte fails verification
// naming the file (and the tensor, with Deep).
func TestBuildWithDrafter(t *testing.T) {
	ckpt := bundletest.Checkpoint(t)
	drafter := bundletest.Drafter(t, ckpt)
	src := bundletest.Source(t)
	var outs []string
	var res *bundle.Result
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "release")
		opts := bundletest.Options(t, ckpt, src, out)
		opts.DrafterDir = drafter
		r, err := bundle.Build(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		outs, res = append(outs, out), r
		if i == 0 {
			continue
		}
		compareTrees(t, outs[0], out)
	}
	out := outs[0]
	_, dsum, err := lfmq1.ReadManifest(drafter)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(out, sums.RuntimeReleaseFile))
	rr, err := sums.ParseRuntimeRelease(data)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Drafter == nil || rr.Drafter.ManifestSHA256 != dsum || rr.Drafter.Manifest != "drafter/manifest.json" || res.DrafterManifestSHA256 != dsum {
		t.Errorf("drafter pin %+v, result %s; want manifest sha256 %s", rr.Drafter, res.DrafterManifestSHA256, dsum)
	}
	sumsData, _ := os.ReadFile(filepath.Join(out, sums.SumsFile))
	for _, f := range []string{"drafter/manifest.json", "drafter/config.json", "drafter/drafter.safetensors"} {
		if _, ok := rr.File(f); !ok || !strings.Contains(string(sumsData), "  "+f+"\n") {
			t.Errorf("%s not listed in runtime-release.json and SHA256SUMS", f)
		}
	}
	attrs, _ := os.ReadFile(filepath.Join(out, ".gitattributes"))
	readme, _ := os.ReadFile(filepath.Join(out, "README.md"))
	if string(attrs) != bundle.GitAttributes+bundle.DrafterGitAttributes {
		t.Errorf(".gitattributes:\n%s", attrs)
	}
	for _, want := range []string{"## Drafter", "| drafter manifest sha256 | `" + dsum + "` |", "- `drafter/`:", "| code | 2 |"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README lacks %q", want)
		}
	}
	rep, err := verify.Release(context.Background(), out, verify.Options{Deep: true})
	if err != nil || !rep.OK || rep.DrafterManifestSHA256 != dsum {
		t.Fatalf("built release does not verify: %v %+v (drafter manifest %s)", err, rep.Findings, rep.DrafterManifestSHA256)
	}

	damaged := filepath.Join(t.TempDir(), "damaged")
	bundletest.CopyDir(t, out, damaged)
	p := filepath.Join(damaged, "drafter", "drafter.safetensors")
	b, _ := os.ReadFile(p)
	b[len(b)-100] ^= 1
	os.WriteFile(p, b, 0o644)
	rep, err = verify.Release(context.Background(), damaged, verify.Options{Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range rep.Findings {
		if f.Path == "drafter/drafter.safetensors" {
			kinds = append(kinds, string(f.Kind))
		}
	}
	if rep.OK || !slices.Contains(kinds, string(verify.KindHash)) || !slices.Contains(kinds, string(verify.KindTensor)) {
		t.Errorf("a flipped drafter byte: findings %+v", rep.Findings)
	}
}

// TestBuildRefusesDrafter: a drafter the release cannot carry for its
// checkpoint is refused before anything is built, naming --drafter.
func TestBuildRefusesDrafter(t *testing.T) {
	ckpt := bundletest.Checkpoint(t)
	drafter := bundletest.Drafter(t, ckpt)
	src := bundletest.Source(t)
	for _, c := range []struct {
		name string
		dir  func(t *testing.T) string
		want []string
	}{
		{"a model's checkpoint", func(t *testing.T) string { return bundletest.Checkpoint(t) }, []string{"--drafter", `architecture "lfm2_moe"`}},
		{"measured on another model", func(t *testing.T) string {
			// The same model quantized with the search exponent rule:
			// another checkpoint, whose drafter's acceptance says nothing
			// of this one.
			other := filepath.Join(t.TempDir(), "other")
			root, _ := bundle.FindModuleRoot(".")
			if _, err := quant.Quantize(context.Background(), quant.Options{ModelDir: filepath.Join(root, "testdata", "tiny-lfm2-moe", "model"), OutDir: other,
				Method: quant.RTN, DenseExponentRule: quant.ExponentSearch}); err != nil {
				t.Fatal(err)
			}
			return bundletest.Drafter(t, other)
		}, []string{"--drafter", "acceptance was measured on the model of manifest sha256", "not on this checkpoint"}},
		{"not there", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, []string{"--drafter", "no such directory"}},
		{"damaged", func(t *testing.T) string {
			d := filepath.Join(t.TempDir(), "drafter")
			bundletest.CopyDir(t, drafter, d)
			p := filepath.Join(d, "drafter.safetensors")
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 1
			os.WriteFile(p, b, 0o644)
			return d
		}, []string{"drafter.safetensors", "hash"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "release")
			opts := bundletest.Options(t, ckpt, src, out)
			opts.DrafterDir = c.dir(t)
			_, err := bundle.Build(context.Background(), opts)
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("release directory left behind")
			}
		})
	}
}

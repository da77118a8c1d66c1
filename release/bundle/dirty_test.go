package bundle_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify/sums"
)

// gitSource returns bundletest.Source committed into a fresh git
// repository, with a test file, a script and a docs file besides the
// archived ones; it skips the test without git.
func gitSource(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	src := bundletest.Source(t)
	writeTree(t, src, map[string]string{
		"cmd/lfmq/main_test.go": "package main\n",
		"scripts/x.sh":          "#!/bin/sh\n",
		"docs/x.md":             "x\n",
		"internal/a/a.go":       "package a\n",
	})
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-q", "-m", "source"},
	} {
		cmd := exec.Command("git", append([]string{"-C", src}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return src
}

// TestUncommittedFiles: the source archive's files that differ from the
// commit are found, and nothing else: changes to tests, scripts and docs
// do not make a runtime source dirty.
func TestUncommittedFiles(t *testing.T) {
	tests := []struct {
		name string
		edit func(t *testing.T, src string)
		want []string
	}{
		{"clean", func(*testing.T, string) {}, nil},
		{"not archived", func(t *testing.T, src string) {
			writeTree(t, src, map[string]string{"cmd/lfmq/main_test.go": "package main // edited\n", "docs/x.md": "y\n", "scripts/new.sh": "#!/bin/sh\n", "cmd/lfmq/new_test.go": "package main\n"})
			os.Remove(filepath.Join(src, "scripts", "x.sh"))
		}, nil},
		{"modified", func(t *testing.T, src string) {
			writeTree(t, src, map[string]string{"cmd/lfmq/main.go": "package main\n\nfunc main() { println() }\n"})
		}, []string{"cmd/lfmq/main.go"}},
		{"untracked and deleted", func(t *testing.T, src string) {
			writeTree(t, src, map[string]string{"internal/b/b.go": "package b\n"})
			os.Remove(filepath.Join(src, "internal", "a", "a.go"))
		}, []string{"internal/a/a.go", "internal/b/b.go"}},
		{"go.mod", func(t *testing.T, src string) {
			writeTree(t, src, map[string]string{"go.mod": "module github.com/lfmq/lfmq\n\ngo 1.26.1\n"})
		}, []string{"go.mod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := gitSource(t)
			tt.edit(t, src)
			got, versioned, err := bundle.UncommittedFiles(context.Background(), src)
			if err != nil || !versioned || !slices.Equal(got, tt.want) {
				t.Errorf("UncommittedFiles = %q, %v, %v; want %q", got, versioned, err, tt.want)
			}
		})
	}
	// A tree outside git has no commit to differ from.
	got, versioned, err := bundle.UncommittedFiles(context.Background(), bundletest.Source(t))
	if err != nil || versioned || got != nil {
		t.Errorf("outside git: %q, %v, %v", got, versioned, err)
	}
}

// TestBuildDirtySource: a dirty runtime source is refused before anything
// is built, unless AllowDirty, which runtime-release.json and the card
// then record; a clean one records nothing.
func TestBuildDirtySource(t *testing.T) {
	src := gitSource(t)
	ckpt := bundletest.Checkpoint(t)
	build := func(allow bool) (string, error) {
		out := filepath.Join(t.TempDir(), "release")
		o := bundletest.Options(t, ckpt, src, out)
		o.AllowDirty = allow
		_, err := bundle.Build(context.Background(), o)
		return out, err
	}
	out, err := build(false)
	if err != nil {
		t.Fatalf("clean source: %v", err)
	}
	rr := readRuntimeRelease(t, out)
	if rr.Lfmq.SourceDirty != nil {
		t.Errorf("a clean build records source_dirty %q", rr.Lfmq.SourceDirty)
	}

	writeTree(t, src, map[string]string{"cmd/lfmq/main.go": "package main\n\nfunc main() { println() }\n"})
	out, err = build(false)
	var de *bundle.DirtyError
	if !errors.As(err, &de) || !slices.Equal(de.Files, []string{"cmd/lfmq/main.go"}) || !strings.Contains(err.Error(), "--allow-dirty") {
		t.Fatalf("dirty source: %v; want a DirtyError naming cmd/lfmq/main.go", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused build left its output")
	}
	out, err = build(true)
	if err != nil {
		t.Fatalf("--allow-dirty: %v", err)
	}
	rr = readRuntimeRelease(t, out)
	if !slices.Equal(rr.Lfmq.SourceDirty, []string{"cmd/lfmq/main.go"}) {
		t.Errorf("runtime-release.json source_dirty = %q", rr.Lfmq.SourceDirty)
	}
	readme, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil || !strings.Contains(string(readme), "built with `--allow-dirty`") {
		t.Errorf("the card does not say the release was built from uncommitted changes (%v)", err)
	}
}

func readRuntimeRelease(t *testing.T, dir string) *sums.RuntimeRelease {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, sums.RuntimeReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	rr, err := sums.ParseRuntimeRelease(data)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

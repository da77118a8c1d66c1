package launch

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

// release builds a test release (stand-in runtimes for linux/amd64 and
// darwin/arm64).
func release(t *testing.T) string {
	t.Helper()
	return bundletest.Release(t, nil)
}

func prepare(t *testing.T, o Options) (*Plan, error) {
	t.Helper()
	if o.GOOS == "" {
		o.GOOS, o.GOARCH = "linux", "amd64"
	}
	return Prepare(context.Background(), o)
}

// TestPrepare: a clean release gives the runtime, the exact serve
// arguments, a labelled cache; a second launch accepts its own label.
func TestPrepare(t *testing.T) {
	dir := release(t)
	p, err := prepare(t, Options{ReleaseDir: dir, Serve: []string{"--port", "9000", "--sampling-preset", "agentic"}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, sums.RuntimeReleaseFile))
	rr, err := sums.ParseRuntimeRelease(data)
	if err != nil {
		t.Fatal(err)
	}
	bin, _ := rr.Binary("linux", "amd64")
	cache := filepath.Join(dir, ".cache", "lfmq", "serve")
	wantArgs := []string{"serve", "--model", filepath.Join(dir, "checkpoint"), "--served-model-name", rr.ReleaseID, "--cache-dir", cache, "--port", "9000", "--sampling-preset", "agentic"}
	if p.Binary != filepath.Join(dir, "runtime", "lfmq-linux-amd64") || !slices.Equal(p.Args, wantArgs) {
		t.Errorf("plan %s %v\nwant %v", p.Binary, p.Args, wantArgs)
	}
	if p.RuntimeSHA256 != bin.SHA256 || p.ManifestSHA256 != rr.Checkpoint.ManifestSHA256 || p.ReleaseID != rr.ReleaseID || !p.Report.OK {
		t.Errorf("pins %+v", p)
	}
	label, err := os.ReadFile(filepath.Join(cache, IdentityFile))
	if err != nil || !strings.Contains(string(label), bin.SHA256) {
		t.Errorf("label %s, %v", label, err)
	}
	if _, err := prepare(t, Options{ReleaseDir: dir}); err != nil {
		t.Errorf("second launch: %v", err)
	}
	if got := p.Command(); !strings.HasPrefix(got, p.Binary+" serve --model ") || !strings.HasSuffix(got, " --port 9000 --sampling-preset agentic") {
		t.Errorf("command %s", got)
	}
	// --served-model-name given: launch does not add its own.
	p2, _ := prepare(t, Options{ReleaseDir: dir, Serve: []string{"--served-model-name=x"}})
	if slices.Contains(p2.Args, rr.ReleaseID) {
		t.Errorf("args %v", p2.Args)
	}
}

// TestRefusals: a tampered byte, a changed runtime, a foreign cache, an
// unlabelled non-empty cache and a missing platform each stop the launch
// before anything runs.
func TestRefusals(t *testing.T) {
	t.Run("tampered checkpoint byte", func(t *testing.T) {
		dir := release(t)
		f := filepath.Join(dir, "checkpoint", "global.safetensors")
		data, _ := os.ReadFile(f)
		data[4096] ^= 1
		os.WriteFile(f, data, 0o644)
		_, err := prepare(t, Options{ReleaseDir: dir})
		var me *verify.MismatchError
		if !errors.As(err, &me) || me.Kind != verify.KindHash {
			t.Errorf("got %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, ".cache")); err == nil {
			t.Error("a cache was created for a release that failed verification")
		}
	})
	t.Run("changed runtime", func(t *testing.T) {
		dir := release(t)
		os.WriteFile(filepath.Join(dir, "runtime", "lfmq-linux-amd64"), []byte("#!/bin/sh\necho other\n"), 0o755)
		var me *verify.MismatchError
		if _, err := prepare(t, Options{ReleaseDir: dir}); !errors.As(err, &me) {
			t.Errorf("got %v", err)
		}
	})
	t.Run("foreign cache", func(t *testing.T) {
		dir := release(t)
		cache := t.TempDir()
		label, _ := json.Marshal(identity{Schema: identitySchema, ReleaseID: "other", ManifestSHA256: strings.Repeat("0", 64), RuntimeSHA256: strings.Repeat("1", 64)})
		os.WriteFile(filepath.Join(cache, IdentityFile), label, 0o644)
		var ce *CacheError
		if _, err := prepare(t, Options{ReleaseDir: dir, CacheDir: cache}); !errors.As(err, &ce) || ce.Kind != "foreign" || ce.Field != "release_id" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("unlabelled cache", func(t *testing.T) {
		dir := release(t)
		cache := t.TempDir()
		os.WriteFile(filepath.Join(cache, "something"), []byte("x"), 0o644)
		var ce *CacheError
		if _, err := prepare(t, Options{ReleaseDir: dir, CacheDir: cache}); !errors.As(err, &ce) || ce.Kind != "unlabelled" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("no runtime for the platform", func(t *testing.T) {
		var pe *PlatformError
		dir := release(t)
		_, err := prepare(t, Options{ReleaseDir: dir, GOOS: "windows", GOARCH: "amd64"})
		if !errors.As(err, &pe) || !slices.Equal(pe.Available, []string{"darwin/arm64", "linux/amd64"}) {
			t.Errorf("got %v", err)
		}
		// The command to run instead names this release's checkpoint.
		if want := "run lfmq serve --model " + ShellQuote(filepath.Join(dir, "checkpoint")) + " with"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to say %q", err, want)
		}
	})
	t.Run("not a directory", func(t *testing.T) {
		if _, err := prepare(t, Options{ReleaseDir: filepath.Join(t.TempDir(), "none")}); err == nil {
			t.Error("accepted")
		}
	})
}

// TestExecuteBit: a runtime that lost its execute bit (hf download) gets
// it back; a dry run changes nothing.
func TestExecuteBit(t *testing.T) {
	dir := release(t)
	bin := filepath.Join(dir, "runtime", "lfmq-linux-amd64")
	os.Chmod(bin, 0o644)
	p, err := prepare(t, Options{ReleaseDir: dir, DryRun: true})
	if err != nil || !p.MadeExecutable {
		t.Fatalf("%v %+v", err, p)
	}
	if st, _ := os.Stat(bin); st.Mode().Perm() != 0o644 {
		t.Errorf("dry run changed the mode to %v", st.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, ".cache")); err == nil {
		t.Error("dry run labelled a cache")
	}
	if _, err := prepare(t, Options{ReleaseDir: dir}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(bin); st.Mode().Perm()&0o111 != 0o111 {
		t.Errorf("mode %v", st.Mode())
	}
}

func TestDir(t *testing.T) {
	tests := []struct {
		o       Options
		want    string
		wantErr bool
	}{
		{Options{ReleaseDir: "r"}, "r", false},
		{Options{CacheRoot: "c", Repo: "owner/name", Revision: "v1"}, filepath.Join("c", "owner--name", "v1"), false},
		{Options{ReleaseDir: "r", Repo: "o/n"}, "", true},
		{Options{CacheRoot: "c", Repo: "owner", Revision: "v1"}, "", true},
		{Options{CacheRoot: "c", Repo: "o/n", Revision: "../x"}, "", true},
		{Options{}, "", true},
	}
	for _, tt := range tests {
		got, err := tt.o.Dir()
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%+v: %q, %v", tt.o, got, err)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{"plain/path-1.2": "plain/path-1.2", "with space": "'with space'", "it's": `'it'\''s'`, "": "''", `{"a":1}`: `'{"a":1}'`} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

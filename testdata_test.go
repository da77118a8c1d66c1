package lfmq_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

// TestSHA256SUMS checks the root SHA256SUMS with the project's own strict
// verifier (what `lfmq verify --sums SHA256SUMS` does), and that it lists
// every file under a testdata/ directory of the repository (the root's and
// the packages' golden files) and nothing else.
func TestSHA256SUMS(t *testing.T) {
	rep, err := verify.Sums(context.Background(), "SHA256SUMS", verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("SHA256SUMS does not match the files (run make sums after a deliberate change):\n%v", err)
	}
	data, err := os.ReadFile("SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := sums.Parse("SHA256SUMS", data, sums.AnyPath)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range entries {
		if !inTestdata(e.Path) {
			t.Errorf("SHA256SUMS lists %s, which is not under a testdata/ directory", e.Path)
		}
		listed[e.Path] = true
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if inTestdata(path) && !listed[filepath.ToSlash(path)] {
			t.Errorf("%s is not listed in SHA256SUMS (run make sums)", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func inTestdata(path string) bool {
	for _, seg := range strings.Split(filepath.ToSlash(path), "/") {
		if seg == "testdata" {
			return true
		}
	}
	return false
}

package lfmq_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestFixtureREADME: the tiny model's README describes the files that are
// there: each row of its files table exists with that size and sha256, and
// every file of the fixture has a row.
func TestFixtureREADME(t *testing.T) {
	const dir = "testdata/tiny-lfm2-moe"
	data, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ([0-9,]+) \\| `([0-9a-f]{64})` \\|$")
	rows := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		p, size, sum := m[1], strings.ReplaceAll(m[2], ",", ""), m[3]
		rows[p] = true
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("README lists %s: %v", p, err)
			continue
		}
		if got := sha256.Sum256(b); strconv.Itoa(len(b)) != size || hex.EncodeToString(got[:]) != sum {
			t.Errorf("README lists %s as %s bytes, sha256 %s; it has %d bytes, sha256 %x", p, size, sum, len(b), got)
		}
	}
	if len(rows) == 0 {
		t.Fatal("no files table in the README")
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "README.md" {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if !rows[filepath.ToSlash(rel)] {
			t.Errorf("%s is not in the README's files table", rel)
		}
		return nil
	})
}

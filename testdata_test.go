package lfmq_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestSHA256SUMS checks that every file under a testdata/ directory of the
// repository (the root's and the packages' golden files) is listed in the
// root SHA256SUMS with its current digest, and that nothing else is listed.
func TestSHA256SUMS(t *testing.T) {
	f, err := os.Open("SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^([0-9a-f]{64})  ((?:[A-Za-z0-9._-]+/)*testdata/[A-Za-z0-9._/-]+)$`)
	listed := map[string]string{}
	var order []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("SHA256SUMS line %d: %q is not '<64 hex>  <dir/>testdata/<path>'", n, sc.Text())
		}
		if _, dup := listed[m[2]]; dup {
			t.Fatalf("SHA256SUMS line %d: %s listed twice", n, m[2])
		}
		listed[m[2]] = m[1]
		order = append(order, m[2])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !sort.StringsAreSorted(order) {
		t.Error("SHA256SUMS lines are not sorted by path")
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
		if !inTestdata(path) {
			return nil
		}
		want, ok := listed[path]
		if !ok {
			t.Errorf("%s is not listed in SHA256SUMS (run make sums)", path)
			return nil
		}
		delete(listed, path)
		got, err := fileSHA256(path)
		if err != nil {
			return err
		}
		if got != want {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for path := range listed {
		t.Errorf("SHA256SUMS lists %s, which does not exist", path)
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

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

package lfmq_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureListsEveryPackage: docs/architecture.md's package table
// names every package that `go list ./...` reports, and no folder that is
// not one, so the map a new engineer reads is the tree they clone.
func TestArchitectureListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	// The table rows start with a backticked folder: "| `engine/model` | … |".
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9/._-]+)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, strings.TrimSuffix(m[1], "/"))
	}
	if len(documented) == 0 {
		t.Fatal("docs/architecture.md has no package table (rows like \"| `engine/model` | … |\")")
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	const module = "github.com/lfmq/lfmq"
	var listed []string
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if rel == "" {
			rel = "."
		}
		listed = append(listed, rel)
	}

	for _, p := range listed {
		if !slices.Contains(documented, p) {
			t.Errorf("package %s is missing from docs/architecture.md's table", p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(listed, p) {
			t.Errorf("docs/architecture.md lists %s, which go list ./... does not report", p)
		}
	}
}

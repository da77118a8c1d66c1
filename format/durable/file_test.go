package durable

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: the file appears whole under its name (replacing an
// older one), mode 0644, with nothing left beside it; a missing directory
// is an error that leaves nothing behind.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, data := range []string{"one", "two, longer"} {
		if err := WriteFile(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		st, _ := os.Stat(p)
		if string(got) != data || st.Mode().Perm() != 0o644 {
			t.Errorf("%q %v", got, st.Mode())
		}
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x")); err == nil {
		t.Error("no error for a missing directory")
	}
	a, err := Create(filepath.Join(dir, "aborted"))
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("partial"))
	a.Abort()
	if err := a.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left %v", entries)
	}
}

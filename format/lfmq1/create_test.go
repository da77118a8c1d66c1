package lfmq1

import (
	"os"
	"path/filepath"
	"testing"
)

// commitEmpty commits a Writer with one small file and fails the test on
// any error.
func commitEmpty(t *testing.T, w *Writer) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(cfg, []byte(`{"model_type":"lfm2_moe"}`), 0o644)
	if err := w.CopyFile(cfg, "config.json"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(&Manifest{LfmqVersion: "test", CreatedBy: "test"}, map[string]any{}); err != nil {
		t.Fatal(err)
	}
}

// TestCreateDirMode: a checkpoint's directory has the same mode whichever
// Writer made it (an RTN run's Create, a GPTQ run's CreateResumable), not
// MkdirTemp's 0700, which only its owner can read.
func TestCreateDirMode(t *testing.T) {
	refDir := filepath.Join(t.TempDir(), "ref")
	if err := os.Mkdir(refDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ref, err := os.Stat(refDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, resumable := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "ckpt")
		var w *Writer
		var err error
		if resumable {
			w, _, err = CreateResumable(dir, false)
		} else {
			w, err = Create(dir)
		}
		if err != nil {
			t.Fatal(err)
		}
		commitEmpty(t, w)
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != ref.Mode() {
			t.Errorf("resumable %v: checkpoint directory mode %v, want %v (0755 less the umask)", resumable, st.Mode(), ref.Mode())
		}
	}
}

// TestCreateCurrentDir: "." naming an empty current directory is a
// destination like any other empty directory: the checkpoint is built
// beside it and takes its place, for Create and CreateResumable alike.
func TestCreateCurrentDir(t *testing.T) {
	for _, resumable := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "here")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		var w *Writer
		var err error
		if resumable {
			w, _, err = CreateResumable(".", false)
		} else {
			w, err = Create(".")
		}
		if err != nil {
			t.Fatal(err)
		}
		commitEmpty(t, w)
		if _, _, err := ReadManifest(dir); err != nil {
			t.Errorf("resumable %v: no checkpoint at %s: %v", resumable, dir, err)
		}
		entries, _ := os.ReadDir(filepath.Dir(dir))
		if len(entries) != 1 {
			t.Errorf("resumable %v: %d entries beside the checkpoint, want none", resumable, len(entries)-1)
		}
	}
}

package lfmq1

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lfmq/lfmq/format/dtype"
)

// TestResumableWriter: a resumable Writer builds in a fixed hidden
// directory that survives Keep, is refused without resume, reused with it,
// and swept of foreign files on Commit.
func TestResumableWriter(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ckpt")
	norm := []Tensor{{Name: "model.embedding_norm.weight", Format: BF16, Shape: []int64{2}, DType: dtype.BF16, StoredShape: []int64{2}, Data: []byte{0, 0x3f, 0, 0x3f}}}

	w, resumed, err := CreateResumable(dir, false)
	if err != nil || resumed {
		t.Fatalf("CreateResumable: %v, resumed %v", err, resumed)
	}
	if w.Dir() != PartialDir(dir) || PartialDir(dir) != filepath.Join(parent, ".ckpt.partial") {
		t.Fatalf("partial directory %s", w.Dir())
	}
	if err := w.WriteFile(GlobalFile, norm); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(w.Dir(), ".resume"), 0o755)
	os.WriteFile(filepath.Join(w.Dir(), ".resume", "progress.json"), []byte("{}"), 0o644)
	w.Keep()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unfinished run created %s", dir)
	}
	if IsCheckpoint(PartialDir(dir)) {
		t.Fatal("the partial directory looks like a checkpoint")
	}

	_, _, err = CreateResumable(dir, false)
	var pe *PartialExistsError
	if !errors.As(err, &pe) || pe.Partial != PartialDir(dir) {
		t.Fatalf("a second run without resume: err = %v", err)
	}
	w, resumed, err = CreateResumable(dir, true)
	if err != nil || !resumed {
		t.Fatalf("resume: %v, resumed %v", err, resumed)
	}
	if _, err := os.Stat(filepath.Join(w.Dir(), GlobalFile)); err != nil {
		t.Fatalf("the resumed directory lost its file: %v", err)
	}
	if err := w.WriteFile(GlobalFile, norm); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(&Manifest{LfmqVersion: "test", CreatedBy: "test"}, nil); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != GlobalFile || names[1] != ManifestFile {
		t.Errorf("committed directory holds %v, want the file and the manifest only", names)
	}
	if _, err := Open(dir, CheckTensors); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 1 {
		t.Errorf("entries beside the checkpoint: %v", left)
	}
	if _, _, err := CreateResumable(dir, true); err == nil {
		t.Error("CreateResumable over a finished checkpoint succeeded")
	}
}

package durable

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "windows" {
		return
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if err := SyncDir(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("SyncDir(missing) = %v, want an error naming the directory", err)
	}
}

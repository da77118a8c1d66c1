package api

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDefaultServedModelName: the default model id is the checkpoint
// directory's name however the directory is written, never "." or "..".
func TestDefaultServedModelName(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "tiny-gptq", "sub")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tests := []struct{ in, want string }{
		{".", "sub"},
		{"./", "sub"},
		{"..", "tiny-gptq"},
		{"../sub/", "sub"},
		{dir, "sub"},
		{dir + "/", "sub"},
		{"ckpt", "ckpt"},
	}
	for _, tt := range tests {
		if got := DefaultServedModelName(tt.in); got != tt.want {
			t.Errorf("DefaultServedModelName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

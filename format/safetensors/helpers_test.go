package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// Fixture paths, relative to this package's directory.
var (
	modelPath   = filepath.Join("..", "..", "testdata", "tiny-lfm2-moe", "model", "model.safetensors")
	hiddenPath  = filepath.Join("..", "..", "testdata", "tiny-lfm2-moe", "reference", "hidden_states.safetensors")
	logitsPath  = filepath.Join("..", "..", "testdata", "tiny-lfm2-moe", "reference", "logits.safetensors")
	calibPath   = filepath.Join("..", "..", "testdata", "tiny-lfm2-moe", "calibration", "calibration_ids.safetensors")
	calibJSONL  = filepath.Join("..", "..", "testdata", "tiny-lfm2-moe", "calibration", "calibration.jsonl")
	allFixtures = []string{modelPath, hiddenPath, logitsPath, calibPath}
)

// rawFile assembles a file from a header string (unpadded) and data.
func rawFile(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// writeTemp writes b to a new file in a test directory and returns its path.
func writeTemp(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// headerOf returns the header region and data length of a safetensors file.
func headerOf(t testing.TB, path string) ([]byte, int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	return b[8 : 8+n], int64(len(b)) - 8 - int64(n)
}

package evidence

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// HashFile returns the sha256 (lower-case hex) and size of the file at path.
func HashFile(path string) (string, int64, error) {
	sum, n, err := lfmq1.HashFile(path)
	if err != nil {
		return "", 0, fmt.Errorf("evidence: hashing %s: %w", path, err)
	}
	return sum, n, nil
}

// HashBytes returns the sha256 of b in lower-case hex.
func HashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// IdentifyCheckpoint returns the receipt of the checkpoint in dir, labelled
// name. An lfmq-1 checkpoint is identified by its manifest sha256 (the
// manifest pins every file; the scorer opens it with lfmq1.CheckFiles, so
// the files are verified against it). A Hugging Face checkpoint is
// identified by hashing every regular top-level file (as the quantizer
// records its source): Identity is the sha256 of the canonical JSON of that
// list, so changing any byte of any file changes it.
func IdentifyCheckpoint(name, dir string) (Checkpoint, error) {
	c := Checkpoint{Name: name, Dir: dir}
	cfg, _, err := HashFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return c, err
	}
	c.ConfigSHA256 = cfg
	if lfmq1.IsCheckpoint(dir) {
		m, sum, err := lfmq1.ReadManifest(dir)
		if err != nil {
			return c, fmt.Errorf("evidence: %w", err)
		}
		c.Format, c.Identity, c.ManifestSHA256 = "lfmq-1", sum, sum
		c.SourceConfigSHA256 = m.Source.ConfigSHA256
		ex := m.Quantization.Experts
		parts := []string{ex.Method}
		for _, f := range ex.Formats {
			parts = append(parts, string(f))
		}
		c.Experts = strings.TrimSpace(strings.Join(parts, " "))
		return c, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return c, fmt.Errorf("evidence: %w", err)
	}
	src := lfmq1.Source{ConfigSHA256: cfg}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		sum, size, err := HashFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return c, err
		}
		src.Files = append(src.Files, lfmq1.FileEntry{Path: e.Name(), Size: size, SHA256: sum})
	}
	data, err := canonjson.Marshal(src)
	if err != nil {
		return c, fmt.Errorf("evidence: %w", err)
	}
	c.Format, c.Identity, c.Files = "hf", HashBytes(data), src.Files
	return c, nil
}

// CurrentMachine describes the machine this process runs on.
func CurrentMachine() Machine {
	return Machine{
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpuModel(),
		Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
	}
}

// cpuModel reads the processor name where the OS tells it (Linux's
// /proc/cpuinfo), "unknown" elsewhere.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// BinarySHA256 returns the sha256 of the running executable.
func BinarySHA256() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("evidence: locating the executable: %w", err)
	}
	sum, _, err := HashFile(exe)
	return sum, err
}

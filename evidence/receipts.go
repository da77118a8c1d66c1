package evidence

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/lfmq/lfmq/format/identity"
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
// name, from identity.Of (the identity lfmq serve reports for the same
// directory). An lfmq-1 checkpoint is identified by its manifest sha256
// (the manifest pins every file; the scorer opens it with
// lfmq1.CheckFiles, so the files are verified against it). A Hugging Face
// checkpoint is identified by hashing every regular top-level file (as the
// quantizer records its source): Identity is the sha256 of the canonical
// JSON of that list, so changing any byte of any file changes it.
func IdentifyCheckpoint(name, dir string) (Checkpoint, error) {
	c := Checkpoint{Name: name, Dir: dir}
	id, err := identity.Of(dir)
	if err != nil {
		return c, fmt.Errorf("evidence: checkpoint %s: %w", name, err)
	}
	c.Format, c.Identity, c.ManifestSHA256, c.ConfigSHA256 = id.Format, id.Identity, id.ManifestSHA256, id.ConfigSHA256
	c.Files, c.SourceConfigSHA256, c.Experts = id.Files, id.SourceConfigSHA256, id.Experts
	c.Repo, c.Commit, c.SourceRepo, c.SourceCommit = id.Repo, id.Commit, id.SourceRepo, id.SourceCommit
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

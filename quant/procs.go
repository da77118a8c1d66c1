package quant

import (
	"os"
	"runtime"

	"github.com/lfmq/lfmq/format/lfmq1"
)

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// executableDigest returns the sha256 of the running executable, or
// "unknown" where it cannot be read.
func executableDigest() string {
	path, err := os.Executable()
	if err != nil {
		return "unknown"
	}
	sum, _, err := lfmq1.HashFile(path)
	if err != nil {
		return "unknown"
	}
	return sum
}

//go:build unix

package verify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

// benchBlobs × benchBlobSize is the bulk of the generated release (~1 GB),
// in files of the size of a real release's expert files.
const (
	benchBlobs    = 24
	benchBlobSize = 40 << 20
)

var (
	benchOnce sync.Once
	benchErr  error
)

// benchRelease returns a generated ~1 GB release: a test release plus
// pseudo-random blobs, with both lists re-signed, so verify does its full
// work (lists, agreement, pins, manifest) over every byte.
func benchRelease(b *testing.B) (string, int64) {
	benchOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "lfmq-verify-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchDir = filepath.Join(tmp, "release")
		bundletest.CopyDir(b, bundletest.Release(b, nil), benchDir)
		blobs := filepath.Join(benchDir, "blobs")
		os.MkdirAll(blobs, 0o755)
		rng := rand.NewChaCha8([32]byte{'l', 'f', 'm', 'q'})
		var rr sums.RuntimeRelease
		data, _ := os.ReadFile(filepath.Join(benchDir, sums.RuntimeReleaseFile))
		json.Unmarshal(data, &rr)
		for i := 0; i < benchBlobs; i++ {
			name := fmt.Sprintf("blobs/blob-%02d.bin", i)
			f, err := os.Create(filepath.Join(benchDir, filepath.FromSlash(name)))
			if err != nil {
				benchErr = err
				return
			}
			if _, err := io.CopyN(f, rng, benchBlobSize); err != nil {
				benchErr = err
				return
			}
			f.Close()
			rr.Files = append(rr.Files, sums.File{Path: name})
		}
		slicesSortFiles(rr.Files)
		resignWith(b, benchDir, &rr)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	var total int64
	filepath.WalkDir(benchDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			info, _ := d.Info()
			total += info.Size()
		}
		return err
	})
	return benchDir, total
}

func BenchmarkRelease(b *testing.B) {
	dir, total := benchRelease(b)
	for _, procs := range []int{1, 2} {
		b.Run(fmt.Sprintf("lfmq/procs=%d", procs), func(b *testing.B) {
			prev := runtime.GOMAXPROCS(procs)
			defer runtime.GOMAXPROCS(prev)
			b.SetBytes(total)
			cpu := cpuTime(syscall.RUSAGE_SELF)
			for i := 0; i < b.N; i++ {
				rep, err := verify.Release(context.Background(), dir, verify.Options{Workers: procs})
				if err != nil || !rep.OK {
					b.Fatalf("%v %+v", err, rep)
				}
			}
			reportCPU(b, total, cpuTime(syscall.RUSAGE_SELF)-cpu)
		})
	}
	// The same files with GNU sha256sum -c, one process, in the same run.
	b.Run("sha256sum", func(b *testing.B) {
		if _, err := exec.LookPath("sha256sum"); err != nil {
			b.Skip("no sha256sum")
		}
		b.SetBytes(total)
		cpu := cpuTime(syscall.RUSAGE_CHILDREN)
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("sha256sum", "--quiet", "--strict", "-c", "SHA256SUMS")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
		}
		reportCPU(b, total, cpuTime(syscall.RUSAGE_CHILDREN)-cpu)
	})
}

// cpuTime is the user+system CPU time of this process or of its waited-for
// children. Throughput per CPU second does not depend on what else the
// machine runs, which wall-clock MB/s on a shared machine does.
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, total int64, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(total)*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu-s")
	}
}

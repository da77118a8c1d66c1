package publish_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lfmq/lfmq/hub/hubtest"
	"github.com/lfmq/lfmq/hub/publish"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

// BenchmarkPublishVsVerify publishes a release of eight LFS files, 1 GiB
// in all (LFMQ_PUBLISH_BENCH_MB sets another size), to a fresh local test
// hub per iteration, and in the same iteration hashes the same files as
// lfmq verify does. It reports both rates and their ratio: on a local link
// the upload must not be the slow part of a release's journey (issue 11:
// publish ≥ 0.5 × verify).
func BenchmarkPublishVsVerify(b *testing.B) {
	total := int64(1024) << 20
	if s := os.Getenv("LFMQ_PUBLISH_BENCH_MB"); s != "" {
		mb, err := strconv.Atoi(s)
		if err != nil || mb < 8 {
			b.Fatalf("LFMQ_PUBLISH_BENCH_MB=%q: want a number of MiB, at least 8", s)
		}
		total = int64(mb) << 20
	}
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "checkpoint"), 0o755); err != nil {
		b.Fatal(err)
	}
	var list strings.Builder
	add := func(p string, data io.Reader) {
		f, err := os.Create(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(f, h), data); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&list, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), p)
	}
	add(".gitattributes", strings.NewReader(bundle.GitAttributes))
	rng := rand.NewChaCha8([32]byte{1})
	for i := range 8 {
		add(fmt.Sprintf("checkpoint/part-%02d.safetensors", i), io.LimitReader(rng, total/8))
	}
	sumsPath := filepath.Join(dir, sums.SumsFile)
	if err := os.WriteFile(sumsPath, []byte(list.String()), 0o644); err != nil {
		b.Fatal(err)
	}

	var hashTime, pubTime time.Duration
	b.SetBytes(total)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		rep, err := verify.Sums(context.Background(), sumsPath, verify.Options{})
		if err != nil || !rep.OK {
			b.Fatalf("verify: %v %+v", err, rep)
		}
		hashTime += time.Since(start)

		srv := hubtest.NewServer()
		srv.Token = token
		storage := httptest.NewServer(srv.Storage())
		srv.StorageURL = storage.URL
		hub := httptest.NewServer(srv)
		start = time.Now()
		res, err := publish.Publish(context.Background(), publish.Options{
			Endpoint: hub.URL, Repo: repo, Revision: fmt.Sprintf("v%d", i), Dir: dir, Create: true, Token: token,
			Client: &http.Client{Timeout: 10 * time.Minute},
		})
		pubTime += time.Since(start)
		hub.Close()
		storage.Close()
		if err != nil {
			b.Fatal(err)
		}
		if res.UploadedBytes < total {
			b.Fatalf("uploaded %d bytes of %d", res.UploadedBytes, total)
		}
	}
	b.StopTimer()
	mb := float64(total) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/pubTime.Seconds(), "publish-MiB/s")
	b.ReportMetric(mb/hashTime.Seconds(), "verify-MiB/s")
	b.ReportMetric(hashTime.Seconds()/pubTime.Seconds(), "publish/verify")
}

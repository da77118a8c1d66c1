package download_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lfmq/lfmq/format/sshsig"
	"github.com/lfmq/lfmq/hub/download"
	"github.com/lfmq/lfmq/hub/hubtest"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

const (
	repo   = "lfmq/tiny-lfm2-moe-lfmq1"
	commit = "0123456789abcdef0123456789abcdef01234567"
	big    = "checkpoint/global.safetensors" // the largest file, 3.2 MB
)

var (
	once sync.Once
	rel  string
)

func release(t *testing.T) string {
	once.Do(func() {
		dir, err := os.MkdirTemp("", "lfmq-download-test-")
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.Join(dir, "release")
		bundletest.CopyDir(t, bundletest.Release(t, nil), rel)
	})
	return rel
}

func TestMain(m *testing.M) {
	code := m.Run()
	if rel != "" {
		os.RemoveAll(filepath.Dir(rel))
	}
	os.Exit(code)
}

func newHub(t *testing.T) (*hubtest.Hub, *httptest.Server) {
	h := hubtest.New(release(t), repo, "v1")
	h.Commit = commit
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func opts(srv *httptest.Server, cache string) download.Options {
	return download.Options{
		URL: srv.URL + "/" + repo, Revision: "v1", CacheRoot: cache,
		Client: srv.Client(), Backoff: func(int) time.Duration { return time.Millisecond },
	}
}

func fileSize(t *testing.T, p string) int64 {
	info, err := os.Stat(filepath.Join(release(t), filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func TestDownloadAndRerun(t *testing.T) {
	h, srv := newHub(t)
	cache := t.TempDir()
	res, err := download.Download(context.Background(), opts(srv, cache))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "lfmq--tiny-lfm2-moe-lfmq1", "v1")
	if res.Dir != want || res.Commit != commit || !res.Report.OK || len(res.Skipped) != 0 {
		t.Fatalf("result %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(want, filepath.FromSlash(download.CommitFile))); string(got) != commit+"\n" {
		t.Errorf("commit file %q", got)
	}
	// SHA256SUMS at the revision, everything else at the commit.
	for _, r := range h.Requests() {
		wantRev := commit
		if r.Path == sums.SumsFile {
			wantRev = "v1"
		}
		if r.Revision != wantRev {
			t.Errorf("%s fetched at %q, want %q", r.Path, r.Revision, wantRev)
		}
	}
	// A second run re-hashes and fetches nothing but the list (and asks
	// for a signature, which this release does not have).
	before := len(h.Requests())
	res, err = download.Download(context.Background(), opts(srv, cache))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fetched) != 0 || len(h.Requests()) != before+2 {
		t.Errorf("rerun fetched %v (%d requests)", res.Fetched, len(h.Requests())-before)
	}
	// A damaged and a deleted file are fetched again, nothing else.
	p := filepath.Join(want, "checkpoint", "layer-02.safetensors")
	b, _ := os.ReadFile(p)
	b[100] ^= 1
	os.WriteFile(p, b, 0o644)
	os.Remove(filepath.Join(want, "README.md"))
	res, err = download.Download(context.Background(), opts(srv, cache))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Fetched, []string{"README.md", "checkpoint/layer-02.safetensors"}) {
		t.Errorf("fetched %v", res.Fetched)
	}
}

// TestResume cuts the connection twice in the middle of the largest file:
// the download resumes with Range requests, the hub sends every byte of the
// file exactly once, and the result verifies.
func TestResume(t *testing.T) {
	h, srv := newHub(t)
	size := fileSize(t, big)
	h.DropAfter(big, size/3, 2)
	res, err := download.Download(context.Background(), opts(srv, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Report.OK {
		t.Fatal("not verified")
	}
	if got := h.Served(big); got != size {
		t.Errorf("hub sent %d bytes of a %d-byte file: completed bytes were fetched again", got, size)
	}
	var ranges []string
	for _, r := range h.Requests() {
		if r.Path == big {
			ranges = append(ranges, r.Range)
		}
	}
	if len(ranges) != 3 || ranges[0] != "" || !strings.HasPrefix(ranges[1], "bytes=") || ranges[1] == ranges[2] {
		t.Errorf("requests for %s: ranges %q", big, ranges)
	}
}

// TestResumeFromDisk starts with a partial file left by an interrupted run.
func TestResumeFromDisk(t *testing.T) {
	h, srv := newHub(t)
	cache := t.TempDir()
	o := opts(srv, cache)
	dest, _ := download.Dest(cache, o.URL, "v1")
	data, _ := os.ReadFile(filepath.Join(release(t), filepath.FromSlash(big)))
	part := filepath.Join(dest, filepath.FromSlash(download.IncompleteDir), filepath.FromSlash(big)+".incomplete")
	os.MkdirAll(filepath.Dir(part), 0o755)
	os.WriteFile(part, data[:1000000], 0o644)
	if _, err := download.Download(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if got := h.Served(big); got != int64(len(data))-1000000 {
		t.Errorf("hub sent %d bytes, want the %d missing", got, len(data)-1000000)
	}
	if _, err := os.Stat(part); !errors.Is(err, os.ErrNotExist) {
		t.Error("partial file left behind")
	}
}

// TestStalePartial: a partial file whose bytes are wrong is discarded after
// the whole file fails its hash, and fetched once more from zero.
func TestStalePartial(t *testing.T) {
	_, srv := newHub(t)
	cache := t.TempDir()
	o := opts(srv, cache)
	dest, _ := download.Dest(cache, o.URL, "v1")
	part := filepath.Join(dest, filepath.FromSlash(download.IncompleteDir), "LICENSE.incomplete")
	os.MkdirAll(filepath.Dir(part), 0o755)
	os.WriteFile(part, []byte("Garbage"), 0o644)
	res, err := download.Download(context.Background(), o)
	if err != nil || !res.Report.OK {
		t.Fatalf("%v %+v", err, res.Report)
	}
}

func TestCorruptOnServer(t *testing.T) {
	for _, etag := range []bool{false, true} {
		name := "no etag"
		if etag {
			name = "lfs etag"
		}
		t.Run(name, func(t *testing.T) {
			h, srv := newHub(t)
			h.ETag = etag
			h.Corrupt(big, 12345)
			cache := t.TempDir()
			res, err := download.Download(context.Background(), opts(srv, cache))
			if err == nil {
				t.Fatal("a corrupted file was accepted")
			}
			var me *verify.MismatchError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a *verify.MismatchError", err)
			}
			found := false
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				if errors.As(e, &me) && me.Path == big && me.Kind == verify.KindHash {
					found = true
					if me.WantSHA256 == me.GotSHA256 || me.GotSHA256 == "" {
						t.Errorf("finding %+v", me)
					}
					if etag && !strings.Contains(me.Detail, "ETag") {
						t.Errorf("not refused on the ETag: %+v", me)
					}
				}
			}
			if !found {
				t.Errorf("no hash finding for %s in %v", big, err)
			}
			if _, err := os.Stat(filepath.Join(res.Dir, filepath.FromSlash(big))); !errors.Is(err, os.ErrNotExist) {
				t.Error("the corrupted file was kept")
			}
			if res.Report == nil || !slices.Contains(res.Report.Refetch, big) || res.Report.OK {
				t.Errorf("report %+v", res.Report)
			}
			if etag {
				// Not one byte of the refused file was read: the client
				// received exactly the list and every other file.
				data, _ := os.ReadFile(filepath.Join(release(t), sums.SumsFile))
				want := int64(len(data))
				entries, _ := sums.Parse(sums.SumsFile, data, sums.BundlePath)
				for _, e := range entries {
					if e.Path != big {
						want += fileSize(t, e.Path)
					}
				}
				if res.BytesReceived != want {
					t.Errorf("received %d bytes, want %d (the list and the other files only)", res.BytesReceived, want)
				}
			}
		})
	}
}

func TestRetriesAndFailures(t *testing.T) {
	t.Run("503 then ok", func(t *testing.T) {
		h, srv := newHub(t)
		h.Unavailable("LICENSE", 2)
		h.Unavailable(sums.SumsFile, 1)
		if _, err := download.Download(context.Background(), opts(srv, t.TempDir())); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		h, srv := newHub(t)
		h.Unavailable("LICENSE", 100)
		o := opts(srv, t.TempDir())
		o.Retries = 2
		res, err := download.Download(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), "giving up") {
			t.Fatalf("err = %v", err)
		}
		if !slices.Contains(res.Report.Refetch, "LICENSE") {
			t.Errorf("re-fetch %v", res.Report.Refetch)
		}
	})
	t.Run("no such revision", func(t *testing.T) {
		_, srv := newHub(t)
		o := opts(srv, t.TempDir())
		o.Revision = "v9"
		res, err := download.Download(context.Background(), o)
		var he *download.HTTPError
		if !errors.As(err, &he) || he.Status != http.StatusNotFound {
			t.Fatalf("err = %v", err)
		}
		// No directory for a revision the hub does not have: lfmq launch
		// would take it for a download that lost its files.
		if _, err := os.Stat(res.Dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s made for a revision the hub does not have (%v)", res.Dir, err)
		}
	})
	t.Run("bad list", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "r")
		bundletest.CopyDir(t, release(t), dir)
		os.WriteFile(filepath.Join(dir, sums.SumsFile), []byte(strings.Repeat("0", 64)+"  ../../etc/passwd\n"), 0o644)
		srv := httptest.NewServer(hubtest.New(dir, repo, "v1"))
		defer srv.Close()
		_, err := download.Download(context.Background(), opts(srv, t.TempDir()))
		if !errors.Is(err, verify.ErrUnsafePath) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestToken(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	h := hubtest.New(release(t), repo, "v1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	o := opts(srv, t.TempDir())
	o.Token = "hf_secret"
	if _, err := download.Download(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, a := range auth {
		if a != "Bearer hf_secret" {
			t.Fatalf("Authorization %q", a)
		}
	}
}

func TestDest(t *testing.T) {
	for url, want := range map[string]string{
		"https://huggingface.co/LiquidAI/LFM2-8B-A1B-lfmq1":  "LiquidAI--LFM2-8B-A1B-lfmq1",
		"https://huggingface.co/LiquidAI/LFM2-8B-A1B-lfmq1/": "LiquidAI--LFM2-8B-A1B-lfmq1",
		"http://127.0.0.1:8080/mirror/org/name":              "org--name",
		"http://127.0.0.1:8080/single":                       "single",
		"http://127.0.0.1:8080/mirror/org/tree":              "org--tree",
	} {
		got, err := download.Dest("/c", url, "v1")
		if err != nil || got != filepath.Join("/c", want, "v1") {
			t.Errorf("%s: %q %v", url, got, err)
		}
	}
	for _, bad := range [][2]string{
		{"ftp://x/a/b", "v1"}, {"https://x", "v1"}, {"https://x/a/b?q=1", "v1"},
		{"https://x/a/b", "../v1"}, {"https://x/a/b", ""}, {"https://x/a/b%20c", "v1"},
		{"https://user:pw@x/a/b", "v1"},
		{"https://huggingface.co/a/b/tree/main", "v1"}, {"https://huggingface.co/a/b/blob/v1/README.md", "v1"},
		{"https://huggingface.co/a/b/resolve/v1/SHA256SUMS", "v1"},
	} {
		if _, err := download.Dest("/c", bad[0], bad[1]); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestRuntimeModes: a hub keeps no file modes; the downloaded runtime
// binaries are executable and everything else is not, also when a rerun
// finds a binary already present without its execute bit.
func TestRuntimeModes(t *testing.T) {
	_, srv := newHub(t)
	cache := t.TempDir()
	res, err := download.Download(context.Background(), opts(srv, cache))
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		for _, p := range []string{"runtime/lfmq-linux-amd64", "runtime/lfmq-darwin-arm64", "runtime/lfmq-src.tar.gz", "SHA256SUMS", big} {
			st, err := os.Stat(filepath.Join(res.Dir, filepath.FromSlash(p)))
			if err != nil {
				t.Fatal(err)
			}
			exec := st.Mode().Perm()&0o111 != 0
			if want := strings.HasPrefix(p, "runtime/lfmq-") && !strings.HasSuffix(p, ".tar.gz"); exec != want {
				t.Errorf("%s: mode %v", p, st.Mode())
			}
		}
	}
	check()
	os.Chmod(filepath.Join(res.Dir, "runtime", "lfmq-linux-amd64"), 0o644)
	if res, err = download.Download(context.Background(), opts(srv, cache)); err != nil {
		t.Fatal(err)
	}
	check()
}

func TestRepo(t *testing.T) {
	for in, want := range map[string]string{"https://huggingface.co/lfmq/LFM2-8B-A1B-lfmq1": "lfmq/LFM2-8B-A1B-lfmq1", "http://h:8/a/b/c/": "b/c"} {
		if got, err := download.Repo(in); err != nil || got != want {
			t.Errorf("Repo(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := download.Repo("https://h/only"); err == nil {
		t.Error("one segment accepted")
	}
}

// TestDownloadSignature: SHA256SUMS.sig, which SHA256SUMS cannot list, is
// fetched when the hub has it, and a stale one is removed when the hub
// no longer does.
func TestDownloadSignature(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "release")
	bundletest.CopyDir(t, release(t), dir)
	sig := []byte("-----BEGIN SSH SIGNATURE-----\nnot checked without --allowed-signers\n-----END SSH SIGNATURE-----\n")
	if err := os.WriteFile(filepath.Join(dir, verify.SignatureFile), sig, 0o644); err != nil {
		t.Fatal(err)
	}
	h := hubtest.New(dir, repo, "v1")
	h.Commit = commit
	srv := httptest.NewServer(h)
	defer srv.Close()
	cache := t.TempDir()
	res, err := download.Download(context.Background(), opts(srv, cache))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(res.Dir, verify.SignatureFile))
	if err != nil || !bytes.Equal(got, sig) {
		t.Fatalf("signature %q, %v; want the hub's", got, err)
	}
	if err := os.Remove(filepath.Join(dir, verify.SignatureFile)); err != nil {
		t.Fatal(err)
	}
	if res, err = download.Download(context.Background(), opts(srv, cache)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, verify.SignatureFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a signature the hub no longer has was kept: %v", err)
	}
}

// signedCopy returns a copy of the test release signed (over its
// SHA256SUMS, namespace lfmq-release) by the ed25519 key of seed, and the
// allowed signers that grant that key to release@lfmq.test.
func signedCopy(t *testing.T, seed byte) (string, *sshsig.AllowedSigners) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "release")
	bundletest.CopyDir(t, release(t), dir)
	signer, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile(filepath.Join(dir, sums.SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sshsig.Sign(signer, list, verify.SignatureNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, verify.SignatureFile), sig, 0o644); err != nil {
		t.Fatal(err)
	}
	allowed, err := sshsig.ParseAllowedSigners("allowed_signers", []byte("release@lfmq.test "+string(ssh.MarshalAuthorizedKey(signer.PublicKey()))))
	if err != nil {
		t.Fatal(err)
	}
	return dir, allowed
}

// TestDownloadRequiresSignature: with allowed signers, the signature is
// fetched at the commit of SHA256SUMS and checked before anything else is
// fetched or written: a release that is unsigned, or whose signature does
// not verify, is refused having fetched only SHA256SUMS and its signature,
// and leaves the destination as it was. A hub failure on the signature
// other than a 404 is an error naming its URL, and an oversized signature
// is refused.
func TestDownloadRequiresSignature(t *testing.T) {
	signed, allowed := signedCopy(t, 1)
	sigURL := "/" + repo + "/resolve/" + commit + "/" + verify.SignatureFile
	for _, c := range []struct {
		name     string
		prepare  func(t *testing.T, dir string, h *hubtest.Hub)
		identity string
		// check checks the error; nil for a clean download.
		check func(t *testing.T, err error)
	}{
		{"signed", nil, "release@lfmq.test", nil},
		{"signed, any principal", nil, "", nil},
		{"unsigned", func(t *testing.T, dir string, _ *hubtest.Hub) {
			os.Remove(filepath.Join(dir, verify.SignatureFile))
		}, "release@lfmq.test", func(t *testing.T, err error) {
			if !errors.Is(err, verify.ErrUnsigned) {
				t.Errorf("error %v, want ErrUnsigned", err)
			}
		}},
		{"tampered signature", func(t *testing.T, dir string, _ *hubtest.Hub) {
			bundletest.TamperSignature(t, dir)
		}, "release@lfmq.test", func(t *testing.T, err error) {
			var me *verify.MismatchError
			if !errors.As(err, &me) || me.Kind != verify.KindSignature || errors.Is(err, verify.ErrUnsigned) || me.Authority != "allowed_signers" {
				t.Errorf("error %v, want a signature finding", err)
			}
		}},
		{"another identity", nil, "other@lfmq.test", func(t *testing.T, err error) {
			if !errors.Is(err, verify.ErrSignature) || !strings.Contains(err.Error(), "not allowed") {
				t.Errorf("error %v, want a signature finding", err)
			}
		}},
		{"hub refuses the signature", func(t *testing.T, _ string, h *hubtest.Hub) {
			h.Fail(verify.SignatureFile, http.StatusForbidden, 1)
		}, "", func(t *testing.T, err error) {
			var he *download.HTTPError
			if !errors.As(err, &he) || he.Status != http.StatusForbidden || !strings.HasSuffix(he.URL, sigURL) || !strings.Contains(err.Error(), sigURL) {
				t.Errorf("error %v, want HTTP 403 naming %s", err, sigURL)
			}
			if errors.Is(err, verify.ErrSignature) {
				t.Errorf("a hub error reads as a bad signature: %v", err)
			}
		}},
		{"hub keeps failing on the signature", func(t *testing.T, _ string, h *hubtest.Hub) {
			h.Fail(verify.SignatureFile, http.StatusBadGateway, 100)
		}, "", func(t *testing.T, err error) {
			var he *download.HTTPError
			if !errors.As(err, &he) || he.Status != http.StatusBadGateway || !strings.Contains(err.Error(), sigURL) {
				t.Errorf("error %v, want HTTP 502 naming %s", err, sigURL)
			}
		}},
		{"oversized signature", func(t *testing.T, dir string, _ *hubtest.Hub) {
			os.WriteFile(filepath.Join(dir, verify.SignatureFile), bytes.Repeat([]byte("A"), sshsig.MaxSignatureBytes+1), 0o644)
		}, "", func(t *testing.T, err error) {
			var me *verify.MismatchError
			if !errors.As(err, &me) || me.Path != verify.SignatureFile || !strings.Contains(me.Detail, sigURL) || !strings.Contains(me.Detail, "65536 bytes") {
				t.Errorf("error %v, want the oversized signature refused, naming its URL", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "release")
			bundletest.CopyDir(t, signed, dir)
			h := hubtest.New(dir, repo, "v1")
			h.Commit = commit
			if c.prepare != nil {
				c.prepare(t, dir, h)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			o := opts(srv, t.TempDir())
			o.Verify.AllowedSigners, o.Verify.Identity = allowed, c.identity
			res, err := download.Download(context.Background(), o)
			sigAt := ""
			for _, r := range h.Requests() {
				if r.Path == verify.SignatureFile {
					sigAt = r.Revision
				}
			}
			if sigAt != commit {
				t.Errorf("signature fetched at %q, want the commit of SHA256SUMS", sigAt)
			}
			if c.check == nil {
				if err != nil {
					t.Fatal(err)
				}
				if s := res.Report.Signature; s == nil || s.Identity != c.identity || !slices.Equal(s.Principals, []string{"release@lfmq.test"}) {
					t.Errorf("signature %+v", s)
				}
				want, _ := os.ReadFile(filepath.Join(dir, verify.SignatureFile))
				if got, err := os.ReadFile(filepath.Join(res.Dir, verify.SignatureFile)); err != nil || !bytes.Equal(got, want) {
					t.Errorf("downloaded signature %q, %v", got, err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			c.check(t, err)
			for _, r := range h.Requests() {
				if r.Path != sums.SumsFile && r.Path != verify.SignatureFile {
					t.Errorf("%s fetched although the signature was refused", r.Path)
				}
			}
			// Nothing of the refused release is written, not even its
			// directory.
			if _, err := os.Stat(res.Dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s made although the signature was refused (%v)", res.Dir, err)
			}
		})
	}
}

// TestDownloadSignatureRerun: downloading a signed release again leaves
// its signature in place (the same bytes, not rewritten) and fetches
// nothing else; a signature file damaged in the cache is replaced by the
// hub's.
func TestDownloadSignatureRerun(t *testing.T) {
	signed, allowed := signedCopy(t, 1)
	h := hubtest.New(signed, repo, "v1")
	h.Commit = commit
	srv := httptest.NewServer(h)
	defer srv.Close()
	o := opts(srv, t.TempDir())
	o.Verify.AllowedSigners = allowed
	res, err := download.Download(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(res.Dir, verify.SignatureFile)
	before, err := os.Stat(local)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = download.Download(context.Background(), o); err != nil || len(res.Fetched) != 0 {
		t.Fatalf("rerun: fetched %v, %v", res.Fetched, err)
	}
	if after, err := os.Stat(local); err != nil || !os.SameFile(before, after) {
		t.Errorf("an identical signature was rewritten: %v", err)
	}
	os.WriteFile(local, []byte("junk"), 0o644)
	if res, err = download.Download(context.Background(), o); err != nil || res.Report.Signature == nil {
		t.Fatalf("damaged local signature: %v", err)
	}
	want, _ := os.ReadFile(filepath.Join(signed, verify.SignatureFile))
	if got, _ := os.ReadFile(local); !bytes.Equal(got, want) {
		t.Errorf("the damaged signature was kept: %q", got)
	}
}

// cancelOnBody cancels a context once the body of a response for path
// has started to arrive: an interruption in the middle of a transfer.
type cancelOnBody struct {
	rt     http.RoundTripper
	path   string
	cancel context.CancelFunc
}

func (c *cancelOnBody) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.rt.RoundTrip(r)
	if err == nil && strings.HasSuffix(r.URL.Path, "/"+c.path) {
		c.cancel()
	}
	return res, err
}

// TestInterrupted: an interruption in the middle of a file ends the
// download with the context's error, before the final verification, and
// logs no "retry" for a fetch that is not retried.
func TestInterrupted(t *testing.T) {
	_, srv := newHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := opts(srv, t.TempDir())
	client := *srv.Client()
	client.Transport = &cancelOnBody{rt: srv.Client().Transport, path: big, cancel: cancel}
	o.Client = &client
	o.Jobs = 1
	var log bytes.Buffer
	o.Log = &log
	res, err := download.Download(ctx, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the cancellation", err)
	}
	if strings.Contains(log.String(), "retry") {
		t.Errorf("an interrupted fetch is logged as retried:\n%s", log.String())
	}
	// (Whether the body was cut short depends on how much of it was in
	// flight: a file that arrived whole is kept, one cut short is left
	// as its .incomplete file; either way it is fetched or resumed, never
	// retried, in this run.)
	if res == nil || res.Report != nil {
		t.Errorf("an interrupted download was verified: %+v", res)
	}
}

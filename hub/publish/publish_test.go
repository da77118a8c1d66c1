package publish_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/hub/download"
	"github.com/lfmq/lfmq/hub/hubapi"
	"github.com/lfmq/lfmq/hub/hubtest"
	"github.com/lfmq/lfmq/hub/publish"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

const (
	repo  = "lfmq/tiny-lfm2-moe-lfmq1"
	token = "hf_TestTokenThatMustNeverLeak0123"
	// Objects above mpThreshold go multipart in chunks of chunk bytes:
	// the experts files (451400 bytes) in 4 parts, global (3.2 MB) in 25.
	mpThreshold = 400000
	chunk       = 128 << 10
	global      = "checkpoint/global.safetensors"
	layer       = "checkpoint/layer-00.safetensors"
)

var (
	once     sync.Once
	tmpRoot  string
	relA     string // evidence: quality.json, noise.json, plot.svg
	relB     string // quality.json changed, noise.json gone
	onceErr  error
	evidence = map[string]map[string]string{
		"A": {"quality.json": `{"kl": 0.0125}` + "\n", "noise.json": `{"floor": 0.001}` + "\n", "plot.svg": "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n"},
		"B": {"quality.json": `{"kl": 0.0119}` + "\n", "plot.svg": "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n"},
	}
)

// releases builds the two test releases once: the same checkpoint,
// source and binaries, different evidence.
func releases(t *testing.T) (string, string) {
	t.Helper()
	once.Do(func() {
		dir, err := os.MkdirTemp("", "lfmq-publish-test-")
		if err != nil {
			onceErr = err
			return
		}
		tmpRoot = dir
		ckpt, src := bundletest.Checkpoint(t), bundletest.Source(t)
		for _, name := range []string{"A", "B"} {
			ev := filepath.Join(dir, "evidence-"+name)
			if err := os.MkdirAll(ev, 0o755); err != nil {
				onceErr = err
				return
			}
			for f, data := range evidence[name] {
				if err := os.WriteFile(filepath.Join(ev, f), []byte(data), 0o644); err != nil {
					onceErr = err
					return
				}
			}
			out := filepath.Join(dir, "release-"+name)
			opts := bundletest.Options(t, ckpt, src, out)
			opts.EvidenceDir = ev
			if _, err := bundle.Build(context.Background(), opts); err != nil {
				onceErr = err
				return
			}
		}
		relA, relB = filepath.Join(dir, "release-A"), filepath.Join(dir, "release-B")
	})
	if onceErr != nil {
		t.Fatal(onceErr)
	}
	return relA, relB
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

// env is a test hub with its object storage on a second host.
type env struct {
	srv *hubtest.Server
	hub string // the hub's base URL
}

func newEnv(t *testing.T, configure func(*hubtest.Server)) *env {
	t.Helper()
	srv := hubtest.NewServer()
	srv.Token = token
	srv.MultipartThreshold, srv.ChunkSize, srv.PageSize = mpThreshold, chunk, 7
	if configure != nil {
		configure(srv)
	}
	return &env{srv: srv, hub: hubtest.Start(t, srv)}
}

func (e *env) opts(dir, revision string) publish.Options {
	return publish.Options{
		Endpoint: e.hub, Repo: repo, Revision: revision, Dir: dir, Create: true, Token: token,
		Client: &http.Client{Timeout: time.Minute}, Jobs: 3, Retries: 2,
		Backoff: func(int) time.Duration { return time.Millisecond },
	}
}

// publishOK publishes and fails the test on error.
func (e *env) publishOK(t *testing.T, o publish.Options) *publish.Result {
	t.Helper()
	res, err := publish.Publish(context.Background(), o)
	if err != nil {
		t.Fatalf("publish %s: %v", o.Revision, err)
	}
	return res
}

// listed returns the release's files: path → sha256 (SHA256SUMS and its
// signature included, as published).
func listed(t *testing.T, dir string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, sums.SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := sums.Parse(sums.SumsFile, data, sums.BundlePath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		out[e.Path] = e.SHA256
	}
	out[sums.SumsFile] = fmt.Sprintf("%x", sha256Sum(data))
	return out
}

func size(t *testing.T, dir, p string) int64 {
	t.Helper()
	info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// lfsObjects returns the release's LFS-routed files (by its
// .gitattributes): path → sha256.
func lfsObjects(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	for p, sum := range listed(t, dir) {
		if strings.HasPrefix(p, "checkpoint/") && strings.HasSuffix(p, ".safetensors") || strings.HasPrefix(p, "runtime/") {
			out[p] = sum
		}
	}
	return out
}

// checkNoToken fails when an error's text holds the token.
func checkNoToken(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), token) {
		t.Errorf("the token appears in an error: %v", err)
	}
}

// downloadAndVerify fetches revision with package download and checks
// every file against the release directory.
func (e *env) downloadAndVerify(t *testing.T, dir, revision string) {
	t.Helper()
	res, err := download.Download(context.Background(), download.Options{
		URL: e.hub + "/" + repo, Revision: revision, CacheRoot: t.TempDir(), Token: token,
		Client: &http.Client{Timeout: time.Minute}, Backoff: func(int) time.Duration { return time.Millisecond },
	})
	if err != nil {
		t.Fatalf("download %s: %v", revision, err)
	}
	if !res.Report.OK {
		t.Fatalf("download %s: verification not clean: %+v", revision, res.Report)
	}
	for p := range listed(t, dir) {
		want, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		got, err := os.ReadFile(filepath.Join(res.Dir, filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: downloaded bytes differ from the release (%v)", p, err)
		}
	}
	rep, err := verify.Release(context.Background(), res.Dir, verify.Options{})
	if err != nil || !rep.OK {
		t.Errorf("verify.Release of the download: %v %+v", err, rep)
	}
}

func TestPublishNewRepoDownloadRepublish(t *testing.T) {
	a, _ := releases(t)
	e := newEnv(t, nil)
	var mu sync.Mutex
	done := map[string]publish.Outcome{}
	var sent int64
	o := e.opts(a, "v1")
	o.Progress = publish.Progress{
		Bytes: func(_ string, n int64) { mu.Lock(); sent += n; mu.Unlock() },
		Done:  func(p string, oc publish.Outcome) { mu.Lock(); done[p] = oc; mu.Unlock() },
	}
	res := e.publishOK(t, o)

	files := listed(t, a)
	if !res.Created || !res.TagCreated || res.UpToDate || res.Tag != "v1" {
		t.Errorf("result %+v", res)
	}
	if head := e.srv.Head(repo, "main"); res.Commit != head || e.srv.Tag(repo, "v1") != head {
		t.Errorf("commit %s, head %s, tag %s", res.Commit, head, e.srv.Tag(repo, "v1"))
	}
	commits := e.srv.Commits(repo, "main")
	if len(commits) != 2 || commits[0].Parent != commits[1].ID || res.Parent != commits[1].ID {
		t.Fatalf("history %+v (parent %s)", commits, res.Parent)
	}
	// The initial commit's .gitattributes is replaced by the release's:
	// every release file is in the commit.
	if want := slices.Sorted(maps.Keys(files)); !slices.Equal(commits[0].Changed, want) || len(commits[0].Deleted) != 0 {
		t.Errorf("commit changed %v deleted %v, want %v", commits[0].Changed, commits[0].Deleted, want)
	}
	if !slices.Equal(res.Changed, commits[0].Changed) || len(res.Skipped) != 0 || len(res.Uploaded) != len(files) {
		t.Errorf("result changed %v uploaded %v skipped %v", res.Changed, res.Uploaded, res.Skipped)
	}
	if len(done) != len(files) || sent != res.UploadedBytes {
		t.Errorf("progress: %d files done (want %d), %d bytes sent (uploaded %d)", len(done), len(files), sent, res.UploadedBytes)
	}
	// LFS files were stored as LFS objects, received once each, and the
	// hub kept the release's .gitattributes as it is.
	tree, err := e.srv.Files(repo, "v1")
	if err != nil {
		t.Fatal(err)
	}
	for p, sum := range lfsObjects(t, a) {
		if tree[p].LFS != sum {
			t.Errorf("%s: stored as %+v, want LFS %s", p, tree[p].LFS, sum)
		}
		if got := e.srv.Received(sum); got != size(t, a, p) {
			t.Errorf("%s: %d bytes received, want %d", p, got, size(t, a, p))
		}
	}
	attrs, _ := os.ReadFile(filepath.Join(a, ".gitattributes"))
	if !bytes.Equal(tree[".gitattributes"].Content, attrs) {
		t.Errorf(".gitattributes on the hub:\n%s", tree[".gitattributes"].Content)
	}
	// Multipart was used for global.safetensors: 25 parts, each once.
	if n := e.srv.Attempts(files[global], 25); n != 1 {
		t.Errorf("part 25 of %s attempted %d times", global, n)
	}
	// Every write carried the token; the storage host never saw it.
	for _, r := range e.srv.Requests() {
		write := r.Method == http.MethodPost && r.Path != "/api/complete_multipart"
		if write && !r.Token {
			t.Errorf("%s %s without the token", r.Method, r.Path)
		}
		if strings.HasPrefix(r.Path, "/lfs-storage/") && (r.Token || !strings.HasSuffix(e.srv.StorageURL, r.Host)) {
			t.Errorf("storage request %+v: on the hub host or with the token", r)
		}
	}

	e.downloadAndVerify(t, a, "v1")

	// Again: nothing to do (the tag holds the release).
	before := len(e.srv.Requests())
	res2 := e.publishOK(t, e.opts(a, "v1"))
	if !res2.UpToDate || res2.Commit != res.Commit || res2.TagCreated || res2.Created || len(res2.Uploaded) != 0 || len(res2.Skipped) != len(files) {
		t.Errorf("second publish %+v", res2)
	}
	if got := len(e.srv.Commits(repo, "main")); got != 2 {
		t.Errorf("%d commits after an up-to-date publish", got)
	}
	for _, r := range e.srv.Requests()[before:] {
		if r.Method != http.MethodGet {
			t.Errorf("up-to-date publish sent %s %s", r.Method, r.Path)
		}
	}
	// And without a revision: compared with the branch, no commit.
	res3 := e.publishOK(t, e.opts(a, ""))
	if !res3.UpToDate || res3.Commit != res.Commit || len(e.srv.Commits(repo, "main")) != 2 {
		t.Errorf("third publish %+v", res3)
	}
}

func TestPublishChangedRelease(t *testing.T) {
	a, b := releases(t)
	e := newEnv(t, nil)
	first := e.publishOK(t, e.opts(a, "v1"))
	// Someone adds a file by hand; the release does not have it.
	if _, err := e.srv.CommitFiles(repo, "main", "notes", map[string][]byte{"notes/extra.txt": []byte("hello\n")}, nil); err != nil {
		t.Fatal(err)
	}
	recvA := map[string]int64{}
	for _, sum := range lfsObjects(t, a) {
		recvA[sum] = e.srv.Received(sum)
	}

	res := e.publishOK(t, e.opts(b, "v2"))

	fa, fb := listed(t, a), listed(t, b)
	var changed, deleted []string
	for p, sum := range fb {
		if fa[p] != sum {
			changed = append(changed, p)
		}
	}
	for p := range fa {
		if _, ok := fb[p]; !ok {
			deleted = append(deleted, p)
		}
	}
	deleted = append(deleted, "notes/extra.txt")
	slices.Sort(changed)
	slices.Sort(deleted)
	if len(changed) < 4 || !slices.Contains(changed, "evidence/quality.json") || !slices.Contains(deleted, "evidence/noise.json") {
		t.Fatalf("the fixture releases differ unexpectedly: changed %v deleted %v", changed, deleted)
	}
	commits := e.srv.Commits(repo, "main")
	if len(commits) != 4 || commits[0].ID != res.Commit || res.Parent != commits[1].ID {
		t.Fatalf("history %+v, result %+v", commits, res)
	}
	if !slices.Equal(commits[0].Changed, changed) || !slices.Equal(commits[0].Deleted, deleted) {
		t.Errorf("commit changed %v deleted %v; want %v and %v", commits[0].Changed, commits[0].Deleted, changed, deleted)
	}
	if !slices.Equal(res.Changed, changed) || !slices.Equal(res.Deleted, deleted) || !slices.Equal(res.Uploaded, changed) {
		t.Errorf("result changed %v deleted %v uploaded %v", res.Changed, res.Deleted, res.Uploaded)
	}
	if res.UpToDate || !res.TagCreated || e.srv.Tag(repo, "v1") != first.Commit || e.srv.Tag(repo, "v2") != res.Commit {
		t.Errorf("tags v1 %s v2 %s; result %+v", e.srv.Tag(repo, "v1"), e.srv.Tag(repo, "v2"), res)
	}
	// No LFS object was sent again.
	for p, sum := range lfsObjects(t, b) {
		if got := e.srv.Received(sum); got != recvA[sum] {
			t.Errorf("%s: %d bytes received in all, %d after the first publish", p, got, recvA[sum])
		}
	}
	e.downloadAndVerify(t, b, "v2")
	e.downloadAndVerify(t, a, "v1")
}

func TestPublishInterruptedThenResumed(t *testing.T) {
	a, _ := releases(t)
	e := newEnv(t, nil)
	objs := lfsObjects(t, a)
	basic, multi := objs[layer], objs[global]
	// Every attempt of layer-00 (basic) is cut after 50000 bytes, every
	// attempt of part 3 of global (multipart) after 1000.
	e.srv.DropUpload(basic, 0, 50000, 100)
	e.srv.DropUpload(multi, 3, 1000, 100)

	_, err := publish.Publish(context.Background(), e.opts(a, "v1"))
	checkNoToken(t, err)
	var ue *publish.UploadError
	if !errors.As(err, &ue) {
		t.Fatalf("error %v, want an *UploadError", err)
	}
	for _, p := range []string{layer, global} {
		if !strings.Contains(err.Error(), "uploading "+p) {
			t.Errorf("the error does not name %s: %v", p, err)
		}
	}
	if strings.Contains(err.Error(), "sig=") {
		t.Errorf("the error shows a signed URL's query: %v", err)
	}
	if got := len(e.srv.Commits(repo, "main")); got != 1 || e.srv.Tag(repo, "v1") != "" {
		t.Fatalf("%d commits, tag %q after a failed publish", got, e.srv.Tag(repo, "v1"))
	}
	if got := e.srv.Attempts(basic, 0); got != 3 {
		t.Errorf("layer-00 attempted %d times, want 1 + 2 retries", got)
	}
	e.srv.Settle(200 * time.Millisecond)
	first := map[string]int64{}
	for p, sum := range objs {
		first[sum] = e.srv.Received(sum)
		if sum != basic && sum != multi && first[sum] != size(t, a, p) {
			t.Errorf("%s: %d bytes received, want %d", p, first[sum], size(t, a, p))
		}
	}

	e.srv.ClearFaults()
	res := e.publishOK(t, e.opts(a, "v1"))
	for p, sum := range objs {
		again := e.srv.Received(sum) - first[sum]
		want := int64(0)
		if sum == basic || sum == multi {
			want = size(t, a, p) // an interrupted object is sent whole again
		}
		if again != want {
			t.Errorf("%s: %d bytes sent by the second run, want %d", p, again, want)
		}
	}
	// Uploaded: the two interrupted objects and the inline files (no
	// commit was made, so they go in this one).
	wantUp := []string{global, layer}
	for p := range listed(t, a) {
		if _, ok := objs[p]; !ok {
			wantUp = append(wantUp, p)
		}
	}
	slices.Sort(wantUp)
	if !slices.Equal(res.Uploaded, wantUp) {
		t.Errorf("second run uploaded %v, want %v", res.Uploaded, wantUp)
	}
	for p := range objs {
		if p != global && p != layer && !slices.Contains(res.Skipped, p) {
			t.Errorf("%s not counted as skipped (stored already): %v", p, res.Skipped)
		}
	}
	e.downloadAndVerify(t, a, "v1")
}

func TestPublishRetriesPartOn5xx(t *testing.T) {
	a, _ := releases(t)
	e := newEnv(t, nil)
	multi := lfsObjects(t, a)[global]
	e.srv.FailUpload(multi, 2, http.StatusServiceUnavailable, 1)
	e.srv.FailUpload(lfsObjects(t, a)[layer], 0, http.StatusInternalServerError, 2)
	e.publishOK(t, e.opts(a, "v1"))
	if got := e.srv.Attempts(multi, 2); got != 2 {
		t.Errorf("part 2 attempted %d times, want 2", got)
	}
	if got, want := e.srv.Received(multi), size(t, a, global)+chunk; got != want {
		t.Errorf("%d bytes received for global, want %d (one part twice)", got, want)
	}
	if got := e.srv.Attempts(lfsObjects(t, a)[layer], 0); got != 3 {
		t.Errorf("layer-00 attempted %d times, want 3", got)
	}
	e.downloadAndVerify(t, a, "v1")
}

// TestPublishNoRetries: a negative Retries (the command's --retries 0)
// makes one attempt: a 5xx fails the upload.
func TestPublishNoRetries(t *testing.T) {
	a, _ := releases(t)
	e := newEnv(t, nil)
	e.srv.FailUpload(lfsObjects(t, a)[layer], 0, http.StatusInternalServerError, 1)
	opts := e.opts(a, "v1")
	opts.Retries = -1
	if _, err := publish.Publish(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("err = %v, want the 500", err)
	}
	if got := e.srv.Attempts(lfsObjects(t, a)[layer], 0); got != 1 {
		t.Errorf("layer-00 attempted %d times, want 1", got)
	}
}

func TestPublishStaleParent(t *testing.T) {
	a, b := releases(t)
	e := newEnv(t, nil)
	first := e.publishOK(t, e.opts(a, "v1"))
	e.srv.MoveBranchOnNextCommit(repo, "main")

	_, err := publish.Publish(context.Background(), e.opts(b, "v2"))
	checkNoToken(t, err)
	var se *publish.StaleError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want a *StaleError", err)
	}
	commits := e.srv.Commits(repo, "main")
	// Only the concurrent commit landed on top of ours.
	if len(commits) != 3 || commits[0].Summary != "a concurrent commit" || commits[1].ID != first.Commit {
		t.Fatalf("history %+v", commits)
	}
	if se.Parent != first.Commit || se.Head != commits[0].ID || se.Branch != "main" {
		t.Errorf("stale error %+v", se)
	}
	for _, s := range []string{"moved from " + first.Commit + " to " + commits[0].ID, "nothing was changed", "run publish again"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
	if e.srv.Tag(repo, "v2") != "" {
		t.Error("tag v2 created after a stale commit")
	}

	// Run again: the branch's extra file goes, the release lands.
	res := e.publishOK(t, e.opts(b, "v2"))
	if !slices.Contains(res.Deleted, "MOVED.md") || e.srv.Tag(repo, "v2") != res.Commit {
		t.Errorf("rerun %+v", res)
	}
	e.downloadAndVerify(t, b, "v2")
}

func TestPublishTagNamesOtherCommit(t *testing.T) {
	a, b := releases(t)
	e := newEnv(t, nil)
	first := e.publishOK(t, e.opts(a, "v1"))
	reqs := len(e.srv.Requests())
	_, err := publish.Publish(context.Background(), e.opts(b, "v1"))
	var te *publish.TagError
	if !errors.As(err, &te) || te.Tag != "v1" || te.Target != first.Commit {
		t.Fatalf("error %v, want a *TagError naming %s", err, first.Commit)
	}
	// Refused before anything was written.
	for _, r := range e.srv.Requests()[reqs:] {
		if r.Method != http.MethodGet {
			t.Errorf("%s %s sent before the tag was checked", r.Method, r.Path)
		}
	}
	if e.srv.Tag(repo, "v1") != first.Commit || len(e.srv.Commits(repo, "main")) != 2 {
		t.Error("the tag moved or a commit was made")
	}
}

func TestPublishMissingRepo(t *testing.T) {
	a, _ := releases(t)
	e := newEnv(t, nil)
	o := e.opts(a, "v1")
	o.Create = false
	_, err := publish.Publish(context.Background(), o)
	var rn *hubapi.RepoNotFoundError
	if !errors.As(err, &rn) || !strings.Contains(err.Error(), "--create") {
		t.Fatalf("error %v, want a *RepoNotFoundError mentioning --create", err)
	}
	checkNoToken(t, err)
	if _, err := e.srv.Files(repo, "main"); err == nil {
		t.Error("the repository was created")
	}
}

func TestPublishBadToken(t *testing.T) {
	a, _ := releases(t)
	e := newEnv(t, nil)
	e.srv.CreateRepo(repo, false)
	o := e.opts(a, "v1")
	o.Token = "hf_WrongTokenAlsoSecret"
	_, err := publish.Publish(context.Background(), o)
	var he *hubapi.HubError
	if !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
		t.Fatalf("error %v, want a 401 *HubError", err)
	}
	if strings.Contains(err.Error(), o.Token) || !strings.Contains(err.Error(), "Invalid credentials") {
		t.Errorf("message %q: shows the token or lacks the hub's message", err)
	}
}

func TestPublishEmptyRepo(t *testing.T) {
	a, _ := releases(t)
	e := newEnv(t, func(s *hubtest.Server) { s.EmptyRepos = true })
	res := e.publishOK(t, e.opts(a, "v1"))
	commits := e.srv.Commits(repo, "main")
	if len(commits) != 1 || commits[0].Parent != "" || res.Parent != "" || !res.Created {
		t.Fatalf("history %+v, result %+v", commits, res)
	}
	e.downloadAndVerify(t, a, "v1")
}

func TestPublishRefusesMisroutedAndIgnored(t *testing.T) {
	a, _ := releases(t)
	t.Run("routing", func(t *testing.T) {
		// The hub wants files of 5000 bytes and more in LFS: README.md
		// (5.4 kB) is not routed there by the release.
		e := newEnv(t, func(s *hubtest.Server) { s.LFSThreshold = 5000 })
		_, err := publish.Publish(context.Background(), e.opts(a, "v1"))
		var re *publish.RoutingError
		if !errors.As(err, &re) || !slices.Contains(re.Paths, "README.md") {
			t.Fatalf("error %v, want a *RoutingError naming README.md", err)
		}
		for _, r := range e.srv.Requests() {
			if strings.Contains(r.Path, "lfs") || strings.HasSuffix(r.Path, "/commit/main") {
				t.Errorf("%s %s after a routing error", r.Method, r.Path)
			}
		}
	})
	t.Run("ignored", func(t *testing.T) {
		e := newEnv(t, nil)
		e.srv.CreateRepo(repo, false)
		e.srv.CommitFiles(repo, "main", "ignore", map[string][]byte{".gitignore": []byte("evidence/\n")}, nil)
		_, err := publish.Publish(context.Background(), e.opts(a, "v1"))
		var ie *publish.IgnoredError
		if !errors.As(err, &ie) || !slices.Contains(ie.Paths, "evidence/quality.json") {
			t.Fatalf("error %v, want an *IgnoredError naming the evidence", err)
		}
	})
}

func TestPublishSignatureAndChangedSize(t *testing.T) {
	a, _ := releases(t)
	dir := filepath.Join(t.TempDir(), "release")
	bundletest.CopyDir(t, a, dir)
	sig := []byte("-----BEGIN SSH SIGNATURE-----\nstand-in\n-----END SSH SIGNATURE-----\n")
	if err := os.WriteFile(filepath.Join(dir, verify.SignatureFile), sig, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil)
	res := e.publishOK(t, e.opts(dir, "v1"))
	tree, _ := e.srv.Files(repo, "v1")
	if !bytes.Equal(tree[verify.SignatureFile].Content, sig) || !slices.Contains(res.Uploaded, verify.SignatureFile) {
		t.Errorf("signature not published: %+v", tree[verify.SignatureFile])
	}
	// A file that changed size since verification is refused.
	if err := os.WriteFile(filepath.Join(dir, "checkpoint", "config.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := publish.Publish(context.Background(), e.opts(dir, "v9"))
	var re *publish.ReleaseError
	if !errors.As(err, &re) || re.Path != "checkpoint/config.json" {
		t.Errorf("error %v, want a *ReleaseError for checkpoint/config.json", err)
	}
}

func sha256Sum(data []byte) [32]byte { return sha256.Sum256(data) }

package hfcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/hub/hubapi"
	"github.com/lfmq/lfmq/hub/hubtest"
	"github.com/lfmq/lfmq/verify"
)

const repo = "LiquidAI/LFM2-test"

// checkpointFiles is a small repository as the hub holds a sharded
// checkpoint, with files lfmq does not fetch (a GGUF, an ONNX folder).
func checkpointFiles() map[string][]byte {
	shard := func(seed byte, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*31) ^ seed
		}
		return b
	}
	return map[string][]byte{
		"config.json":                      []byte(`{"model_type": "lfm2_moe"}`),
		"tokenizer.json":                   []byte(`{"model": {}}`),
		"tokenizer_config.json":            []byte(`{}`),
		"chat_template.jinja":              []byte(`{{ messages }}`),
		"README.md":                        []byte("# test\n"),
		"model.safetensors.index.json":     []byte(`{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`),
		"model-00001-of-00002.safetensors": shard(1, 300<<10),
		"model-00002-of-00002.safetensors": shard(2, 200<<10),
		"model-Q4.gguf":                    shard(3, 1000),
		"onnx/model.onnx":                  shard(4, 1000),
	}
}

// hub is the test hub with a tap on its file downloads.
type hub struct {
	srv    *hubtest.Server
	url    string
	commit string
	mu     sync.Mutex
	// ranges records the Range header of each download, by path.
	ranges map[string][]string
	// served counts body bytes by path.
	served map[string]int64
	// cut, when set for a path, is called once that many bytes of it
	// have been sent, and the answer then stalls until the client leaves.
	cutAt   map[string]int64
	onCut   func()
	corrupt map[string]bool
}

func newHub(t *testing.T) *hub {
	t.Helper()
	s := hubtest.NewServer()
	s.PageSize = 3
	if err := s.CreateRepo(repo, false); err != nil {
		t.Fatal(err)
	}
	commit, err := s.CommitLFSFiles(repo, "main", "add the checkpoint", checkpointFiles())
	if err != nil {
		t.Fatal(err)
	}
	h := &hub{srv: s, commit: commit, ranges: map[string][]string{}, served: map[string]int64{}, cutAt: map[string]int64{}, corrupt: map[string]bool{}}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	h.url = ts.URL
	return h
}

func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, rest, ok := strings.Cut(r.URL.Path, "/resolve/")
	if !ok {
		h.srv.ServeHTTP(w, r)
		return
	}
	_, p, _ := strings.Cut(rest, "/")
	h.mu.Lock()
	h.ranges[p] = append(h.ranges[p], r.Header.Get("Range"))
	cut, cutting := h.cutAt[p]
	delete(h.cutAt, p)
	corrupt := h.corrupt[p]
	h.mu.Unlock()
	tw := &tapWriter{ResponseWriter: w, h: h, path: p, cut: -1, corrupt: corrupt}
	if cutting {
		tw.cut = cut
		tw.ctx = r.Context()
	}
	h.srv.ServeHTTP(tw, r)
}

// tapWriter counts and may corrupt or cut one download's body.
type tapWriter struct {
	http.ResponseWriter
	h       *hub
	path    string
	n, cut  int64
	ctx     context.Context
	corrupt bool
}

func (w *tapWriter) Write(p []byte) (int, error) {
	if w.corrupt && w.n == 0 && len(p) > 0 {
		p = bytes.Clone(p)
		p[0] ^= 1
	}
	// Bytes are counted before they are written: once the client has
	// them, the count the test reads already holds them.
	if w.cut >= 0 && w.n+int64(len(p)) >= w.cut {
		k := w.cut - w.n
		w.count(k)
		w.ResponseWriter.Write(p[:k])
		w.ResponseWriter.(http.Flusher).Flush()
		w.h.onCut()
		<-w.ctx.Done() // the client gave up: as if the process had been stopped
		panic(http.ErrAbortHandler)
	}
	w.count(int64(len(p)))
	return w.ResponseWriter.Write(p)
}

func (w *tapWriter) count(n int64) {
	w.n += n
	w.h.mu.Lock()
	w.h.served[w.path] += n
	w.h.mu.Unlock()
}

// servedCopy returns a copy of the bytes served per path, taken under
// the hub's lock (handlers may still be running).
func (h *hub) servedCopy() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.served)
}

// rangesOf returns the Range headers the hub saw for path.
func (h *hub) rangesOf(path string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ranges[path])
}

func (w *tapWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func opts(h *hub, root string) Options {
	return Options{Root: root, Endpoint: h.url, Backoff: func(int) time.Duration { return time.Millisecond }}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkLayout checks the cache as huggingface_hub lays it out: every
// checkpoint file of the commit a relative link ../../blobs/ID in
// snapshots/COMMIT, ID the sha256 of an LFS file and the git blob id of
// any other, the bytes those of the hub, refs/main the commit; and nothing
// else fetched.
func checkLayout(t *testing.T, root, commit string) {
	t.Helper()
	repoDir := filepath.Join(root, "models--LiquidAI--LFM2-test")
	ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main"))
	if err != nil || string(ref) != commit {
		t.Errorf("refs/main = %q, %v; want %s", ref, err, commit)
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	var want []string
	for p, data := range checkpointFiles() {
		link := filepath.Join(snap, filepath.FromSlash(p))
		if !Wanted(p) {
			if _, err := os.Lstat(link); err == nil {
				t.Errorf("%s was fetched; it is no checkpoint file", p)
			}
			continue
		}
		id := hubtest.BlobOID(data)
		if strings.HasSuffix(p, ".safetensors") {
			id = sha256Hex(data)
		}
		want = append(want, id)
		target, err := os.Readlink(link)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if target != "../../blobs/"+id {
			t.Errorf("%s links to %s, want ../../blobs/%s", p, target, id)
		}
		got, err := os.ReadFile(link)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: the cached bytes differ from the hub's (%v)", p, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(repoDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	var blobs []string
	for _, e := range entries {
		blobs = append(blobs, e.Name())
	}
	slices.Sort(blobs)
	slices.Sort(want)
	if !slices.Equal(blobs, want) {
		t.Errorf("blobs/ holds %v, want %v", blobs, want)
	}
}

func TestFetchThenOffline(t *testing.T) {
	h := newHub(t)
	root := t.TempDir()
	id, err := ParseID(repo)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Open(context.Background(), id, opts(h, root))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Offline || snap.Commit != h.commit || len(snap.Fetched) != 8 || len(snap.Linked) != 0 {
		t.Errorf("first open: %+v; want 8 files fetched at %s", snap, h.commit)
	}
	checkLayout(t, root, h.commit)
	if err := Complete(snap.Dir); err != nil {
		t.Error(err)
	}

	// Complete now: no request at all, by branch or by commit.
	before := len(h.srv.Requests())
	for _, rev := range []string{"main", h.commit} {
		snap2, err := Open(context.Background(), ID{Repo: repo, Revision: rev}, Options{Root: root, Endpoint: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatalf("%s: %v", rev, err)
		}
		if !snap2.Offline || snap2.Dir != snap.Dir || snap2.Commit != h.commit {
			t.Errorf("%s: %+v; want the snapshot %s offline", rev, snap2, snap.Dir)
		}
	}
	if n := len(h.srv.Requests()); n != before {
		t.Errorf("the complete cache sent %d requests", n-before)
	}
	if got, commit, ok := hf.CacheOrigin(snap.Dir); !ok || got != repo || commit != h.commit {
		t.Errorf("CacheOrigin(%s) = %s, %s, %v", snap.Dir, got, commit, ok)
	}
}

func TestFetchInterrupted(t *testing.T) {
	h := newHub(t)
	root := t.TempDir()
	const shard = "model-00001-of-00002.safetensors"
	const cut = 100 << 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data := checkpointFiles()[shard]
	part := filepath.Join(RepoDir(root, repo), "blobs", sha256Hex(data)+".incomplete")
	h.cutAt[shard] = cut
	h.onCut = func() {
		// Stopped once the client has stored what was sent: the bytes in
		// flight are the network's, not the cache's, to lose.
		go func() {
			for st, err := os.Stat(part); err != nil || st.Size() < cut; st, err = os.Stat(part) {
				time.Sleep(time.Millisecond)
			}
			cancel()
		}()
	}
	o := opts(h, root)
	o.Jobs = 1
	_, err := Fetch(ctx, ID{Repo: repo, Revision: "main"}, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted fetch: %v; want context.Canceled", err)
	}
	st, err := os.Stat(part)
	if err != nil || st.Size() != cut {
		t.Fatalf("partial blob: %v, %v; want %d bytes kept", st, err, cut)
	}
	if _, err := os.Lstat(filepath.Join(RepoDir(root, repo), "snapshots", h.commit, shard)); err == nil {
		t.Error("an unfinished file is linked into the snapshot")
	}
	if _, err := os.Stat(filepath.Join(RepoDir(root, repo), "refs", "main")); err == nil {
		t.Error("refs/main was written for an unfinished snapshot")
	}

	snap, err := Open(context.Background(), ID{Repo: repo, Revision: "main"}, opts(h, root))
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, root, h.commit)
	if !slices.Contains(snap.Fetched, shard) {
		t.Errorf("fetched %v; want %s resumed", snap.Fetched, shard)
	}
	rs := h.rangesOf(shard)
	if len(rs) != 2 || rs[0] != "" || rs[1] != "bytes=102400-" {
		t.Errorf("requests for %s had ranges %q; want the whole file, then bytes=102400-", shard, rs)
	}
	if got := h.servedCopy()[shard]; got != int64(len(data)) {
		t.Errorf("the hub sent %d bytes of %s; want its %d bytes once", got, shard, len(data))
	}
}

func TestPartialCache(t *testing.T) {
	h := newHub(t)
	root := t.TempDir()
	id := ID{Repo: repo, Revision: "main"}
	snap, err := Fetch(context.Background(), id, opts(h, root))
	if err != nil {
		t.Fatal(err)
	}
	// Left: a snapshot without one shard and its blob, and without the
	// link (only) of another file, as an interrupted huggingface_hub
	// download or a hand-picked allow_patterns leaves it.
	files := checkpointFiles()
	const gone, unlinked = "model-00002-of-00002.safetensors", "tokenizer.json"
	os.Remove(filepath.Join(snap.Dir, gone))
	os.Remove(filepath.Join(RepoDir(root, repo), "blobs", sha256Hex(files[gone])))
	os.Remove(filepath.Join(snap.Dir, unlinked))
	if _, ok, err := Lookup(root, id); ok || err != nil {
		t.Fatalf("Lookup of a partial snapshot: ok %v, %v", ok, err)
	}
	var ie *IncompleteError
	if err := Complete(snap.Dir); !errors.As(err, &ie) || ie.File != unlinked {
		t.Errorf("Complete: %v; want the missing %s named", err, unlinked)
	}
	h.mu.Lock()
	clear(h.served)
	h.mu.Unlock()
	snap2, err := Open(context.Background(), id, opts(h, root))
	if err != nil {
		t.Fatal(err)
	}
	if snap2.Offline || !slices.Equal(snap2.Fetched, []string{gone}) || !slices.Equal(snap2.Linked, []string{unlinked}) {
		t.Errorf("fetched %v, linked %v; want only %s fetched and %s linked", snap2.Fetched, snap2.Linked, gone, unlinked)
	}
	for p, n := range h.servedCopy() {
		if p != gone {
			t.Errorf("%s was downloaded again (%d bytes)", p, n)
		}
	}
	checkLayout(t, root, h.commit)
}

func TestFetchRefusesWrongBytes(t *testing.T) {
	h := newHub(t)
	root := t.TempDir()
	const shard = "model-00002-of-00002.safetensors"
	h.corrupt[shard] = true
	_, err := Fetch(context.Background(), ID{Repo: repo, Revision: "main"}, opts(h, root))
	var me *verify.MismatchError
	if !errors.As(err, &me) || me.Path != shard || me.Kind != verify.KindHash {
		t.Fatalf("fetch of a corrupted file: %v; want a hash mismatch of %s", err, shard)
	}
	blobs, _ := os.ReadDir(filepath.Join(RepoDir(root, repo), "blobs"))
	for _, b := range blobs {
		if strings.HasPrefix(b.Name(), sha256Hex(checkpointFiles()[shard])) {
			t.Errorf("blobs/%s kept", b.Name())
		}
	}
	if _, err := os.Lstat(filepath.Join(RepoDir(root, repo), "snapshots", h.commit, shard)); err == nil {
		t.Error("the corrupted file is linked into the snapshot")
	}
}

func TestFetchErrors(t *testing.T) {
	h := newHub(t)
	root := t.TempDir()
	_, err := Fetch(context.Background(), ID{Repo: repo, Revision: "v9"}, opts(h, root))
	var rn *hubapi.RevisionNotFoundError
	if !errors.As(err, &rn) {
		t.Errorf("unknown revision: %v", err)
	}
	_, err = Fetch(context.Background(), ID{Repo: "nobody/none", Revision: "main"}, opts(h, root))
	var pn *hubapi.RepoNotFoundError
	if !errors.As(err, &pn) || strings.Contains(err.Error(), "--create") {
		t.Errorf("unknown repository: %v", err)
	}
}

func TestParseID(t *testing.T) {
	tests := []struct {
		in   string
		want ID
		bad  bool
	}{
		{in: "LiquidAI/LFM2-8B-A1B", want: ID{"LiquidAI/LFM2-8B-A1B", "main"}},
		{in: "LiquidAI/LFM2-8B-A1B@v1.0", want: ID{"LiquidAI/LFM2-8B-A1B", "v1.0"}},
		{in: "a/b@0123456789abcdef0123456789abcdef01234567", want: ID{"a/b", "0123456789abcdef0123456789abcdef01234567"}},
		{in: "LFM2-8B-A1B", bad: true},
		{in: "./a/b", bad: true},
		{in: "/a/b", bad: true},
		{in: "a/b/c", bad: true},
		{in: "a/b@", bad: true},
		{in: "a/b@refs/pr/1", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseID(tt.in)
		if tt.bad != (err != nil) || !tt.bad && got != tt.want {
			t.Errorf("ParseID(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

func TestRoot(t *testing.T) {
	tests := []struct {
		hubCache, hfHome, xdg, home string
		want                        string
	}{
		{hubCache: "/c", hfHome: "/h", xdg: "/x", home: "/u", want: "/c"},
		{hfHome: "/h", xdg: "/x", home: "/u", want: "/h/hub"},
		{xdg: "/x", home: "/u", want: "/x/huggingface/hub"},
		{home: "/u", want: "/u/.cache/huggingface/hub"},
	}
	for _, tt := range tests {
		t.Setenv("HF_HUB_CACHE", tt.hubCache)
		t.Setenv("HF_HOME", tt.hfHome)
		t.Setenv("XDG_CACHE_HOME", tt.xdg)
		t.Setenv("HOME", tt.home)
		if got, err := Root(); err != nil || got != filepath.FromSlash(tt.want) {
			t.Errorf("%+v: Root() = %q, %v", tt, got, err)
		}
	}
}

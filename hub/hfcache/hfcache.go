package hfcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/format/hf"
	"github.com/lfmq/lfmq/hub/download"
	"github.com/lfmq/lfmq/hub/hubapi"
	"github.com/lfmq/lfmq/verify/sums"
)

// DefaultRevision is the revision of an id without @REVISION.
const DefaultRevision = "main"

// TokenizerFile is the file a complete snapshot must hold besides
// config.json and the weights.
const TokenizerFile = "tokenizer.json"

var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// IsCommit reports whether s is a 40-hex commit id.
func IsCommit(s string) bool { return commitRe.MatchString(s) }

// ID is a model on the hub: OWNER/NAME at a revision.
type ID struct {
	Repo     string
	Revision string
}

func (id ID) String() string { return id.Repo + "@" + id.Revision }

// IDError reports a string that is not OWNER/NAME[@REVISION].
type IDError struct {
	Value, Msg string
}

func (e *IDError) Error() string {
	return fmt.Sprintf("hfcache: %q is not a model id OWNER/NAME[@REVISION]: %s", e.Value, e.Msg)
}

// ParseID parses OWNER/NAME[@REVISION], each of [A-Za-z0-9._-]; the
// revision defaults to main.
func ParseID(s string) (ID, error) {
	repo, rev, hasRev := strings.Cut(s, "@")
	if !sums.ValidRepo(repo) {
		return ID{}, &IDError{Value: s, Msg: "OWNER/NAME must be two names of [A-Za-z0-9._-]"}
	}
	if !hasRev {
		rev = DefaultRevision
	}
	if !sums.ValidName(rev) {
		return ID{}, &IDError{Value: s, Msg: "REVISION must be a branch, tag or commit of [A-Za-z0-9._-]"}
	}
	return ID{Repo: repo, Revision: rev}, nil
}

// Root returns the cache directory huggingface_hub uses in this
// environment.
func Root() (string, error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub"), nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("hfcache: no HF_HUB_CACHE, HF_HOME or home directory: %w", err)
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), nil
}

// RepoDir returns root/models--OWNER--NAME.
func RepoDir(root, repo string) string {
	return filepath.Join(root, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// Snapshot is a model found or placed in the cache.
type Snapshot struct {
	// Dir is the snapshot directory, ROOT/models--OWNER--NAME/snapshots/COMMIT.
	Dir string
	// Repo is OWNER/NAME; Revision the one asked for; Commit the one it
	// names.
	Repo, Revision, Commit string
	// Offline is set when the cache held everything and the hub was not
	// asked.
	Offline bool
	// Fetched are the files downloaded (partly or whole), Linked those
	// whose bytes the cache held already (another snapshot's); sorted.
	Fetched, Linked []string
	// BytesReceived counts the body bytes received.
	BytesReceived int64
}

// IncompleteError reports a snapshot that lacks a file lfmq reads.
type IncompleteError struct {
	Dir, File string
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("hfcache: snapshot %s lacks %s", e.Dir, e.File)
}

// Complete checks that dir holds what lfmq reads of a checkpoint:
// config.json, tokenizer.json and every weight file (model.safetensors, or
// each shard model.safetensors.index.json names), each a regular file or a
// link to one. It returns an *IncompleteError naming the first one missing.
func Complete(dir string) error {
	for _, f := range []string{"config.json", TokenizerFile} {
		if !isFile(filepath.Join(dir, f)) {
			return &IncompleteError{Dir: dir, File: f}
		}
	}
	if !isFile(filepath.Join(dir, hf.IndexFile)) {
		if !isFile(filepath.Join(dir, hf.SingleFile)) {
			return &IncompleteError{Dir: dir, File: hf.SingleFile}
		}
		return nil
	}
	shards, err := hf.Shards(dir)
	if err != nil {
		return err
	}
	for _, s := range shards {
		if !isFile(filepath.Join(dir, s)) {
			return &IncompleteError{Dir: dir, File: s}
		}
	}
	return nil
}

// isFile reports whether p is a regular file, following links.
func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Lookup finds id in the cache at root without the network: the snapshot
// of the commit (the revision itself, or what refs/REVISION names) when it
// is complete. ok is false when the cache does not hold it all; err is set
// only when the cache cannot be read or a ref is malformed.
func Lookup(root string, id ID) (snap *Snapshot, ok bool, err error) {
	repoDir := RepoDir(root, id.Repo)
	commit, ok, err := cachedCommit(repoDir, id.Revision)
	if !ok || err != nil {
		return nil, false, err
	}
	dir := filepath.Join(repoDir, "snapshots", commit)
	if err := Complete(dir); err != nil {
		return nil, false, nil
	}
	return &Snapshot{Dir: dir, Repo: id.Repo, Revision: id.Revision, Commit: commit, Offline: true}, true, nil
}

// cachedCommit resolves revision to the commit the cache at repoDir holds
// for it: the revision itself when it is a commit id, else what
// refs/REVISION names. ok is false when the cache has no such ref; err is
// set when the ref cannot be read or is not a commit id.
func cachedCommit(repoDir, revision string) (commit string, ok bool, err error) {
	if IsCommit(revision) {
		return revision, true, nil
	}
	ref := filepath.Join(repoDir, "refs", revision)
	data, err := os.ReadFile(ref)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("hfcache: %w", err)
	}
	commit = strings.TrimSpace(string(data))
	if !IsCommit(commit) {
		return "", false, fmt.Errorf("hfcache: %s: %q is not a 40-hex commit id", ref, commit)
	}
	return commit, true, nil
}

// Options configures Fetch.
type Options struct {
	// Root is the cache directory (see Root).
	Root string
	// Endpoint is the hub's base URL (default hubapi.DefaultEndpoint).
	Endpoint string
	// Token, if set, is sent to the endpoint's host only (HF_TOKEN).
	Token string
	// Client is the HTTP client (default: one with header timeouts).
	Client *http.Client
	// Jobs bounds the files fetched at once (default 4).
	Jobs int
	// Retries and Backoff are as in package download.
	Retries int
	Backoff func(n int) time.Duration
	// Log, if set, receives one line per file.
	Log io.Writer
}

// Open returns id's snapshot: from the cache alone when it is complete
// there (Lookup), otherwise by Fetch.
func Open(ctx context.Context, id ID, opts Options) (*Snapshot, error) {
	snap, ok, err := Lookup(opts.Root, id)
	if err != nil || ok {
		return snap, err
	}
	return Fetch(ctx, id, opts)
}

// Fetch resolves id's revision on the hub, lists the commit's checkpoint
// files (Wanted) and brings every one the snapshot lacks into the cache;
// then it records refs/REVISION and checks that the snapshot is complete.
// An interrupted fetch keeps its partial blobs, which the next one
// resumes.
func Fetch(ctx context.Context, id ID, opts Options) (*Snapshot, error) {
	if opts.Root == "" {
		return nil, errors.New("hfcache: no cache directory")
	}
	remote, err := hubapi.OpenRemote(hubapi.RemoteOptions{Endpoint: opts.Endpoint, Repo: id.Repo, Token: opts.Token,
		Client: opts.Client, Retries: opts.Retries, Backoff: opts.Backoff})
	if err != nil {
		return nil, err
	}
	commit, err := remote.Resolve(ctx, id.Revision)
	if err != nil {
		return nil, err
	}
	files, err := remote.Files(ctx, commit)
	if err != nil {
		return nil, err
	}
	repoDir := RepoDir(opts.Root, id.Repo)
	snap := &Snapshot{Dir: filepath.Join(repoDir, "snapshots", commit), Repo: id.Repo, Revision: id.Revision, Commit: commit}
	f := &filler{opts: opts, url: remote.URL, commit: commit, repoDir: repoDir, snap: snap}
	if opts.Log != nil {
		// The files are fetched in parallel, each by a downloader of its
		// own, and the caller's writer need not be safe for that.
		f.opts.Log = &lockedWriter{w: opts.Log}
	}
	jobs := opts.Jobs
	if jobs <= 0 {
		jobs = 4
	}
	p := pool.New().WithErrors().WithContext(ctx).WithMaxGoroutines(jobs)
	for _, rf := range files {
		if !Wanted(rf.Path) {
			continue
		}
		p.Go(func(ctx context.Context) error { return f.place(ctx, rf) })
	}
	err = p.Wait()
	slices.Sort(snap.Fetched)
	slices.Sort(snap.Linked)
	if err != nil {
		if ctx.Err() != nil {
			return snap, ctx.Err()
		}
		return snap, err
	}
	if id.Revision != commit {
		refs := filepath.Join(repoDir, "refs")
		if err := os.MkdirAll(refs, 0o755); err != nil {
			return snap, fmt.Errorf("hfcache: %w", err)
		}
		if err := durable.WriteFile(filepath.Join(refs, id.Revision), []byte(commit)); err != nil {
			return snap, fmt.Errorf("hfcache: %w", err)
		}
	}
	if err := Complete(snap.Dir); err != nil {
		return snap, fmt.Errorf("hfcache: %s at %s: %w", id.Repo, commit, err)
	}
	return snap, nil
}

// Wanted reports whether a repository file is one of a checkpoint's: a
// top-level file that is JSON, safetensors, a chat template, text, a
// tokenizer model, a README or a licence. Other weights formats (GGUF,
// ONNX, PyTorch pickles) and sub-directories are not fetched.
func Wanted(p string) bool {
	if strings.Contains(p, "/") || strings.HasPrefix(p, ".") {
		return false
	}
	switch path.Ext(p) {
	case ".json", ".safetensors", ".jinja", ".txt", ".model", ".md":
		return true
	}
	return strings.HasPrefix(p, "LICENSE")
}

// filler places the files of one snapshot.
type filler struct {
	opts    Options
	url     string
	commit  string
	repoDir string
	mu      sync.Mutex
	snap    *Snapshot
}

// lockedWriter serialises the writes of several goroutines to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// place brings one file into the snapshot: nothing to do when its link is
// there with the listed size, a link when the blob is there, otherwise a
// fetch into the blob first.
func (f *filler) place(ctx context.Context, rf hubapi.RemoteFile) error {
	blobID := rf.LFS
	if blobID == "" {
		blobID = rf.GitOID
	}
	link := filepath.Join(f.snap.Dir, filepath.FromSlash(rf.Path))
	blob := filepath.Join(f.repoDir, "blobs", blobID)
	if st, err := os.Stat(link); err == nil && st.Mode().IsRegular() && st.Size() == rf.Size {
		return nil
	}
	fetched := false
	if st, err := os.Stat(blob); err != nil || !st.Mode().IsRegular() || st.Size() != rf.Size {
		if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
			return fmt.Errorf("hfcache: %w", err)
		}
		part := blob + ".incomplete"
		n, err := download.FetchBlob(ctx, download.BlobOptions{URL: f.url, Commit: f.commit, Client: f.opts.Client, Token: f.opts.Token,
			Retries: f.opts.Retries, Backoff: f.opts.Backoff, Log: f.opts.Log},
			download.Blob{Path: rf.Path, Size: rf.Size, SHA256: rf.LFS, GitOID: rf.GitOID}, part)
		f.mu.Lock()
		f.snap.BytesReceived += n
		f.snap.Fetched = append(f.snap.Fetched, rf.Path)
		f.mu.Unlock()
		if err != nil {
			return err
		}
		if err := durable.Rename(part, blob); err != nil {
			return fmt.Errorf("hfcache: %w", err)
		}
		fetched = true
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("hfcache: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(link), blob)
	if err != nil {
		return fmt.Errorf("hfcache: %w", err)
	}
	// A stale link (to a blob of other content) is replaced.
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hfcache: %w", err)
	}
	if err := os.Symlink(rel, link); err != nil {
		return fmt.Errorf("hfcache: linking %s: %w", link, err)
	}
	if !fetched {
		f.mu.Lock()
		f.snap.Linked = append(f.snap.Linked, rf.Path)
		f.mu.Unlock()
	}
	return nil
}

package hfcache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/hub/hubapi"
	"github.com/lfmq/lfmq/verify/sums"
)

// DatasetPrefix starts a dataset's hub id, as in the hub's own URLs.
const DatasetPrefix = "datasets/"

// DatasetID is one file of a dataset repository on the hub:
// datasets/OWNER/NAME[@REVISION]:PATH.
type DatasetID struct {
	ID
	// Path is the file's path in the repository (a parquet or JSONL file
	// of one split, e.g. main/test-00000-of-00001.parquet).
	Path string
}

func (d DatasetID) String() string { return DatasetPrefix + d.ID.String() + ":" + d.Path }

// IsDatasetID reports whether s is written as a dataset's hub id.
func IsDatasetID(s string) bool { return strings.HasPrefix(s, DatasetPrefix) }

// ParseDatasetID parses datasets/OWNER/NAME[@REVISION]:PATH; the revision
// defaults to main.
func ParseDatasetID(s string) (DatasetID, error) {
	rest, ok := strings.CutPrefix(s, DatasetPrefix)
	if !ok {
		return DatasetID{}, &IDError{Value: s, Msg: "a dataset id starts with datasets/"}
	}
	repo, path, ok := strings.Cut(rest, ":")
	if !ok || path == "" {
		return DatasetID{}, &IDError{Value: s, Msg: "name the file after a colon: datasets/OWNER/NAME[@REVISION]:PATH"}
	}
	if err := sums.CheckPath(path, sums.AnyPath); err != nil {
		return DatasetID{}, &IDError{Value: s, Msg: "PATH: " + err.Error()}
	}
	id, err := ParseID(repo)
	if err != nil {
		return DatasetID{}, &IDError{Value: s, Msg: err.(*IDError).Msg}
	}
	return DatasetID{ID: id, Path: path}, nil
}

// DatasetRepoDir returns root/datasets--OWNER--NAME, huggingface_hub's
// directory of a dataset repository.
func DatasetRepoDir(root, repo string) string {
	return filepath.Join(root, "datasets--"+strings.ReplaceAll(repo, "/", "--"))
}

// DatasetFile is a dataset file found or placed in the cache.
type DatasetFile struct {
	// File is the file in the snapshot, a link into blobs/ as
	// huggingface_hub makes it.
	File string
	// Repo, Revision and Commit are as in Snapshot; Offline is set when
	// the hub was not asked; Fetched when the bytes were downloaded.
	Repo, Revision, Commit string
	Offline, Fetched       bool
	BytesReceived          int64
}

// LookupDataset finds a dataset file in the cache at root without the
// network. ok is false when the cache does not hold it.
func LookupDataset(root string, d DatasetID) (*DatasetFile, bool, error) {
	repoDir := DatasetRepoDir(root, d.Repo)
	commit, ok, err := cachedCommit(repoDir, d.Revision)
	if !ok || err != nil {
		return nil, false, err
	}
	file := filepath.Join(repoDir, "snapshots", commit, filepath.FromSlash(d.Path))
	if !isFile(file) {
		return nil, false, nil
	}
	return &DatasetFile{File: file, Repo: d.Repo, Revision: d.Revision, Commit: commit, Offline: true}, true, nil
}

// FileNotFoundError is a dataset file the commit does not hold; Near
// lists the data files it does (parquet and JSONL), to choose from.
type FileNotFoundError struct {
	Repo, Commit, Path string
	Near               []string
}

func (e *FileNotFoundError) Error() string {
	msg := fmt.Sprintf("hfcache: dataset %s at %s has no file %s", e.Repo, e.Commit, e.Path)
	if len(e.Near) > 0 {
		n := e.Near
		if len(n) > 8 {
			n = append(n[:8:8], "…")
		}
		msg += "; its data files: " + strings.Join(n, ", ")
	}
	return msg
}

// OpenDataset returns the dataset file d names: from the cache when it is
// there (LookupDataset), otherwise fetched from the hub into the cache as
// a model's files are (checked against the size and digest the hub's
// tree lists, then linked into the snapshot), with refs/REVISION
// recorded.
func OpenDataset(ctx context.Context, d DatasetID, opts Options) (*DatasetFile, error) {
	if opts.Root == "" {
		return nil, errors.New("hfcache: no cache directory")
	}
	if f, ok, err := LookupDataset(opts.Root, d); err != nil || ok {
		return f, err
	}
	remote, err := hubapi.OpenRemote(hubapi.RemoteOptions{Endpoint: opts.Endpoint, Repo: d.Repo, Dataset: true, Token: opts.Token,
		Client: opts.Client, Retries: opts.Retries, Backoff: opts.Backoff})
	if err != nil {
		return nil, err
	}
	commit, err := remote.Resolve(ctx, d.Revision)
	if err != nil {
		return nil, err
	}
	files, err := remote.Files(ctx, commit)
	if err != nil {
		return nil, err
	}
	var want *hubapi.RemoteFile
	var near []string
	for i, rf := range files {
		if rf.Path == d.Path {
			want = &files[i]
		}
		if strings.HasSuffix(rf.Path, ".parquet") || strings.HasSuffix(rf.Path, ".jsonl") {
			near = append(near, rf.Path)
		}
	}
	if want == nil {
		sort.Strings(near)
		return nil, &FileNotFoundError{Repo: d.Repo, Commit: commit, Path: d.Path, Near: near}
	}
	repoDir := DatasetRepoDir(opts.Root, d.Repo)
	snap := &Snapshot{Dir: filepath.Join(repoDir, "snapshots", commit), Repo: d.Repo, Revision: d.Revision, Commit: commit}
	f := &filler{opts: opts, url: remote.URL, commit: commit, repoDir: repoDir, snap: snap}
	if err := f.place(ctx, *want); err != nil {
		return nil, err
	}
	if d.Revision != commit {
		refs := filepath.Join(repoDir, "refs")
		if err := os.MkdirAll(refs, 0o755); err != nil {
			return nil, fmt.Errorf("hfcache: %w", err)
		}
		if err := durable.WriteFile(filepath.Join(refs, d.Revision), []byte(commit)); err != nil {
			return nil, fmt.Errorf("hfcache: %w", err)
		}
	}
	return &DatasetFile{File: filepath.Join(snap.Dir, filepath.FromSlash(d.Path)), Repo: d.Repo, Revision: d.Revision, Commit: commit,
		Fetched: len(snap.Fetched) > 0, BytesReceived: snap.BytesReceived}, nil
}

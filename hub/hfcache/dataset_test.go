package hfcache

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/hub/hubtest"
)

// datasetHub serves a hubtest repository as a dataset: only the dataset
// routes (api/datasets/…, /datasets/OWNER/NAME/resolve/…) answer, mapped
// onto the test hub's model routes, so a client that asks the model
// routes for a dataset fails.
type datasetHub struct {
	srv   *hubtest.Server
	mu    sync.Mutex
	paths []string
}

func (h *datasetHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.paths = append(h.paths, r.URL.Path)
	h.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/datasets/"):
		r.URL.Path = "/api/models/" + strings.TrimPrefix(r.URL.Path, "/api/datasets/")
	case strings.HasPrefix(r.URL.Path, "/datasets/"):
		r.URL.Path = "/" + strings.TrimPrefix(r.URL.Path, "/datasets/")
	default:
		http.NotFound(w, r)
		return
	}
	r.URL.RawPath = ""
	h.srv.ServeHTTP(w, r)
}

// TestDataset: a dataset file named by datasets/OWNER/NAME@REV:PATH is
// fetched from the dataset routes into huggingface_hub's layout
// (datasets--OWNER--NAME, refs/REV, a snapshot link into blobs/), found
// there afterwards without the network, and a missing file is named with
// the data files the commit has.
func TestDataset(t *testing.T) {
	s := hubtest.NewServer()
	const dsRepo = "owner/problems"
	if err := s.CreateRepo(dsRepo, false); err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"question": "1 + 1?", "answer": "#### 2"}` + "\n")
	commit, err := s.CommitLFSFiles(dsRepo, "main", "add the split", map[string][]byte{
		"main/test.jsonl": data, "README.md": []byte("# problems\n"), "main/train.parquet": []byte("PAR1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &datasetHub{srv: s}
	ts := httptest.NewServer(h)
	defer ts.Close()
	root := t.TempDir()

	id, err := ParseDatasetID("datasets/owner/problems@main:main/test.jsonl")
	if err != nil || id.Repo != dsRepo || id.Revision != "main" || id.Path != "main/test.jsonl" {
		t.Fatalf("ParseDatasetID: %+v, %v", id, err)
	}
	f, err := OpenDataset(context.Background(), id, Options{Root: root, Endpoint: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	if f.Commit != commit || !f.Fetched || f.Offline {
		t.Errorf("fetched %+v", f)
	}
	want := filepath.Join(root, "datasets--owner--problems", "snapshots", commit, "main", "test.jsonl")
	if got, err := os.ReadFile(f.File); err != nil || f.File != want || string(got) != string(data) {
		t.Fatalf("file %s: %q, %v", f.File, got, err)
	}
	if link, err := os.Readlink(want); err != nil || !strings.Contains(link, "blobs") {
		t.Errorf("snapshot entry is not a link into blobs/: %q, %v", link, err)
	}
	if ref, _ := os.ReadFile(filepath.Join(root, "datasets--owner--problems", "refs", "main")); string(ref) != commit {
		t.Errorf("refs/main = %q", ref)
	}
	for _, p := range h.paths {
		if !strings.HasPrefix(p, "/api/datasets/") && !strings.HasPrefix(p, "/datasets/") {
			t.Errorf("asked %s, not a dataset route", p)
		}
	}

	// Again: from the cache, the hub not asked.
	ts.Close()
	f, err = OpenDataset(context.Background(), id, Options{Root: root, Endpoint: ts.URL})
	if err != nil || !f.Offline || f.File != want {
		t.Fatalf("offline: %+v, %v", f, err)
	}

	ts2 := httptest.NewServer(h)
	defer ts2.Close()
	missing, _ := ParseDatasetID("datasets/owner/problems:main/validation.jsonl")
	_, err = OpenDataset(context.Background(), missing, Options{Root: t.TempDir(), Endpoint: ts2.URL})
	var nf *FileNotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "main/test.jsonl, main/train.parquet") {
		t.Errorf("missing file: %v", err)
	}
	for _, bad := range []string{"owner/problems:x.jsonl", "datasets/owner/problems", "datasets/owner:x", "datasets/owner/problems:../x"} {
		if _, err := ParseDatasetID(bad); err == nil {
			t.Errorf("ParseDatasetID(%q) accepted", bad)
		}
	}
}

package hub

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/hub/hubtest"
)

// TestResolveModel: a hub id is fetched into the cache once and then found
// there without the network; a directory stays itself; an id the hub does
// not have is an *ArgError.
func TestResolveModel(t *testing.T) {
	const repo = "LiquidAI/LFM2-test"
	s := hubtest.NewServer()
	if err := s.CreateRepo(repo, false); err != nil {
		t.Fatal(err)
	}
	commit, err := s.CommitLFSFiles(repo, "main", "add the checkpoint", map[string][]byte{
		"config.json":       []byte(`{"model_type": "lfm2_moe"}`),
		"tokenizer.json":    []byte(`{"model": {}}`),
		"model.safetensors": bytes.Repeat([]byte{7}, 4096),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_TOKEN", "")
	t.Chdir(t.TempDir())

	if !IsModelID(repo) || IsModelID("no/such/dir") {
		t.Fatal("IsModelID does not tell OWNER/NAME from a path")
	}
	var log strings.Builder
	opts := ModelOptions{Label: "--model", Endpoint: srv.URL, Log: &log}
	dir, err := ModelDir(context.Background(), repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "models--LiquidAI--LFM2-test", "snapshots", commit); dir != want {
		t.Errorf("dir = %s, want %s", dir, want)
	}
	if !strings.Contains(log.String(), "--model "+repo+": fetching into the Hugging Face cache") {
		t.Errorf("log = %q", log.String())
	}

	srv.Close() // from now on the cache alone
	log.Reset()
	again, err := ResolveModel(context.Background(), repo, opts)
	if err != nil || again != dir {
		t.Fatalf("from the cache: %q, %v; want %q", again, err, dir)
	}
	if !strings.Contains(log.String(), "snapshot "+commit+" from the Hugging Face cache") {
		t.Errorf("log = %q", log.String())
	}

	if err := os.Mkdir("LiquidAI", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join("LiquidAI", "local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := ModelDir(context.Background(), "LiquidAI/local", opts); err != nil || got != "LiquidAI/local" {
		t.Errorf("a directory: %q, %v", got, err)
	}

	srv2 := httptest.NewServer(s)
	defer srv2.Close()
	opts.Endpoint = srv2.URL
	_, err = ResolveModel(context.Background(), "LiquidAI/missing", opts)
	var ae *ArgError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "--model LiquidAI/missing: no such directory, and as a hub id") {
		t.Errorf("missing repository: %v, want an *ArgError naming the argument", err)
	}
	_, err = ResolveModel(context.Background(), "Liquid AI/x", opts)
	if !errors.As(err, &ae) {
		t.Errorf("malformed id: %v, want an *ArgError", err)
	}
}

// TestRepoNameProblem: names huggingface_hub's validate_repo_id refuses are
// no hub ids, so IsModelID takes them for directories (that are not
// there) and ResolveModel refuses them without asking the hub.
func TestRepoNameProblem(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, repo := range []string{"LiquidAI/LFM2-8B-A1B", "o/n", "_a/b_", "a.b/c-d.e_f", "a/" + strings.Repeat("n", 96)} {
		if p := RepoNameProblem(repo); p != "" || !IsModelID(repo) {
			t.Errorf("%s: %q, IsModelID %v; want a hub id", repo, p, IsModelID(repo))
		}
	}
	for _, repo := range []string{".cache/x", "a/b-", "a/-b", "a./b", "a--b/c", "a/b..c", "a/b.git", "a/" + strings.Repeat("n", 97)} {
		if p := RepoNameProblem(repo); p == "" || IsModelID(repo) {
			t.Errorf("%s: no problem found, or IsModelID", repo)
		}
		_, err := ResolveModel(context.Background(), repo, ModelOptions{Label: "--model", Endpoint: "http://127.0.0.1:1"})
		var ae *ArgError
		if !errors.As(err, &ae) || !strings.HasPrefix(err.Error(), "--model "+repo+": no such directory, and no hub id: ") {
			t.Errorf("ResolveModel(%s): %v, want an *ArgError", repo, err)
		}
	}
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/hub/hubtest"
)

// hubWithTinyModel serves the tiny model's files as repo on a test hub,
// the weights as an LFS object, and points the Hugging Face cache at an
// empty directory. It returns the hub's URL, the commit and the cache.
func hubWithTinyModel(t *testing.T, repo string) (url, commit, cache string) {
	t.Helper()
	return hubWithModel(t, repo, tinyModel)
}

// hubWithModel is hubWithTinyModel of the model directory dir.
func hubWithModel(t *testing.T, repo, dir string) (url, commit, cache string) {
	t.Helper()
	s := hubtest.NewServer()
	if err := s.CreateRepo(repo, false); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	commit, err = s.CommitLFSFiles(repo, "main", "the tiny model", files)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cache = t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_TOKEN", "")
	return srv.URL, commit, cache
}

func readManifest(t *testing.T, dir string) (*lfmq1.Manifest, string) {
	t.Helper()
	m, sum, err := lfmq1.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, sum
}

// TestQuantizeHubModel: --model OWNER/NAME fetches the model from the hub
// into huggingface_hub's cache layout, and then works offline from it; the
// manifest names the repository and commit, whichever way the snapshot is
// named, and the tensors are those of the same model read from its
// directory.
func TestQuantizeHubModel(t *testing.T) {
	const repo = "LiquidAI/tiny-lfm2-moe"
	url, commit, cache := hubWithTinyModel(t, repo)
	tmp := t.TempDir()
	quantize := func(model, endpoint, out string) (string, string) {
		t.Helper()
		args := []string{"quantize", "--model", model, "--out", filepath.Join(tmp, out), "--method", "rtn"}
		if endpoint != "" {
			args = append(args, "--endpoint", endpoint)
		}
		ios, _, stderr := testStreams()
		if code := run(context.Background(), args, ios); code != 0 {
			t.Fatalf("quantize --model %s: exit %d: %s", model, code, stderr)
		}
		_, sum := readManifest(t, filepath.Join(tmp, out))
		return sum, stderr.String()
	}

	online, log := quantize(repo, url, "online")
	if !strings.Contains(log, "fetching into the Hugging Face cache") || !strings.Contains(log, "snapshot "+commit) {
		t.Errorf("stderr of the first run:\n%s", log)
	}
	// The cache as huggingface_hub lays it out.
	repoDir := filepath.Join(cache, "models--LiquidAI--tiny-lfm2-moe")
	if ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main")); err != nil || string(ref) != commit {
		t.Errorf("refs/main = %q, %v; want %s", ref, err, commit)
	}
	weights, err := os.ReadFile(filepath.Join(tinyModel, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(weights)
	snapshot := filepath.Join(repoDir, "snapshots", commit)
	if target, err := os.Readlink(filepath.Join(snapshot, "model.safetensors")); err != nil || target != "../../blobs/"+hex.EncodeToString(sum[:]) {
		t.Errorf("snapshots/%s/model.safetensors links to %q (%v), want ../../blobs/<its sha256>", commit, target, err)
	}

	m, _ := readManifest(t, filepath.Join(tmp, "online"))
	if m.Source.Repo != repo || m.Source.Commit != commit {
		t.Errorf("manifest source: repo %q commit %q; want %s at %s", m.Source.Repo, m.Source.Commit, repo, commit)
	}
	// The same model read from its own directory: the same tensors and
	// source files, and no origin.
	quantize(tinyModel, "", "local")
	local, _ := readManifest(t, filepath.Join(tmp, "local"))
	if !reflect.DeepEqual(local.Tensors, m.Tensors) || !slices.Equal(local.Source.Files, m.Source.Files) {
		t.Error("the checkpoint of the fetched model differs from the directory's")
	}
	if local.Source.Repo != "" || local.Source.Commit != "" {
		t.Errorf("a plain directory records an origin: %+v", local.Source)
	}

	// Offline now: an endpoint nothing answers at is never asked, by
	// branch, by commit, or by the snapshot's path.
	for i, model := range []string{repo, repo + "@" + commit, snapshot} {
		out := "offline" + string(rune('a'+i))
		got, log := quantize(model, "http://127.0.0.1:1", out)
		if got != online {
			t.Errorf("--model %s: manifest sha256 %s, want %s as online", model, got, online)
		}
		if model != snapshot && !strings.Contains(log, "from the Hugging Face cache") {
			t.Errorf("--model %s: stderr:\n%s", model, log)
		}
	}

	// What the hub does not have is the command line's mistake.
	for _, model := range []string{"LiquidAI/none", repo + "@v9"} {
		ios, _, stderr := testStreams()
		args := []string{"quantize", "--model", model, "--endpoint", url, "--out", filepath.Join(tmp, "x"), "--method", "rtn"}
		if code := run(context.Background(), args, ios); code != exitUsage || !strings.Contains(stderr.String(), "--model "+model) {
			t.Errorf("--model %s: exit %d, want %d: %s", model, code, exitUsage, stderr)
		}
	}
}

// TestScoreHubReference: the receipts of a reference given by its hub id
// carry the repository and commit, and those of a candidate quantized from
// it carry its source's.
func TestScoreHubReference(t *testing.T) {
	const repo = "LiquidAI/tiny-lfm2-moe"
	url, commit, _ := hubWithTinyModel(t, repo)
	tmp := t.TempDir()
	rtn := filepath.Join(tmp, "rtn")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", repo, "--endpoint", url, "--out", rtn, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	out := filepath.Join(tmp, "evidence.json")
	corpus := filepath.Join(filepath.Dir(tinyModel), "corpora", "code.jsonl")
	ios, _, stderr = testStreams()
	args := []string{"score", "--reference", repo, "--endpoint", "http://127.0.0.1:1", "--candidate", "rtn=" + rtn, "--corpus", "code=" + corpus, "--max-records", "1", "--ctx", "64", "--out", out}
	if code := run(context.Background(), args, ios); code != 0 {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	f, err := evidence.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	ref := f.Receipts.Reference
	if ref.Repo != repo || ref.Commit != commit || len(ref.Files) == 0 {
		t.Errorf("reference receipt: repo %q commit %q, %d files; want %s at %s with its files", ref.Repo, ref.Commit, len(ref.Files), repo, commit)
	}
	if !strings.Contains(f.Receipts.Command, "--reference "+repo+" ") {
		t.Errorf("the receipts' command line lost the id: %s", f.Receipts.Command)
	}
	if len(f.Receipts.Candidates) != 1 || f.Receipts.Candidates[0].SourceRepo != repo || f.Receipts.Candidates[0].SourceCommit != commit {
		t.Errorf("candidate receipts: %+v", f.Receipts.Candidates)
	}
}

// TestReleaseBaseModelFromManifest: release build takes the base model and
// its commit from the manifest of a checkpoint quantized from the cache.
func TestReleaseBaseModelFromManifest(t *testing.T) {
	const repo = "LiquidAI/tiny-lfm2-moe"
	url, commit, _ := hubWithTinyModel(t, repo)
	rtn := filepath.Join(t.TempDir(), "rtn")
	ios, _, stderr := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", repo, "--endpoint", url, "--out", rtn, "--method", "rtn"}, ios); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	var got *releaseBuildOptions
	cmd := newReleaseCmd(ios, func(o *releaseBuildOptions) error { got = o; return nil })
	if err := executeWith(ios, cmd, "release", "build", "--checkpoint", rtn, "--out", filepath.Join(t.TempDir(), "rel"), "--hub-repo", "me/x", "--license", filepath.Join(tinyModel, "config.json")); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.BaseModel != repo || got.BaseRevision != commit {
		t.Errorf("release build options: %+v; want base model %s at %s", got, repo, commit)
	}
}

// TestHubIDEverywhere: generate, serve and inspect take the hub id that
// quantize takes. The first use fetches the model into the Hugging Face
// cache, later ones read it there without the network (an endpoint nothing
// answers at), and each command's output is what it prints for the same
// model read from its directory. A served hub model is known to clients
// by its id, not by the snapshot directory's name (a commit id). What the
// hub lacks is a usage error naming the argument, as for quantize.
func TestHubIDEverywhere(t *testing.T) {
	const repo = "LiquidAI/tiny-lfm2-moe"
	url, commit, cache := hubWithTinyModel(t, repo)
	snapshot := filepath.Join(cache, "models--LiquidAI--tiny-lfm2-moe", "snapshots", commit)
	const offline = "http://127.0.0.1:1"
	lfmq := func(args ...string) (int, string, string) {
		t.Helper()
		ios, stdout, stderr := testStreams()
		code := run(context.Background(), args, ios)
		return code, stdout.String(), stderr.String()
	}

	code, hubOut, log := lfmq("inspect", repo, "--endpoint", url)
	if code != 0 || !strings.Contains(log, "checkpoint "+repo+": fetching into the Hugging Face cache") {
		t.Fatalf("inspect %s: exit %d: %s", repo, code, log)
	}
	code, dirOut, log := lfmq("inspect", tinyModel)
	if code != 0 {
		t.Fatalf("inspect %s: exit %d: %s", tinyModel, code, log)
	}
	if got, want := strings.ReplaceAll(hubOut, snapshot, "DIR"), strings.ReplaceAll(dirOut, tinyModel, "DIR"); got != want {
		t.Errorf("inspect %s:\n%s\nwant, as for its directory:\n%s", repo, got, want)
	}

	gen := []string{"--prompt", "package main", "--max-tokens", "12"}
	code, want, log := lfmq(append([]string{"generate", "--model", tinyModel}, gen...)...)
	if code != 0 {
		t.Fatalf("generate --model %s: exit %d: %s", tinyModel, code, log)
	}
	for _, model := range []string{repo, repo + "@" + commit} {
		code, got, log := lfmq(append([]string{"generate", "--model", model, "--endpoint", offline}, gen...)...)
		if code != 0 || got != want || !strings.Contains(log, "--model "+model+": snapshot "+commit+" from the Hugging Face cache") {
			t.Errorf("generate --model %s: exit %d, stdout %q (want %q): %s", model, code, got, want, log)
		}
	}

	base, stop := startServe(t, "--model", repo, "--endpoint", offline)
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != repo {
		t.Errorf("/v1/models of serve --model %s: %+v (%v); want the id %s", repo, models, err, repo)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d", code)
	}

	for _, args := range [][]string{
		{"inspect", "LiquidAI/none", "--endpoint", url},
		append([]string{"generate", "--model", "LiquidAI/none", "--endpoint", url}, gen...),
		{"serve", "--model", repo + "@v9", "--endpoint", url, "--port", "0"},
	} {
		label := "--model " + args[2]
		if args[0] == "inspect" {
			label = "checkpoint " + args[1]
		}
		// An id without a revision may be a mistyped directory, and the
		// message says that there is none.
		if !strings.Contains(label, "@") {
			label += ": no such directory, and as a hub id"
		}
		if code, _, log := lfmq(args...); code != exitUsage || !strings.Contains(log, label+": ") {
			t.Errorf("%s: exit %d, want %d naming %q: %s", strings.Join(args, " "), code, exitUsage, label, log)
		}
	}
}

// TestMistypedModelPath: a --model that names no directory says so. Only
// when it could be a hub id does the message go on with what the hub
// answered, as a read of the hub ("hub: "), never as a publish
// ("publish: "); a name no hub can have (huggingface_hub's
// validate_repo_id: no leading or trailing '.' or '-', no "--" or "..",
// no ".git" at the end, a name of at most 96) asks nothing of the hub.
func TestMistypedModelPath(t *testing.T) {
	s := hubtest.NewServer()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch {
		case strings.Contains(r.URL.Path, "/bad/json/"):
			w.Write([]byte("not JSON"))
		case strings.Contains(r.URL.Path, "/locked/away/"):
			http.Error(w, "no access", http.StatusForbidden)
		default:
			s.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	gen := func(model string) (int, string) {
		t.Helper()
		ios, _, stderr := testStreams()
		code := run(context.Background(), []string{"generate", "--model", model, "--prompt", "x"}, ios)
		return code, stderr.String()
	}

	for _, tt := range []struct{ model, want string }{
		{"tour/rtnn", "lfmq: --model tour/rtnn: no such directory, and as a hub id: hub: repository tour/rtnn does not exist on " + srv.URL + " (or this token cannot see it)\n"},
		{"bad/json", "lfmq: --model bad/json: no such directory, and as a hub id: hub: repo info: " + srv.URL + "/api/models/bad/json/revision/main: unexpected answer: "},
		{"locked/away", "lfmq: --model locked/away: no such directory, and as a hub id: hub: repo info: GET " + srv.URL + "/api/models/locked/away/revision/main: HTTP 403 Forbidden: no access\n"},
	} {
		code, stderr := gen(tt.model)
		if code == exitOK || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "publish") {
			t.Errorf("--model %s: exit %d, want the error %q, and no publish:\n%s", tt.model, code, tt.want, stderr)
		}
	}
	if err := s.CreateRepo("tour/rtn", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitLFSFiles("tour/rtn", "main", "x", map[string][]byte{"config.json": []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if code, stderr := gen("tour/rtn@v9"); code != exitUsage || !strings.HasSuffix(stderr, "\nlfmq: --model tour/rtn@v9: hub: repository tour/rtn has no revision \"v9\"\n") {
		t.Errorf("--model tour/rtn@v9: exit %d: %q", code, stderr)
	}

	requests.Store(0)
	for _, model := range []string{".cache/rtnn", "tour/rtnn-", "tour/-rtnn", "tour_/rtnn.", "to--ur/rtnn", "tour/rt..nn", "tour/rtnn.git", "tour/" + strings.Repeat("n", 97), "tour/rtnn@"} {
		code, stderr := gen(model)
		if want := "lfmq: --model " + model + ": no such directory\n"; code != exitUsage || stderr != want {
			t.Errorf("--model %s: exit %d, stderr %q, want %q", model, code, stderr, want)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("names no hub can have sent %d requests to the hub", n)
	}
}

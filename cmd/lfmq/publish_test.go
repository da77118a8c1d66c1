package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lfmq/lfmq/hub/hubtest"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

const (
	publishRepo  = "lfmq/tiny-lfm2-moe-lfmq1"
	publishToken = "hf_CommandTestTokenNeverPrinted42"
)

func TestPublishFlags(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(" hf_abc \n"), 0o600)
	twoTokens := filepath.Join(dir, "two")
	os.WriteFile(twoTokens, []byte("a b\n"), 0o600)
	tests := []struct {
		name, args, env, wantErr string
		check                    func(*publishOptions) bool
	}{
		{"defaults", "--release-dir r --repo a/b", "hf_env", "", func(o *publishOptions) bool {
			return o.Token == "hf_env" && o.Branch == "main" && o.Endpoint == "https://huggingface.co" && !o.Create && !o.NoCheck && o.Jobs == 4 && o.Retries == 5
		}},
		{"token file wins", "--release-dir r --repo a/b --token-file " + tokenFile, "hf_env", "", func(o *publishOptions) bool { return o.Token == "hf_abc" }},
		{"all", "--release-dir r --repo a/b --revision v2 --branch dev --endpoint http://127.0.0.1:9 --create --private --message m --no-check --jobs 2", "t", "", func(o *publishOptions) bool {
			return o.Revision == "v2" && o.Branch == "dev" && o.Endpoint == "http://127.0.0.1:9" && o.Create && o.Private && o.Message == "m" && o.NoCheck && o.Jobs == 2
		}},
		{"no token", "--release-dir r --repo a/b", "", "needs a hub token", nil},
		{"no repo", "--release-dir r", "t", "--repo is required", nil},
		{"bad repo", "--release-dir r --repo just-a-name", "t", `repository "just-a-name"`, nil},
		{"bad endpoint", "--release-dir r --repo a/b --endpoint ftp://x", "t", "endpoint", nil},
		{"tag is the branch", "--release-dir r --repo a/b --revision main", "t", `revision "main"`, nil},
		{"private without create", "--release-dir r --repo a/b --private", "t", "--private applies", nil},
		{"bad jobs", "--release-dir r --repo a/b --jobs 0", "t", "--jobs", nil},
		{"no retries", "--release-dir r --repo a/b --retries 0", "t", "", func(o *publishOptions) bool { return o.Retries == 0 }},
		{"bad retries", "--release-dir r --repo a/b --retries -1", "t", "--retries", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HF_TOKEN", tt.env)
			ios, _, _ := testStreams()
			var got *publishOptions
			err := executeWith(ios, newPublishCmd(ios, func(o *publishOptions) error { got = o; return nil }), append([]string{"publish"}, strings.Fields(tt.args)...)...)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(got) {
				t.Errorf("options %+v", *got)
			}
		})
	}
	ios, _, _ := testStreams()
	err := executeWith(ios, newPublishCmd(ios, func(*publishOptions) error { return nil }), "publish", "--release-dir", "r", "--repo", "a/b", "--token-file", twoTokens)
	if err == nil || !strings.Contains(err.Error(), "one token") {
		t.Errorf("a token file with two words: %v", err)
	}
}

// testHub is a hub with its LFS storage on a second host.
type testHub struct {
	srv *hubtest.Server
	url string // the hub's base URL
}

func newTestHub(t *testing.T) *testHub {
	srv := hubtest.NewServer()
	srv.Token = publishToken
	// The checkpoint's larger files go multipart, in several parts.
	srv.MultipartThreshold, srv.ChunkSize = 400000, 128<<10
	return &testHub{srv: srv, url: hubtest.Start(t, srv)}
}

// publishReleases builds two releases of the same checkpoint and binaries
// whose evidence differs in one file: revision v1 and v2.
func publishReleases(t *testing.T) (a, b string) {
	ckpt, src := bundletest.Checkpoint(t), bundletest.Source(t)
	build := func(revision, kl string) string {
		ev := t.TempDir()
		os.WriteFile(filepath.Join(ev, "quality.json"), []byte(`{"kl": `+kl+`}`+"\n"), 0o644)
		os.WriteFile(filepath.Join(ev, "noise.json"), []byte(`{"floor": 0.001}`+"\n"), 0o644)
		out := filepath.Join(t.TempDir(), "release-"+revision)
		opts := bundletest.Options(t, ckpt, src, out)
		opts.EvidenceDir, opts.Revision = ev, revision
		if _, err := bundle.Build(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return build("v1", "0.0125"), build("v2", "0.0119")
}

// listedFiles maps each file SHA256SUMS lists to its sha256.
func listedFiles(t *testing.T, dir string) map[string]string {
	data, err := os.ReadFile(filepath.Join(dir, sums.SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := sums.Parse(sums.SumsFile, data, sums.BundlePath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{sums.SumsFile: "list"}
	for _, e := range entries {
		out[e.Path] = e.SHA256
	}
	return out
}

// TestPublishEndToEnd: publish a signed release to the test hub, download
// it by tag with lfmq download, verify it (signature included); publish it
// again (no commit); publish a release that differs in one evidence file
// (one commit changing exactly what differs, no object sent twice); a stale
// parent and a tampered release are refused.
func TestPublishEndToEnd(t *testing.T) {
	h := newTestHub(t)
	t.Setenv("HF_TOKEN", publishToken)
	t.Setenv("SSH_AUTH_SOCK", "")
	relA, relB := publishReleases(t)
	exec1 := func(args ...string) (int, string, string) {
		t.Helper()
		ios, stdout, stderr := testStreams()
		code := run(context.Background(), args, ios)
		if strings.Contains(stdout.String()+stderr.String(), publishToken) {
			t.Errorf("%v printed the token", args)
		}
		return code, stdout.String(), stderr.String()
	}
	keys := t.TempDir()
	key, pub := writeKey(t, keys, 3, "")
	allowed := filepath.Join(keys, "allowed_signers")
	os.WriteFile(allowed, []byte("release@lfmq.test "+string(ssh.MarshalAuthorizedKey(pub))), 0o644)
	if code, out, stderr := exec1("release", "sign", "--release-dir", relA, "--key", key); code != exitOK {
		t.Fatalf("sign: exit %d\n%s%s", code, out, stderr)
	}
	publishArgs := func(dir string, extra ...string) []string {
		return append([]string{"publish", "--release-dir", dir, "--repo", publishRepo, "--endpoint", h.url}, extra...)
	}

	// A missing repository needs --create.
	if code, _, stderr := exec1(publishArgs(relA)...); code != exitFailure || !strings.Contains(stderr, "--create") {
		t.Fatalf("missing repository without --create: exit %d: %s", code, stderr)
	}
	code, out, stderr := exec1(publishArgs(relA, "--create")...)
	if code != exitOK {
		t.Fatalf("publish: exit %d\n%s%s", code, out, stderr)
	}
	t.Logf("lfmq publish:\n%s%s", stderr, out)
	for _, want := range []string{"verified " + relA, "created ", "committed ", "tagged v1", "checked: commit", "identical to " + relA, "release digest (sha256 of SHA256SUMS) ", "lfmq download " + h.url + "/" + publishRepo + " --revision v1 --cache-root DIR --allowed-signers FILE\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("publish output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "uploaded  checkpoint/global.safetensors (") || !strings.Contains(stderr, "uploaded  SHA256SUMS.sig") {
		t.Errorf("no per-file lines off a terminal:\n%s", stderr)
	}
	commits := len(h.srv.Commits(publishRepo, "main"))

	// Download by tag, checking the signature, and verify again: every
	// byte equal.
	cache := t.TempDir()
	if code, out, stderr := exec1("download", h.url+"/"+publishRepo, "--revision", "v1", "--cache-root", cache, "--allowed-signers", allowed); code != exitOK || !strings.Contains(out, "signature SHA256SUMS.sig: good") {
		t.Fatalf("download: exit %d\n%s%s", code, out, stderr)
	}
	got := filepath.Join(cache, strings.Replace(publishRepo, "/", "--", 1), "v1")
	if code, out, _ := exec1("verify", "--release-dir", got, "--allowed-signers", allowed, "--identity", "release@lfmq.test"); code != exitOK || !strings.Contains(out, "signature SHA256SUMS.sig: good") {
		t.Fatalf("verify of the download: exit %d\n%s", code, out)
	}
	for p := range listedFiles(t, relA) {
		want, _ := os.ReadFile(filepath.Join(relA, filepath.FromSlash(p)))
		have, err := os.ReadFile(filepath.Join(got, filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s: downloaded bytes differ (%v)", p, err)
		}
	}

	// Again: up to date, no commit.
	if code, out, stderr := exec1(publishArgs(relA)...); code != exitOK || !strings.Contains(out, "up to date") {
		t.Fatalf("republish: exit %d\n%s%s", code, out, stderr)
	}
	if n := len(h.srv.Commits(publishRepo, "main")); n != commits {
		t.Fatalf("republishing made %d commits", n-commits)
	}

	// One evidence file differs: one commit with exactly the differences.
	received := map[string]int64{}
	for p, sum := range listedFiles(t, relA) {
		if strings.HasPrefix(p, "checkpoint/") || strings.HasPrefix(p, "runtime/") {
			received[p] = h.srv.Received(sum)
		}
	}
	if code, out, stderr := exec1(publishArgs(relB)...); code != exitOK || !strings.Contains(out, "tagged v2") {
		t.Fatalf("publish B: exit %d\n%s%s", code, out, stderr)
	}
	history := h.srv.Commits(publishRepo, "main")
	if len(history) != commits+1 {
		t.Fatalf("publishing B made %d commits, want 1", len(history)-commits)
	}
	fa, fb := listedFiles(t, relA), listedFiles(t, relB)
	var changed, deleted []string
	for p, sum := range fb {
		if fa[p] != sum || p == sums.SumsFile {
			changed = append(changed, p)
		}
	}
	deleted = append(deleted, verify.SignatureFile) // B is not signed
	slices.Sort(changed)
	if !slices.Contains(changed, "evidence/quality.json") || slices.ContainsFunc(changed, func(p string) bool { return strings.HasPrefix(p, "checkpoint/") }) {
		t.Fatalf("the test releases differ unexpectedly: %v", changed)
	}
	if c := history[0]; !slices.Equal(c.Changed, changed) || !slices.Equal(c.Deleted, deleted) {
		t.Errorf("commit changed %v, deleted %v; want %v and %v", c.Changed, c.Deleted, changed, deleted)
	}
	for p, n := range received {
		if now := h.srv.Received(fb[p]); now != n {
			t.Errorf("%s was sent again: %d bytes before, %d after", p, n, now)
		}
	}

	// A tampered release is refused before anything is sent.
	bad := filepath.Join(t.TempDir(), "bad")
	bundletest.CopyDir(t, relB, bad)
	os.WriteFile(filepath.Join(bad, "evidence", "quality.json"), []byte(`{"kl": 0}`+"\n"), 0o644)
	before := len(h.srv.Requests())
	if code, out, _ := exec1(publishArgs(bad)...); code != exitMismatch || !strings.Contains(out, "evidence/quality.json") {
		t.Errorf("tampered release: exit %d\n%s", code, out)
	}
	if n := len(h.srv.Requests()); n != before {
		t.Errorf("a release that does not verify reached the hub (%d requests)", n-before)
	}
	// --revision may not contradict the release's own.
	if code, _, stderr := exec1(publishArgs(relB, "--revision", "v9")...); code != exitUsage || !strings.Contains(stderr, "built as revision v2") {
		t.Errorf("--revision v9 on a v2 release: exit %d %s", code, stderr)
	}
}

// TestPublishStaleAndInterrupted: a push by someone else between the
// read of the branch and the commit is refused with what to do; a
// dropped upload fails the run, and the rerun sends only what is missing.
func TestPublishStaleAndInterrupted(t *testing.T) {
	h := newTestHub(t)
	t.Setenv("HF_TOKEN", publishToken)
	relA, _ := publishReleases(t)
	args := []string{"publish", "--release-dir", relA, "--repo", publishRepo, "--endpoint", h.url, "--create", "--retries", "1"}
	files := listedFiles(t, relA)
	globalSum, layerSum := files["checkpoint/global.safetensors"], files["checkpoint/layer-00.safetensors"]
	st, err := os.Stat(filepath.Join(relA, "checkpoint", "layer-00.safetensors"))
	if err != nil {
		t.Fatal(err)
	}

	h.srv.DropUpload(layerSum, 0, st.Size()/3, 10) // every retry of the basic upload
	h.srv.DropUpload(globalSum, 2, 1000, 10)       // part 2 of the multipart upload
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), args, ios); code != exitFailure || !strings.Contains(stderr.String(), "layer-00.safetensors") || !strings.Contains(stderr.String(), "global.safetensors") {
		t.Fatalf("interrupted publish: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, c := range h.srv.Commits(publishRepo, "main") {
		if slices.Contains(c.Changed, "SHA256SUMS") {
			t.Fatalf("an interrupted publish committed the release: %+v", c)
		}
	}
	h.srv.Settle(200 * time.Millisecond)
	sent := map[string]int64{}
	for p, sum := range files {
		sent[p] = h.srv.Received(sum)
	}
	h.srv.ClearFaults()
	ios, stdout, stderr = testStreams()
	if code := run(context.Background(), args, ios); code != exitOK {
		t.Fatalf("rerun: exit %d\n%s%s", code, stdout, stderr)
	}
	for p, sum := range files {
		if !strings.HasPrefix(p, "checkpoint/") {
			continue
		}
		st, _ := os.Stat(filepath.Join(relA, filepath.FromSlash(p)))
		delta := h.srv.Received(sum) - sent[p]
		switch p {
		case "checkpoint/layer-00.safetensors", "checkpoint/global.safetensors":
			if delta <= 0 || delta > st.Size() {
				t.Errorf("%s: the rerun sent %d bytes, want at most its %d", p, delta, st.Size())
			}
		default:
			if delta != 0 {
				t.Errorf("%s: the rerun sent %d bytes of an object the hub had", p, delta)
			}
		}
	}

	// Someone pushes while we publish: refused, nothing lost, the rerun
	// publishes on the new head.
	_, relB := publishReleases(t)
	args[2] = relB
	h.srv.MoveBranchOnNextCommit(publishRepo, "main")
	heads := len(h.srv.Commits(publishRepo, "main"))
	ios, stdout, stderr = testStreams()
	if code := run(context.Background(), args, ios); code != exitFailure || !strings.Contains(stderr.String(), "run lfmq publish again") {
		t.Fatalf("stale parent: exit %d\n%s%s", code, stdout, stderr)
	}
	if n := len(h.srv.Commits(publishRepo, "main")); n != heads+1 { // only the other push
		t.Fatalf("after the stale publish: %d commits, want %d", n, heads+1)
	}
	ios, stdout, stderr = testStreams()
	if code := run(context.Background(), args, ios); code != exitOK || !strings.Contains(stdout.String(), "tagged v2") {
		t.Fatalf("rerun after stale: exit %d\n%s%s", code, stdout, stderr)
	}
}

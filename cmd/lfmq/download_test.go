package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/hub/hubtest"
	"github.com/lfmq/lfmq/release/bundle/bundletest"
	"github.com/lfmq/lfmq/verify"
)

func TestDownloadFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    downloadOptions
		wantErr string
	}{
		{"all", "https://hf.co/a/b --revision v1 --cache-root c --download-only --jobs 2 --json", downloadOptions{URL: "https://hf.co/a/b", Revision: "v1", CacheRoot: "c", DownloadOnly: true, Jobs: 2, JSON: true}, ""},
		{"defaults", "https://hf.co/a/b --revision v1 --cache-root c", downloadOptions{URL: "https://hf.co/a/b", Revision: "v1", CacheRoot: "c", Jobs: 4}, ""},
		{"no url", "--revision v1 --cache-root c", downloadOptions{}, "takes 1 argument"},
		{"no revision", "https://hf.co/a/b --cache-root c", downloadOptions{}, "--revision is required"},
		{"no cache", "https://hf.co/a/b --revision v1", downloadOptions{}, "--cache-root is required"},
		{"bad url", "ftp://x/a/b --revision v1 --cache-root c", downloadOptions{}, "want http(s)"},
		{"url of a page", "https://hf.co/a/b/tree/main --revision v1 --cache-root c", downloadOptions{}, "names a page of the repository (tree/…), not the repository: give https://hf.co/a/b"},
		{"bad revision", "https://hf.co/a/b --revision ../x --cache-root c", downloadOptions{}, "revision"},
		{"jobs", "https://hf.co/a/b --revision v1 --cache-root c --jobs 0", downloadOptions{}, "--jobs"},
		{"signed", "https://hf.co/a/b --revision v1 --cache-root c --allowed-signers as --identity me@x", downloadOptions{URL: "https://hf.co/a/b", Revision: "v1", CacheRoot: "c", Jobs: 4, AllowedSigners: "as", Identity: "me@x"}, ""},
		{"any signer", "https://hf.co/a/b --revision v1 --cache-root c --allowed-signers as", downloadOptions{URL: "https://hf.co/a/b", Revision: "v1", CacheRoot: "c", Jobs: 4, AllowedSigners: "as"}, ""},
		{"identity alone", "https://hf.co/a/b --revision v1 --cache-root c --identity me@x", downloadOptions{}, "--identity needs --allowed-signers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams()
			var got *downloadOptions
			err := executeWith(ios, newDownloadCmd(ios, func(o *downloadOptions) error { got = o; return nil }), append([]string{"download"}, strings.Fields(tt.args)...)...)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.URL != tt.want.URL || got.Revision != tt.want.Revision || got.CacheRoot != tt.want.CacheRoot ||
				got.DownloadOnly != tt.want.DownloadOnly || got.Jobs != tt.want.Jobs || got.JSON != tt.want.JSON ||
				got.AllowedSigners != tt.want.AllowedSigners || got.Identity != tt.want.Identity {
				t.Errorf("options %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestDownloadRun(t *testing.T) {
	rel := bundletest.Release(t, nil)
	hub := hubtest.New(rel, "lfmq/tiny", "v1")
	srv := httptest.NewServer(hub)
	defer srv.Close()
	cache := t.TempDir()
	runDownload := func(args ...string) (int, string, string) {
		stdout, stderr, err := downloadFrom(srv, cache, args...)
		return exitCode(err), stdout, stderr
	}
	code, out, errOut := runDownload("--download-only")
	if code != 0 || !strings.Contains(out, "OK: release tiny-lfm2-moe-lfmq1-v1") || !strings.Contains(out, filepath.Join(cache, "lfmq--tiny", "v1")) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out, "check it again at any time with") {
		t.Error("--download-only printed the follow-up hint")
	}
	code, out, _ = runDownload()
	if code != 0 || !strings.Contains(out, "0 fetched") || !strings.Contains(out, "check it again at any time with") ||
		!strings.Contains(out, "serve it with: lfmq launch --cache-root "+cache+" --repo lfmq/tiny --revision v1") {
		t.Errorf("rerun: exit %d\n%s", code, out)
	}
	hub.Corrupt("LICENSE", 3)
	code, out, _ = runDownload("--download-only")
	if code != 0 {
		t.Errorf("a good local copy was replaced: exit %d\n%s", code, out)
	}
	cache = t.TempDir()
	code, out, errOut = runDownload("--download-only")
	if code != exitMismatch || !strings.Contains(out, "re-fetch:\nLICENSE\n") || !strings.Contains(errOut, "LICENSE: hash mismatch") {
		t.Errorf("corrupted file: exit %d\n%s\n%s", code, out, errOut)
	}
	// A revision the hub does not have: the error alone, no summary of a
	// download into a directory that was never made.
	code, out, errOut = runDownload("--revision", "v9")
	if code != exitFailure || out != "" || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("no such revision: exit %d\nstdout %q\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(cache, "lfmq--tiny", "v9")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a directory was made for a revision the hub does not have: %v", err)
	}
}

// TestDownloadSigned: a signed release keeps its signature through a
// download, and --allowed-signers [--identity] checks it before any listed
// file is fetched: an unsigned release, a tampered or foreign signature
// and an oversized one are refused with exit 3 and what to do, a hub error
// on the signature exits 1 naming its URL, and a good one is reported and
// carried into the printed follow-up commands.
func TestDownloadSigned(t *testing.T) {
	signed, allowed := signedRelease(t, "")
	malformed := filepath.Join(t.TempDir(), "allowed_signers.malformed")
	os.WriteFile(malformed, []byte("release@lfmq.test ssh-ed25519\n"), 0o644)
	const commit = "89abcdef0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, dir string, h *hubtest.Hub)
		args    []string
		code    int
		// out and errOut must appear on stdout and stderr, not on neither.
		out, errOut, not []string
		// fetched: files SHA256SUMS lists were asked for.
		fetched bool
	}{
		{"signed, checked", nil, []string{"--allowed-signers", allowed, "--identity", "release@lfmq.test"}, exitOK,
			[]string{"signature SHA256SUMS.sig: good, ssh-ed25519 key ", " of release@lfmq.test\n",
				"check it again at any time with: lfmq verify --release-dir DIR --allowed-signers " + allowed + " --identity release@lfmq.test\n",
				"serve it with: lfmq launch --cache-root CACHE --repo lfmq/tiny --revision v1 --allowed-signers " + allowed + " --identity release@lfmq.test\n"}, nil, nil, true},
		{"signed, any principal", nil, []string{"--allowed-signers", allowed}, exitOK,
			[]string{"signature SHA256SUMS.sig: good", "--revision v1 --allowed-signers " + allowed + "\n"}, nil, nil, true},
		{"signed, not checked", nil, nil, exitOK, []string{"--revision v1\n"}, nil, []string{"signature SHA256SUMS.sig", "--allowed-signers"}, true},
		{"unsigned", func(t *testing.T, dir string, _ *hubtest.Hub) {
			os.Remove(filepath.Join(dir, verify.SignatureFile))
		}, []string{"--allowed-signers", allowed, "--identity", "release@lfmq.test"}, exitMismatch, nil,
			[]string{"lfmq: verify: SHA256SUMS.sig: signature: absent", "refused before fetching", "what to do: get the release with its signature", "or leave out --allowed-signers"}, nil, false},
		{"unsigned, JSON", func(t *testing.T, dir string, _ *hubtest.Hub) {
			os.Remove(filepath.Join(dir, verify.SignatureFile))
		}, []string{"--allowed-signers", allowed, "--json"}, exitMismatch,
			[]string{`"dir": "DIR"`, `"path": "SHA256SUMS.sig"`, `"kind": "signature"`, `"refetch": []`},
			[]string{"refused before fetching"}, nil, false},
		{"tampered signature", func(t *testing.T, dir string, _ *hubtest.Hub) {
			bundletest.TamperSignature(t, dir)
		}, []string{"--allowed-signers", allowed}, exitMismatch, nil,
			[]string{"lfmq: verify: SHA256SUMS.sig: signature: ", "what to do: do not use this release", allowed + " does not grant"}, nil, false},
		{"another principal", nil, []string{"--allowed-signers", allowed, "--identity", "other@lfmq.test"}, exitMismatch, nil,
			[]string{"not allowed for identity", "what to do: do not use this release"}, nil, false},
		{"hub error on the signature", func(t *testing.T, _ string, h *hubtest.Hub) {
			h.Fail(verify.SignatureFile, http.StatusForbidden, 1)
		}, []string{"--allowed-signers", allowed}, exitFailure, nil,
			[]string{"/lfmq/tiny/resolve/" + commit + "/SHA256SUMS.sig: HTTP 403 Forbidden"}, nil, false},
		{"oversized signature", func(t *testing.T, dir string, _ *hubtest.Hub) {
			os.WriteFile(filepath.Join(dir, verify.SignatureFile), bytes.Repeat([]byte("A"), 65<<10), 0o644)
		}, nil, exitMismatch, nil,
			[]string{"/lfmq/tiny/resolve/" + commit + "/SHA256SUMS.sig serves more than 65536 bytes"}, nil, false},
		{"unreadable allowed signers", nil, []string{"--allowed-signers", malformed}, exitFailure, nil,
			[]string{"allowed_signers.malformed line 1"}, nil, false},
		{"missing allowed signers", nil, []string{"--allowed-signers", allowed + ".missing"}, exitUsage, nil,
			[]string{"--allowed-signers " + allowed + ".missing: no such file"}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rel := filepath.Join(t.TempDir(), "release")
			bundletest.CopyDir(t, signed, rel)
			hub := hubtest.New(rel, "lfmq/tiny", "v1")
			hub.Commit = commit
			if c.prepare != nil {
				c.prepare(t, rel, hub)
			}
			srv := httptest.NewServer(hub)
			defer srv.Close()
			cache := t.TempDir()
			stdout, stderrText, err := downloadFrom(srv, cache, c.args...)
			stderr := bytes.NewBufferString(stderrText)
			dir := filepath.Join(cache, "lfmq--tiny", "v1")
			out := strings.NewReplacer(dir, "DIR", cache, "CACHE").Replace(stdout)
			if code := exitCode(err); code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, c.code, out, stderr)
			}
			for _, want := range c.out {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			for _, want := range c.errOut {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			for _, bad := range c.not {
				if strings.Contains(out+stderr.String(), bad) {
					t.Errorf("output has %q:\n%s%s", bad, out, stderr)
				}
			}
			fetched := false
			for _, r := range hub.Requests() {
				fetched = fetched || r.Path != "SHA256SUMS" && r.Path != verify.SignatureFile
				if r.Path == verify.SignatureFile && r.Revision != commit {
					t.Errorf("signature fetched at %s, want the commit of SHA256SUMS", r.Revision)
				}
			}
			if fetched != c.fetched {
				t.Errorf("listed files fetched: %v, want %v", fetched, c.fetched)
			}
			if c.code != exitOK {
				if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS")); err == nil {
					t.Error("SHA256SUMS of a refused release was kept")
				}
				return
			}
			// The signature survived: lfmq verify checks the download.
			want, _ := os.ReadFile(filepath.Join(rel, verify.SignatureFile))
			if got, err := os.ReadFile(filepath.Join(dir, verify.SignatureFile)); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("downloaded signature %q, %v", got, err)
			}
			ios, vout, _ := testStreams()
			if code := run(context.Background(), []string{"verify", "--release-dir", dir, "--allowed-signers", allowed, "--identity", "release@lfmq.test"}, ios); code != exitOK {
				t.Errorf("verify of the download: exit %d\n%s", code, vout)
			}
		})
	}
}

// downloadFrom runs 'lfmq download SRV/lfmq/tiny --revision v1 --cache-root
// cache ARGS' against the test hub srv, printing an error as run does
// (unless the command already showed it), and returns what the command
// wrote to stdout and stderr and its error.
func downloadFrom(srv *httptest.Server, cache string, args ...string) (stdout, stderr string, err error) {
	ios, out, errOut := testStreams()
	root := newRootCmd(ios)
	root.RemoveCommand(findCmd(root, "download"))
	root.AddCommand(newDownloadCmd(ios, func(o *downloadOptions) error {
		o.HTTPClient = func() *http.Client { return srv.Client() }
		return downloadRun(root, o)
	}))
	root.SetArgs(append([]string{"download", srv.URL + "/lfmq/tiny", "--revision", "v1", "--cache-root", cache}, args...))
	err = root.ExecuteContext(context.Background())
	var shown *reportedError
	if err != nil && !errors.As(err, &shown) {
		ios.Errorf("lfmq: %v\n", err)
	}
	return out.String(), errOut.String(), err
}

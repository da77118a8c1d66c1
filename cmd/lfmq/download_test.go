package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/verify/bundle/bundletest"
	"github.com/lfmq/lfmq/verify/download/hubtest"
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
		{"bad revision", "https://hf.co/a/b --revision ../x --cache-root c", downloadOptions{}, "revision"},
		{"jobs", "https://hf.co/a/b --revision v1 --cache-root c --jobs 0", downloadOptions{}, "--jobs"},
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
				got.DownloadOnly != tt.want.DownloadOnly || got.Jobs != tt.want.Jobs || got.JSON != tt.want.JSON {
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
		ios, stdout, stderr := testStreams()
		root := newRootCmd(ios)
		root.RemoveCommand(findCmd(root, "download"))
		root.AddCommand(newDownloadCmd(ios, func(o *downloadOptions) error {
			o.HTTPClient = func() *http.Client { return srv.Client() }
			return downloadRun(root, o)
		}))
		root.SetArgs(append([]string{"download", srv.URL + "/lfmq/tiny", "--revision", "v1", "--cache-root", cache}, args...))
		err := root.ExecuteContext(context.Background())
		if err != nil {
			ios.Errorf("lfmq: %v\n", err)
		}
		return exitCode(err), stdout.String(), stderr.String()
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
}

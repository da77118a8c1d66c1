package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/verify/bundle/bundletest"
)

func TestVerifyFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    verifyOptions
		wantErr string
	}{
		{"release", "--release-dir r --deep --json --workers 2", verifyOptions{ReleaseDir: "r", Deep: true, JSON: true, Workers: 2}, ""},
		{"sums", "--sums SHA256SUMS", verifyOptions{Sums: "SHA256SUMS"}, ""},
		{"neither", "", verifyOptions{}, "--release-dir or --sums is required"},
		{"both", "--release-dir r --sums s", verifyOptions{}, "cannot be combined"},
		{"deep sums", "--sums s --deep", verifyOptions{}, "--deep applies to --release-dir only"},
		{"workers", "--release-dir r --workers -1", verifyOptions{}, "--workers"},
		{"stray", "--release-dir r x", verifyOptions{}, "takes no arguments"},
		{"signed release", "--release-dir r --allowed-signers as --identity me@x", verifyOptions{ReleaseDir: "r", AllowedSigners: "as", Identity: "me@x"}, ""},
		{"any signer", "--release-dir r --allowed-signers as", verifyOptions{ReleaseDir: "r", AllowedSigners: "as"}, ""},
		{"identity alone", "--release-dir r --identity me@x", verifyOptions{}, "--identity needs --allowed-signers"},
		{"signers with sums", "--sums s --allowed-signers as", verifyOptions{}, "--allowed-signers applies to --release-dir only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams()
			var got *verifyOptions
			err := executeWith(ios, newVerifyCmd(ios, func(o *verifyOptions) error { got = o; return nil }), append([]string{"verify"}, strings.Fields(tt.args)...)...)
			if tt.wantErr != "" {
				wantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			if *got != tt.want {
				t.Errorf("options %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestVerifyRun(t *testing.T) {
	dir := bundletest.Release(t, nil)

	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", dir, "--deep"}, ios); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout.String(), "OK: release tiny-lfm2-moe-lfmq1-v1") || !strings.Contains(stdout.String(), "every tensor checked") {
		t.Errorf("stdout %q", stdout)
	}

	// Damage: a flipped byte, a truncated file, a deleted one, an extra one.
	p := filepath.Join(dir, "checkpoint", "experts-03.safetensors")
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
	b, _ = os.ReadFile(filepath.Join(dir, "README.md"))
	os.WriteFile(filepath.Join(dir, "README.md"), b[:10], 0o644)
	os.Remove(filepath.Join(dir, "LICENSE"))
	os.WriteFile(filepath.Join(dir, "stray.bin"), []byte("x"), 0o644)

	ios, stdout, stderr = testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", dir}, ios); code != exitMismatch {
		t.Fatalf("exit %d, want %d: %s", code, exitMismatch, stderr)
	}
	out := stdout.String()
	for _, want := range []string{
		"hash      checkpoint/experts-03.safetensors", "size      README.md", "missing   LICENSE", "extra     stray.bin",
		"FAILED: release tiny-lfm2-moe-lfmq1-v1", "(1 missing, 1 size, 1 hash, 1 extra)",
		"re-fetch:\nLICENSE\nREADME.md\ncheckpoint/experts-03.safetensors\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "lfmq: verify: 4 finding(s)") {
		t.Errorf("stderr %q", stderr)
	}

	ios, stdout, _ = testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", dir, "--json"}, ios); code != exitMismatch {
		t.Fatalf("--json exit %d", code)
	}
	var rep struct {
		OK       bool
		Refetch  []string
		Findings []struct {
			Kind, Path, Authority string
			ExpectedSHA256        *string `json:"expected_sha256"`
			ActualSHA256          *string `json:"actual_sha256"`
			ExpectedSize          *int64  `json:"expected_size"`
			ActualSize            *int64  `json:"actual_size"`
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if rep.OK || len(rep.Findings) != 4 || len(rep.Refetch) != 3 {
		t.Errorf("report %+v", rep)
	}

	// Operational failure: exit 1.
	ios, _, _ = testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", filepath.Join(dir, "nope")}, ios); code != exitFailure {
		t.Errorf("missing directory: exit %d", code)
	}
}

func TestVerifySums(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("alpha"), 0o644)
	list := "8ed3f6ad685b959ead7022518e1af76cd816f8e8ec7ccdda1ed4018e8f2223f8  a\n"
	os.WriteFile(filepath.Join(dir, "SUMS"), []byte(list), 0o644)
	ios, stdout, stderr := testStreams()
	if code := run(context.Background(), []string{"verify", "--sums", filepath.Join(dir, "SUMS")}, ios); code != exitOK {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	os.WriteFile(filepath.Join(dir, "SUMS"), []byte(list+list[:64]+"  ../etc/passwd\n"), 0o644)
	ios, stdout, _ = testStreams()
	if code := run(context.Background(), []string{"verify", "--sums", filepath.Join(dir, "SUMS")}, ios); code != exitMismatch || !strings.Contains(stdout.String(), "unsafe    SUMS") {
		t.Errorf("traversal: exit %d\n%s", code, stdout)
	}
}

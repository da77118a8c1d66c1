package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/release/bundle/bundletest"
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
	if stderr.Len() != 0 {
		t.Errorf("stderr repeats the report: %q", stderr)
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

	// A --release-dir that names nothing is the command line's fault.
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"verify", "--release-dir", filepath.Join(dir, "nope")}, ios); code != exitUsage || !strings.Contains(stderr.String(), "no such directory") {
		t.Errorf("missing directory: exit %d: %s", code, stderr)
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

	// Every message names the list as given, not its base name alone.
	absent := filepath.Join(dir, "x")
	ios, _, stderr = testStreams()
	if code := run(context.Background(), []string{"verify", "--sums", absent}, ios); code != exitUsage || stderr.String() != "lfmq: --sums "+absent+": no such file\n" {
		t.Errorf("absent list: exit %d, stderr %q", code, stderr)
	}
	os.WriteFile(absent, []byte(list[:64]+"  gone\n"), 0o644)
	ios, stdout, _ = testStreams()
	if code := run(context.Background(), []string{"verify", "--sums", absent}, ios); code != exitMismatch || !strings.Contains(stdout.String(), "(per "+absent+")") || !strings.Contains(stdout.String(), "FAILED: "+absent+": ") {
		t.Errorf("missing file: exit %d\n%s", code, stdout)
	}
}

// TestVerifyReport checks what lfmq verify prints for a release, clean or
// damaged: each finding's expected (a list's claim) and actual (the file on
// disk), the count of a clean release, the summary exactly once (on
// stdout; stderr stays empty), and the re-fetch list in both the text and
// the --json report.
func TestVerifyReport(t *testing.T) {
	base := bundletest.Release(t, nil)
	sumHex := func(b []byte) string {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(base, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	license, notice, list := read("LICENSE"), read("NOTICE"), read("SHA256SUMS")
	changed := append(slices.Clone(license), "changed\n"...)
	listed := strings.Count(string(list), "\n")

	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		code   int
		// want are substrings of stdout; absent must not be in it.
		want, absent []string
		refetch      []string
	}{
		{"clean", func(*testing.T, string) {}, exitOK,
			[]string{fmt.Sprintf(": %d files listed in SHA256SUMS (", listed), "), plus SHA256SUMS itself, verified\n"}, nil, nil},
		{"SHA256SUMS edited for a changed file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "LICENSE"), changed, 0o644)
			p := filepath.Join(dir, "SHA256SUMS")
			os.WriteFile(p, []byte(strings.Replace(string(list), sumHex(license)+"  LICENSE\n", sumHex(changed)+"  LICENSE\n", 1)), 0o644)
		}, exitMismatch, []string{"disagree  LICENSE\n" +
			"          expected sha256 " + sumHex(changed) + " (per SHA256SUMS)\n" +
			fmt.Sprintf("          actual   sha256 %s, %d bytes (on disk)\n", sumHex(changed), len(changed)) +
			fmt.Sprintf("          runtime-release.json says sha256 %s, %d bytes\n", sumHex(license), len(license)),
		}, []string{"size      LICENSE"}, []string{"LICENSE", "SHA256SUMS", "runtime-release.json"}},
		{"extra file", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "stray.bin"), []byte("x"), 0o644)
		}, exitMismatch, []string{"extra     stray.bin\n          actual   sha256 " + sumHex([]byte("x")) + ", 1 bytes (on disk)\n          not listed\n"},
			[]string{"sha256 ?"}, nil},
		{"renamed file", func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, "NOTICE"), filepath.Join(dir, "NOTICE.txt"))
		}, exitMismatch, []string{
			"missing   NOTICE\n" + fmt.Sprintf("          expected sha256 %s, %d bytes (per SHA256SUMS)\n", sumHex(notice), len(notice)) + "          same bytes as extra NOTICE.txt\n",
			"extra     NOTICE.txt\n" + fmt.Sprintf("          actual   sha256 %s, %d bytes (on disk)\n", sumHex(notice), len(notice)) + "          not listed; same bytes as missing NOTICE\n",
		}, nil, []string{"NOTICE"}},
		{"missing SHA256SUMS", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "SHA256SUMS"))
		}, exitMismatch, []string{"missing   SHA256SUMS\n", "1 finding(s) (1 missing)"}, []string{"extra"}, []string{"SHA256SUMS"}},
		{"size", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "LICENSE"), changed, 0o644)
		}, exitMismatch, []string{"size      LICENSE\n" +
			fmt.Sprintf("          expected sha256 %s, %d bytes (per runtime-release.json)\n", sumHex(license), len(license)) +
			fmt.Sprintf("          actual   %d bytes (on disk, not hashed: the size differs)\n", len(changed)),
		}, nil, []string{"LICENSE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "r")
			bundletest.CopyDir(t, base, dir)
			tt.damage(t, dir)

			ios, stdout, stderr := testStreams()
			if code := run(context.Background(), []string{"verify", "--release-dir", dir}, ios); code != tt.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.code, stdout, stderr)
			}
			out := stdout.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out, a) {
					t.Errorf("stdout has %q:\n%s", a, out)
				}
			}
			summary := "OK: "
			if tt.code != exitOK {
				summary = "FAILED: "
			}
			if n := strings.Count(out+stderr.String(), summary); n != 1 || stderr.Len() != 0 {
				t.Errorf("summary printed %d times; stderr %q", n, stderr)
			}
			if len(tt.refetch) > 0 && !strings.Contains(out, "re-fetch:\n"+strings.Join(tt.refetch, "\n")+"\n") {
				t.Errorf("stdout lacks the re-fetch list %v:\n%s", tt.refetch, out)
			}

			// --json: the same re-fetch list; the one human line is the
			// error on stderr.
			ios, stdout, stderr = testStreams()
			if code := run(context.Background(), []string{"verify", "--release-dir", dir, "--json"}, ios); code != tt.code {
				t.Fatalf("--json: exit %d, want %d", code, tt.code)
			}
			var rep struct{ Refetch []string }
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("--json output: %v\n%s", err, stdout)
			}
			if rep.Refetch == nil || !slices.Equal(rep.Refetch, tt.refetch) {
				t.Errorf("--json re-fetch %v, want %v", rep.Refetch, tt.refetch)
			}
			if n := strings.Count(stderr.String(), "\n"); tt.code != exitOK && (n != 1 || !strings.HasPrefix(stderr.String(), "lfmq: verify: ")) {
				t.Errorf("--json stderr %q", stderr)
			}
		})
	}
}

// TestReleaseDirNotARelease: a --release-dir with neither
// runtime-release.json nor SHA256SUMS is not a release at all, and every
// command that takes one says so (exit 2) instead of verifying the tree
// and reporting each file as extra (exit 3). A release that lost one of
// its two lists is still a damaged release (exit 3, the list missing), as
// docs/release.md's findings table says.
func TestReleaseDirNotARelease(t *testing.T) {
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty")
	os.MkdirAll(empty, 0o755)
	tree := filepath.Join(tmp, "tree")
	os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	os.WriteFile(filepath.Join(tree, "a.txt"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(tree, "sub", "b.txt"), []byte("b"), 0o644)
	key := filepath.Join(tmp, "key")
	os.WriteFile(key, []byte("not used"), 0o600)
	token := filepath.Join(tmp, "token")
	os.WriteFile(token, []byte("hf_x\n"), 0o600)

	for _, dir := range []string{empty, tree, tinyModel} {
		want := "--release-dir " + dir + ": not a release: it has neither runtime-release.json nor SHA256SUMS (lfmq release build makes a release, lfmq download fetches one)\n"
		for _, args := range [][]string{
			{"verify", "--release-dir", dir},
			{"verify", "--release-dir", dir, "--json"},
			{"launch", "--release-dir", dir, "--print-command"},
			{"release", "sign", "--release-dir", dir, "--key", key},
			{"publish", "--release-dir", dir, "--repo", "o/n", "--endpoint", "http://127.0.0.1:1", "--token-file", token},
		} {
			ios, stdout, stderr := testStreams()
			if code := run(context.Background(), args, ios); code != exitUsage || stderr.String() != "lfmq: "+want || stdout.Len() != 0 {
				t.Errorf("%v: exit %d, want %d with %q\nstdout %q\nstderr %q", args, code, exitUsage, want, stdout, stderr)
			}
		}
	}

	base := bundletest.Release(t, nil)
	for _, lost := range []string{"runtime-release.json", "SHA256SUMS"} {
		dir := filepath.Join(t.TempDir(), "r")
		bundletest.CopyDir(t, base, dir)
		os.Remove(filepath.Join(dir, lost))
		ios, stdout, stderr := testStreams()
		if code := run(context.Background(), []string{"verify", "--release-dir", dir}, ios); code != exitMismatch || !strings.Contains(stdout.String(), "missing   "+lost+"\n") {
			t.Errorf("release without %s: exit %d, want %d with it missing\n%s%s", lost, code, exitMismatch, stdout, stderr)
		}
	}
}

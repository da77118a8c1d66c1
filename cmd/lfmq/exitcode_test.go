package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/release/bundle/bundletest"
)

// TestExitCodes holds the rule of docs/cli.md, one class at a time: 2 when
// the command line cannot work as given, 1 when the run fails or an input
// file's content is bad, 3 when verification fails.
func TestExitCodes(t *testing.T) {
	tmp := t.TempDir()
	notEmpty := filepath.Join(tmp, "not-empty")
	os.MkdirAll(notEmpty, 0o755)
	os.WriteFile(filepath.Join(notEmpty, "keep.txt"), []byte("mine"), 0o644)
	emptyCorpus := filepath.Join(tmp, "empty.jsonl")
	os.WriteFile(emptyCorpus, nil, 0o644)
	garbageCorpus := filepath.Join(tmp, "garbage.jsonl")
	os.WriteFile(garbageCorpus, []byte("this is not JSON\n"), 0o644)
	tampered := filepath.Join(tmp, "release")
	bundletest.CopyDir(t, bundletest.Release(t, nil), tampered)
	notice := filepath.Join(tampered, "NOTICE")
	data, _ := os.ReadFile(notice)
	os.WriteFile(notice, append(data, '!'), 0o644)

	brokenManifest := filepath.Join(tmp, "ckpt")
	ios0, _, stderr0 := testStreams()
	if code := run(context.Background(), []string{"quantize", "--model", tinyModel, "--out", brokenManifest, "--method", "rtn"}, ios0); code != 0 {
		t.Fatalf("quantize: %s", stderr0)
	}
	os.WriteFile(filepath.Join(brokenManifest, "manifest.json"), []byte("{"), 0o644)
	noManifest := filepath.Join(tmp, "no-manifest")
	copyDir(t, brokenManifest, noManifest)
	os.Remove(filepath.Join(noManifest, "manifest.json"))

	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := fmt.Sprint(held.Addr().(*net.TCPAddr).Port)

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		// A typo gets the word meant.
		{"misspelt command", []string{"quantise"}, exitUsage, `unknown command "quantise" for "lfmq"; did you mean "quantize"?`},
		{"misspelt sub-command", []string{"release", "buld"}, exitUsage, `unknown command "buld" for "lfmq release"; did you mean "build"?`},
		{"misspelt flag", []string{"serve", "--modle", "x"}, exitUsage, "unknown flag: --modle; did you mean --model? (see 'lfmq serve --help')"},
		{"another tool's flag", []string{"launch", "--release-dir", tmp, "--dry-run"}, exitUsage, "unknown flag: --dry-run; did you mean --print-command?"},
		{"unknown flag, nothing close", []string{"generate", "--frobnicate"}, exitUsage, "unknown flag: --frobnicate (see 'lfmq generate --help')"},
		{"unknown help topic", []string{"help", "foo"}, exitUsage, `unknown help topic "foo"`},
		{"unknown shell", []string{"completion", "tcsh"}, exitUsage, `unknown shell "tcsh"`},
		{"no shell", []string{"completion"}, exitUsage, "give a shell"},
		{"unknown flag", []string{"verify", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{"missing flag", []string{"generate", "--prompt", "x"}, exitUsage, "--model is required"},
		{"conflicting flags", []string{"generate", "--model", tinyModel, "--prompt", "a", "--chat", "[]"}, exitUsage, "exactly one of --prompt and --chat"},
		{"no such model", []string{"generate", "--model", filepath.Join(tmp, "nope"), "--prompt", "x"}, exitUsage, "no such directory"},
		{"no such release", []string{"verify", "--release-dir", filepath.Join(tmp, "nope")}, exitUsage, "no such directory"},
		{"output not empty", []string{"quantize", "--model", tinyModel, "--out", notEmpty, "--method", "rtn"}, exitUsage, "exists and is not empty"},
		{"empty corpus", []string{"score", "--reference", tinyModel, "--noise-floor", "--corpus", "e=" + emptyCorpus}, exitFailure, "has no records"},
		{"garbage corpus", []string{"score", "--reference", tinyModel, "--noise-floor", "--corpus", "g=" + garbageCorpus}, exitFailure, "not a JSON object"},
		{"not a checkpoint", []string{"generate", "--model", tmp, "--prompt", "x"}, exitUsage, "--model " + tmp + ": not a checkpoint directory (no config.json)"},
		{"not a reference", []string{"score", "--reference", tmp, "--noise-floor", "--corpus", "e=" + emptyCorpus}, exitUsage, "--reference " + tmp + ": not a checkpoint directory"},
		{"not a candidate", []string{"score", "--reference", tinyModel, "--candidate", "q=" + tmp, "--corpus", "e=" + emptyCorpus}, exitUsage, "--candidate q=" + tmp + ": not a checkpoint directory"},
		{"candidate server without http://", []string{"score", "--reference", tinyModel, "--candidate", "s=127.0.0.1:8000", "--corpus", "e=" + emptyCorpus}, exitUsage, "--candidate s=127.0.0.1:8000: no such directory; for a running server give http://127.0.0.1:8000"},
		{"not a model to quantize", []string{"quantize", "--model", tmp, "--out", filepath.Join(tmp, "o"), "--method", "rtn"}, exitUsage, "not a checkpoint directory"},
		// Another program holding the port is a failure of the run, not of
		// the command line (TestServeBadSetup); the message names the flag.
		{"port in use", []string{"serve", "--model", tinyModel, "--port", heldPort}, exitFailure, "--port: cannot listen on 127.0.0.1:" + heldPort + ": "},
		{"host that is no address", []string{"serve", "--model", tinyModel, "--host", "999.1.1.1", "--port", "0"}, exitFailure, "--host: cannot listen on 999.1.1.1:0: "},
		{"quantize an lfmq-1 checkpoint", []string{"quantize", "--model", brokenManifest, "--out", filepath.Join(tmp, "o"), "--method", "rtn"}, exitUsage, "--model " + brokenManifest + ": an lfmq-1 checkpoint (it has manifest.json); quantize takes the BF16 Hugging Face checkpoint"},
		{"not a model to serve", []string{"serve", "--model", tmp}, exitUsage, "not a checkpoint directory"},
		{"release of a source checkpoint", []string{"release", "build", "--checkpoint", tinyModel, "--out", filepath.Join(tmp, "r"), "--license", emptyCorpus, "--hub-repo", "a/b"}, exitUsage, "not an lfmq-1 checkpoint (no manifest.json)"},
		{"no such calibration file", []string{"quantize", "--model", tinyModel, "--out", filepath.Join(tmp, "o"), "--calib", filepath.Join(tmp, "nope.jsonl")}, exitUsage, "--calib " + filepath.Join(tmp, "nope.jsonl") + ": no such file"},
		{"eval corpus is a directory", []string{"quantize", "--model", tinyModel, "--out", filepath.Join(tmp, "o"), "--calib", emptyCorpus, "--eval-corpus", "d=" + tmp}, exitUsage, "--eval-corpus d=" + tmp + ": a directory, not a file"},
		{"no such corpus", []string{"score", "--reference", tinyModel, "--noise-floor", "--corpus", "c=" + filepath.Join(tmp, "nope.jsonl")}, exitUsage, "--corpus c=" + filepath.Join(tmp, "nope.jsonl") + ": no such file"},
		{"no release to launch", []string{"launch", "--release-dir", filepath.Join(tmp, "nope")}, exitUsage, "--release-dir " + filepath.Join(tmp, "nope") + ": no such directory"},
		{"no download to launch", []string{"launch", "--cache-root", tmp, "--repo", "o/n", "--revision", "v1"}, exitUsage, "holds no release o/n at revision v1"},
		{"no such chat file", []string{"generate", "--model", tinyModel, "--chat", "@" + filepath.Join(tmp, "nope.json")}, exitUsage, "--chat @" + filepath.Join(tmp, "nope.json") + ": no such file"},
		{"chat @ without a name", []string{"generate", "--model", tinyModel, "--chat", "@"}, exitUsage, "--chat @: give a file name after @"},
		{"no such tools file", []string{"generate", "--model", tinyModel, "--chat", `[{"role":"user","content":"x"}]`, "--tools", "@" + filepath.Join(tmp, "nope.json")}, exitUsage, "--tools @" + filepath.Join(tmp, "nope.json") + ": no such file"},
		{"no such schema file", []string{"generate", "--model", tinyModel, "--chat", `[{"role":"user","content":"x"}]`, "--json-schema", filepath.Join(tmp, "nope.json")}, exitUsage, "--json-schema " + filepath.Join(tmp, "nope.json") + ": no such file"},
		{"no such allowed signers", []string{"verify", "--release-dir", tampered, "--allowed-signers", filepath.Join(tmp, "nope")}, exitUsage, "--allowed-signers " + filepath.Join(tmp, "nope") + ": no such file"},
		{"no such API key file", []string{"serve", "--model", tinyModel, "--api-key-file", filepath.Join(tmp, "nope")}, exitUsage, "--api-key-file " + filepath.Join(tmp, "nope") + ": no such file"},
		{"API key file is a directory", []string{"launch", "--release-dir", tmp, "--api-key-file", tmp}, exitUsage, "--api-key-file " + tmp + ": a directory, not a file"},
		{"no such token file", []string{"publish", "--release-dir", tmp, "--repo", "o/n", "--token-file", filepath.Join(tmp, "nope")}, exitUsage, "--token-file " + filepath.Join(tmp, "nope") + ": no such file"},
		{"no such signing key", []string{"release", "sign", "--release-dir", tampered, "--key", filepath.Join(tmp, "nope")}, exitUsage, "--key " + filepath.Join(tmp, "nope") + ": no such file"},
		{"signing key is a directory", []string{"release", "sign", "--release-dir", tampered, "--key", tmp}, exitUsage, "--key " + tmp + ": a directory, not a file"},
		{"inspect a directory that is no checkpoint", []string{"inspect", notEmpty}, exitUsage, "checkpoint " + notEmpty + ": not a checkpoint directory"},
		// A release where a checkpoint goes, and a checkpoint where a
		// release goes, are mix-ups of directories that say what to give.
		{"release as --model", []string{"generate", "--model", tampered, "--prompt", "x"}, exitUsage, "--model " + tampered + ": a release, not a checkpoint: give its checkpoint, " + filepath.Join(tampered, "checkpoint")},
		{"release to inspect", []string{"inspect", tampered}, exitUsage, "a release, not a checkpoint"},
		{"release as --checkpoint", []string{"release", "build", "--checkpoint", tampered, "--out", filepath.Join(tmp, "r"), "--license", emptyCorpus, "--hub-repo", "a/b"}, exitUsage, "a release, not a checkpoint"},
		{"checkpoint to verify", []string{"verify", "--release-dir", brokenManifest}, exitUsage, "--release-dir " + brokenManifest + ": an lfmq-1 checkpoint, not a release"},
		{"checkpoint to launch", []string{"launch", "--release-dir", noManifest, "--print-command"}, exitUsage, "an lfmq-1 checkpoint, not a release"},
		{"changed release", []string{"verify", "--release-dir", tampered}, exitMismatch, ""},
		{"unreadable manifest", []string{"generate", "--model", brokenManifest, "--prompt", "x"}, exitMismatch, "manifest.json"},
		// A partial copy of an lfmq-1 checkpoint is not taken for a
		// Hugging Face checkpoint without weights.
		{"lfmq-1 checkpoint without its manifest", []string{"generate", "--model", noManifest, "--prompt", "x"}, exitMismatch, "manifest.json: missing"},
		{"inspect it", []string{"inspect", noManifest}, exitMismatch, "manifest.json: missing"},
		{"score it", []string{"score", "--reference", tinyModel, "--candidate", noManifest, "--corpus", "c=" + filepath.Join(filepath.Dir(tinyModel), "corpora", "chat.jsonl"), "--max-records", "1"}, exitMismatch, "manifest.json: missing"},
		{"quantize it", []string{"quantize", "--model", noManifest, "--out", filepath.Join(tmp, "o"), "--method", "rtn"}, exitUsage, "an lfmq-1 checkpoint (it has global.safetensors)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, stdout, stderr := testStreams()
			if code := run(context.Background(), tt.args, ios); code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("%v: exit %d, want %d with %q\n%s%s", tt.args, code, tt.code, tt.want, stdout, stderr)
			}
		})
	}
	// Ctrl-C says "interrupted", never "context canceled".
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ios, _, stderr := testStreams()
	if code := run(ctx, []string{"generate", "--model", tinyModel, "--prompt", "The", "--max-tokens", "4"}, ios); code != exitFailure ||
		!strings.Contains(stderr.String(), "interrupted") || strings.Contains(stderr.String(), "context canceled") {
		t.Errorf("interrupted generate: exit %d: %s", code, stderr)
	}
}

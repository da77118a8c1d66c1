package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputPaths: an output path that cannot be used (a file where a
// directory goes, a directory where a file goes, a file above either) is
// a usage error naming the flag, found before any work: score would
// otherwise run every model over every corpus and only then fail to
// write, with exit 1 and the writer's message.
func TestOutputPaths(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "a-file")
	os.WriteFile(file, []byte("x"), 0o644)
	corpus := filepath.Join(filepath.Dir(tinyModel), "corpora", "chat.jsonl")
	ckpt := filepath.Join(tmp, "ckpt")
	os.MkdirAll(ckpt, 0o755)
	os.WriteFile(filepath.Join(ckpt, "manifest.json"), []byte("{}"), 0o644)
	under := filepath.Join(file, "sub", "x")
	score := []string{"score", "--reference", tinyModel, "--candidate", "c=" + tinyModel, "--corpus", "chat=" + corpus, "--max-records", "1"}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"quantize --out a file", []string{"quantize", "--model", tinyModel, "--method", "rtn", "--out", file}, "--out " + file + ": exists and is not a directory"},
		{"quantize --out under a file", []string{"quantize", "--model", tinyModel, "--method", "rtn", "--out", under}, "--out " + under + ": " + file + " is a file, not a directory"},
		{"score --out a directory", append(score, "--out", tmp), "--out " + tmp + ": a directory; give the name of a file"},
		{"score --out under a file", append(score, "--out", under), "--out " + under + ": " + file + " is a file"},
		{"score --save-reference a directory", append(score, "--save-reference", tmp), "--save-reference " + tmp + ": a directory"},
		{"score --plot a file", append(score, "--plot", file), "--plot " + file + ": exists and is not a directory"},
		{"score --reference-cache missing", append(score, "--reference-cache", filepath.Join(tmp, "nope")), "--reference-cache " + filepath.Join(tmp, "nope") + ": no such file"},
		{"download --cache-root a file", []string{"download", "http://127.0.0.1:1/o/n", "--revision", "v1", "--cache-root", file}, "--cache-root " + file + ": exists and is not a directory"},
		{"serve --cache-dir a file", []string{"serve", "--model", tinyModel, "--port", "0", "--cache-dir", file}, "--cache-dir " + file + ": exists and is not a directory"},
		{"launch --cache-dir under a file", []string{"launch", "--release-dir", tmp, "--cache-dir", under}, "--cache-dir " + under + ": " + file + " is a file"},
		{"release build --out under a file", []string{"release", "build", "--checkpoint", ckpt, "--out", under, "--license", file, "--hub-repo", "a/b", "--base-model", "a/c"}, "--out " + under + ": " + file + " is a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, stdout, stderr := testStreams()
			if code := run(context.Background(), tt.args, ios); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("%v: exit %d, want %d with %q\n%s%s", tt.args, code, exitUsage, tt.want, stdout, stderr)
			}
			if stdout.Len() > 0 {
				t.Errorf("%v: stdout %q: the command ran before it checked its output", tt.args, stdout)
			}
		})
	}
}

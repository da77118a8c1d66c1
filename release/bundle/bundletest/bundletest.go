package bundletest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/quant"
	"github.com/lfmq/lfmq/release/bundle"
	"github.com/lfmq/lfmq/verify"
)

// License is the licence text of test releases (recognised as Apache 2.0).
const License = "Test licence for lfmq fixtures.\n\nApache License\nVersion 2.0, January 2004\n"

// BaseModel is the base model repo id of test releases.
const BaseModel = "test/tiny-lfm2-moe"

// HubRepo is the hub repo id test releases are built for.
const HubRepo = "test/tiny-lfm2-moe-lfmq1"

// Checkpoint quantizes the fixture model with RTN into a new temporary
// directory and returns it.
func Checkpoint(t testing.TB) string {
	t.Helper()
	root, err := bundle.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ckpt")
	if _, err := quant.Quantize(context.Background(), quant.Options{
		ModelDir: filepath.Join(root, "testdata", "tiny-lfm2-moe", "model"),
		OutDir:   out, Method: quant.RTN, CreatedBy: "lfmq quantize --method rtn",
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Drafter quantizes the fixture's DSpark drafter for the checkpoint ckpt
// (a Checkpoint) into ckpt's drafter/, as lfmq quantize --drafter does,
// measuring its acceptance on 2 records of the code corpus to stay quick,
// and returns that directory.
func Drafter(t testing.TB, ckpt string) string {
	t.Helper()
	root, err := bundle.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(ckpt, quant.DrafterDir)
	if _, err := quant.QuantizeDrafter(context.Background(), quant.DrafterOptions{
		SourceDir: filepath.Join(root, "testdata", "tiny-lfm2-moe-dspark", "model"),
		TargetDir: ckpt, OutDir: out, CreatedBy: "lfmq quantize --drafter --eval-corpus code --drafter-records 2",
		EvalCorpora: []quant.EvalCorpus{{Name: "code", Path: filepath.Join(root, "testdata", "tiny-lfm2-moe", "corpora", "code.jsonl")}},
		Setup:       quant.AcceptanceSetup{Records: 2},
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Source writes a minimal module (go.mod without requirements, a main
// package) into a new temporary directory and returns it.
func Source(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	files := map[string]string{
		"go.mod":             "module github.com/lfmq/lfmq\n\ngo 1.26.0\n",
		"go.sum":             "",
		"cmd/lfmq/main.go":   "package main\n\nfunc main() {}\n",
		"version/version.go": "package version\n\nvar Version, SourceDigest = \"dev\", \"\"\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// FakeBinary stands in for go build: the "binary" is a line naming the
// platform and the ldflags, so it still depends on the source digest.
func FakeBinary(_ context.Context, p bundle.Platform, _, ldflags, out string) error {
	return os.WriteFile(out, []byte("lfmq stand-in binary for "+p.String()+"\n"+ldflags+"\n"), 0o755)
}

// Options returns the options of a test release into out: the given
// checkpoint and source, linux/amd64 and darwin/arm64 stand-in binaries, a
// licence and a notice, published as HubRepo.
func Options(t testing.TB, ckpt, src, out string) bundle.Options {
	t.Helper()
	dir := t.TempDir()
	lic := filepath.Join(dir, "LICENSE")
	notice := filepath.Join(dir, "NOTICE")
	if err := os.WriteFile(lic, []byte(License), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notice, []byte("Test NOTICE.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return bundle.Options{
		CheckpointDir: ckpt, OutDir: out, SourceDir: src, Revision: "v1",
		BaseModel: BaseModel, HubRepo: HubRepo, LicenseFile: lic, NoticeFiles: []string{notice},
		Platforms: []bundle.Platform{{GOOS: "darwin", GOARCH: "arm64"}, {GOOS: "linux", GOARCH: "amd64"}},
		Version:   "0.0.0-test", BuildBinary: FakeBinary,
	}
}

// Release builds a test release into a new temporary directory and returns
// its path; edit, if not nil, changes the options first.
func Release(t testing.TB, edit func(*bundle.Options)) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "release")
	opts := Options(t, Checkpoint(t), Source(t), out)
	if edit != nil {
		edit(&opts)
	}
	if _, err := bundle.Build(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	return out
}

// CopyDir copies a release directory (regular files only) to dst.
func CopyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TamperSignature replaces one base64 letter inside the signature blob of
// dir's SHA256SUMS.sig: still armored base64, no longer the signature.
func TamperSignature(t testing.TB, dir string) {
	t.Helper()
	p := filepath.Join(dir, verify.SignatureFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	l := []byte(lines[3])
	if l[10] == 'A' {
		l[10] = 'B'
	} else {
		l[10] = 'A'
	}
	lines[3] = string(l)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ScoreEvidence is an evidence file (lfmq score --out) that scored one
// candidate, rtn, with the given manifest sha256: what a release's card
// shows as this checkpoint's figures.
func ScoreEvidence(t testing.TB, manifestSHA string) []byte {
	t.Helper()
	f := &evidence.File{Format: evidence.Format, Kind: evidence.KindScore, Results: []evidence.Result{
		{Candidate: "rtn", Kind: evidence.KindCandidate, Corpus: "chat", Stats: evidence.Stats{Tokens: 1234, PPLRef: 10, PPLCand: 10.5, KLMean: 0.01}},
	}}
	f.Receipts.Candidates = []evidence.Checkpoint{{Name: "rtn", Format: "lfmq-1", Identity: manifestSHA, ManifestSHA256: manifestSHA}}
	data, err := evidence.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

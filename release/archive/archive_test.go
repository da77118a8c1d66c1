package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fixedTree is a small source tree whose archive digest is pinned.
func fixedTree() []File {
	return []File{
		{Path: "go.mod", Data: []byte("module github.com/lfmq/lfmq\n\ngo 1.26.0\n")},
		{Path: "cmd/lfmq/main.go", Data: []byte("package main\n\nfunc main() {}\n")},
		{Path: "version/version.go", Data: []byte("package version\n\nvar Version = \"dev\"\n")},
		{Path: "scripts/gen.sh", Exec: true, Data: []byte("#!/bin/sh\necho hi\n")},
		{Path: "cmd/lfmq-extra.txt", Data: []byte("sorts before cmd/ ('-' < '/')\n")},
		{Path: "a/" + strings.Repeat("d", 120) + "/file.go", Data: []byte("package d\n")},
		{Path: "empty.txt", Data: nil},
	}
}

// goldenDigest is the sha256 of Write(fixedTree) under "lfmq-1.0.0" with
// klauspost/compress v1.20.4 at level 9. It changes only with the archive
// rules or the compressor version (then update it and say why).
const goldenDigest = "808cf62fc36b2713129ab4e80a290c1607f85c1aacf4691fc2734f5f2bed2bbc"

func TestGoldenDigest(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, "lfmq-1.0.0", fixedTree()); err != nil {
		t.Fatal(err)
	}
	// Input order must not matter.
	rev := fixedTree()
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if err := Write(&b, "lfmq-1.0.0", rev); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("archive bytes depend on the input order")
	}
	sum := sha256.Sum256(a.Bytes())
	if got := hex.EncodeToString(sum[:]); got != goldenDigest {
		t.Errorf("archive sha256 %s, golden %s", got, goldenDigest)
	}
}

// TestHeaders reads the archive with the standard library and checks every
// rule of docs/release.md, "Reproducibility".
func TestHeaders(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, "lfmq-1.0.0", fixedTree()); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	// gzip header: magic, deflate, no flags (no name), MTIME 0, XFL 2
	// (best compression), OS 255.
	if !bytes.Equal(raw[:10], []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255}) {
		t.Errorf("gzip header % x", raw[:10])
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() && zr.ModTime.Unix() != 0 {
		t.Errorf("gzip name %q mtime %v", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	dirs := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d/%d %q/%q", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if !h.ModTime.Equal(time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: times %v %v %v", h.Name, h.ModTime, h.AccessTime, h.ChangeTime)
		}
		want := int64(0o644)
		switch {
		case h.Typeflag == tar.TypeDir:
			want = 0o755
			dirs[h.Name] = true
		case h.Name == "lfmq-1.0.0/scripts/gen.sh":
			want = 0o755
		case h.Typeflag != tar.TypeReg:
			t.Errorf("%s: type %q", h.Name, h.Typeflag)
		}
		if h.Mode != want {
			t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, want)
		}
		if h.Typeflag == tar.TypeReg && !dirs[filepath.Dir(h.Name)+"/"] {
			t.Errorf("%s precedes its directory", h.Name)
		}
		if len(h.Name) <= 100 && h.Format != tar.FormatUSTAR && h.Format != tar.FormatUnknown {
			t.Errorf("%s: format %v", h.Name, h.Format)
		}
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("entries not sorted: %q before %q", names[i-1], names[i])
		}
	}
	if names[0] != "lfmq-1.0.0/" {
		t.Errorf("first entry %q", names[0])
	}
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, "lfmq-x", fixedTree()); err != nil {
		t.Fatal(err)
	}
	prefix, files, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if prefix != "lfmq-x" || len(files) != len(fixedTree()) {
		t.Fatalf("prefix %q, %d files", prefix, len(files))
	}
	// Extract and archive again: the same bytes (the archive is a fixed
	// point of extract + archive).
	dir := filepath.Join(t.TempDir(), "x")
	top, err := Extract(bytes.NewReader(buf.Bytes()), dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ReadDir(top)
	if err != nil {
		t.Fatal(err)
	}
	var buf2 bytes.Buffer
	if err := Write(&buf2, "lfmq-x", again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Error("extract + archive changed the bytes")
	}
}

func TestWriteRefuses(t *testing.T) {
	for name, files := range map[string][]File{
		"traversal":    {{Path: "../x"}},
		"absolute":     {{Path: "/x"}},
		"duplicate":    {{Path: "a"}, {Path: "a"}},
		"file and dir": {{Path: "a"}, {Path: "a/b"}},
		"odd name":     {{Path: "a b"}},
	} {
		if err := Write(io.Discard, "p", files); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if err := Write(io.Discard, "a/b", nil); err == nil {
		t.Error("a prefix with a slash was accepted")
	}
}

func tarGz(t testing.TB, entries ...*tar.Header) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(make([]byte, h.Size))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestReadRefuses(t *testing.T) {
	dir := &tar.Header{Name: "p/", Typeflag: tar.TypeDir, Mode: 0o755}
	reg := func(name string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}
	}
	tests := map[string][]byte{
		"not gzip":       []byte("hello"),
		"empty":          tarGz(t),
		"no top dir":     tarGz(t, reg("p/a")),
		"traversal":      tarGz(t, dir, reg("p/../../etc/passwd")),
		"absolute":       tarGz(t, dir, reg("/etc/passwd")),
		"outside prefix": tarGz(t, dir, reg("q/a")),
		"symlink":        tarGz(t, dir, &tar.Header{Name: "p/l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}),
		"hard link":      tarGz(t, dir, &tar.Header{Name: "p/l", Typeflag: tar.TypeLink, Linkname: "p/a"}),
		"device":         tarGz(t, dir, &tar.Header{Name: "p/d", Typeflag: tar.TypeChar}),
		"no parent dir":  tarGz(t, dir, reg("p/sub/a")),
		"duplicate":      tarGz(t, dir, reg("p/a"), reg("p/a")),
	}
	for name, data := range tests {
		if _, _, err := Read(bytes.NewReader(data)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	// Extract refuses an existing directory rather than merge into it.
	var buf bytes.Buffer
	Write(&buf, "p", []File{{Path: "a", Data: []byte("x")}})
	if _, err := Extract(bytes.NewReader(buf.Bytes()), t.TempDir()); err == nil {
		t.Error("Extract into an existing directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "p")); err == nil {
		t.Error("unexpected")
	}
}

// FuzzRead checks that the archive reader never panics, never returns an
// unsafe path, and that what it accepts re-archives and reads back equal.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, "lfmq-1.0.0", fixedTree())
	f.Add(buf.Bytes())
	f.Add(tarGz(f, &tar.Header{Name: "p/", Typeflag: tar.TypeDir}, &tar.Header{Name: "p/../x", Typeflag: tar.TypeReg}))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		prefix, files, err := Read(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := Write(&out, prefix, files); err != nil {
			t.Fatalf("accepted archive does not re-archive: %v", err)
		}
		p2, files2, err := Read(bytes.NewReader(out.Bytes()))
		if err != nil || p2 != prefix || len(files2) != len(files) {
			t.Fatalf("re-archived archive reads back differently: %v", err)
		}
	})
}

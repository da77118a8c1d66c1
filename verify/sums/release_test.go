package sums

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func sampleRelease() *RuntimeRelease {
	return &RuntimeRelease{
		Schema: Schema, ReleaseID: "LFM2-8B-A1B-lfmq1-v1", Revision: "v1",
		Lfmq: Lfmq{Version: "0.1.0", SourceSHA256: h2},
		Toolchain: Toolchain{Go: "go1.26.8", Flags: []string{"-trimpath", "-buildvcs=false"}, GOFLAGS: "-mod=vendor",
			Ldflags: "-s -w -buildid=", GOAMD64: "v1", GOARM64: "v8.0", KlauspostCompress: "v1.20.4"},
		BaseModel:  BaseModel{Repo: "LiquidAI/LFM2-8B-A1B"},
		Checkpoint: Checkpoint{Format: CheckpointFormat, Manifest: ManifestPath, ManifestSHA256: h1},
		Runtime: Runtime{
			Binaries: []Binary{{Platform: "linux/amd64", Path: "runtime/lfmq-linux-amd64", Size: 10, SHA256: h1}},
			Source:   File{Path: SourceArchivePath, Size: 5, SHA256: h2},
		},
		Files: []File{
			{Path: "README.md", Size: 3, SHA256: h1},
			{Path: ManifestPath, Size: 7, SHA256: h1},
			{Path: "runtime/lfmq-linux-amd64", Size: 10, SHA256: h1},
			{Path: SourceArchivePath, Size: 5, SHA256: h2},
		},
	}
}

func TestRuntimeReleaseRoundTrip(t *testing.T) {
	r := sampleRelease()
	data, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("}\n")) || !bytes.Contains(data, []byte(`  "base_model": {`)) {
		t.Errorf("not canonical:\n%s", data)
	}
	back, err := ParseRuntimeRelease(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.Marshal()
	if !bytes.Equal(data, again) {
		t.Error("round trip changed the bytes")
	}
	if b, ok := back.Binary("linux", "amd64"); !ok || b.SHA256 != h1 {
		t.Errorf("Binary(linux, amd64) = %+v, %v", b, ok)
	}
	if _, ok := back.Binary("darwin", "arm64"); ok {
		t.Error("Binary(darwin, arm64) found")
	}
}

func TestRuntimeReleaseErrors(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(r *RuntimeRelease)
		field  string
		unsafe bool
	}{
		{"schema", func(r *RuntimeRelease) { r.Schema = "x" }, "schema", false},
		{"release id", func(r *RuntimeRelease) { r.ReleaseID = "LFM2-v2" }, "release_id", false},
		{"revision", func(r *RuntimeRelease) { r.Revision = "a/b" }, "revision", false},
		{"source digest", func(r *RuntimeRelease) { r.Lfmq.SourceSHA256 = "00" }, "lfmq.source_sha256", false},
		{"cgo", func(r *RuntimeRelease) { r.Toolchain.CGOEnabled = true }, "toolchain.cgo_enabled", false},
		{"base repo", func(r *RuntimeRelease) { r.BaseModel.Repo = "x" }, "base_model.repo", false},
		{"base revision", func(r *RuntimeRelease) { r.BaseModel.Revision = "main" }, "base_model.revision", false},
		{"manifest path", func(r *RuntimeRelease) { r.Checkpoint.Manifest = "manifest.json" }, "checkpoint.manifest", false},
		{"manifest digest", func(r *RuntimeRelease) { r.Checkpoint.ManifestSHA256 = strings.ToUpper(h1) }, "checkpoint.manifest_sha256", false},
		{"traversal", func(r *RuntimeRelease) { r.Files[0].Path = "../README.md" }, "files[0].path", true},
		{"absolute", func(r *RuntimeRelease) { r.Files[0].Path = "/README.md" }, "files[0].path", true},
		{"negative size", func(r *RuntimeRelease) { r.Files[0].Size = -1 }, "files[0].size", false},
		{"unsorted", func(r *RuntimeRelease) { r.Files[0], r.Files[1] = r.Files[1], r.Files[0] }, "files[1].path", false},
		{"lists itself", func(r *RuntimeRelease) { r.Files[0].Path = "SHA256SUMS" }, "files[0].path", false},
		{"file and dir", func(r *RuntimeRelease) { r.Files[0].Path = "checkpoint" }, "files[1].path", false},
		{"binary not a file", func(r *RuntimeRelease) { r.Runtime.Binaries[0].SHA256 = h2 }, "runtime.binaries[0]", false},
		{"binary path", func(r *RuntimeRelease) { r.Runtime.Binaries[0].Path = "README.md" }, "runtime.binaries[0].path", false},
		{"platform", func(r *RuntimeRelease) { r.Runtime.Binaries[0].Platform = "linux" }, "runtime.binaries[0].platform", false},
		{"no binaries", func(r *RuntimeRelease) { r.Runtime.Binaries = nil }, "runtime.binaries", false},
		{"source path", func(r *RuntimeRelease) { r.Runtime.Source.Path = "README.md" }, "runtime.source.path", false},
		{"source digest pin", func(r *RuntimeRelease) { r.Lfmq.SourceSHA256 = h1 }, "runtime.source.sha256", false},
		{"no manifest", func(r *RuntimeRelease) { r.Files = append(r.Files[:1], r.Files[2:]...) }, "files", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleRelease()
			tt.edit(r)
			_, err := r.Marshal()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want *FieldError", err)
			}
			if fe.Field != tt.field {
				t.Errorf("field %q, want %q (%v)", fe.Field, tt.field, err)
			}
			if errors.Is(err, ErrUnsafePath) != tt.unsafe {
				t.Errorf("unsafe = %v, want %v", !tt.unsafe, tt.unsafe)
			}
		})
	}
}

func TestParseRuntimeReleaseStrict(t *testing.T) {
	good, err := sampleRelease().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"unknown key":   bytes.Replace(good, []byte(`"revision": "v1",`), []byte(`"revision": "v1", "x": 1,`), 1),
		"not canonical": bytes.ReplaceAll(good, []byte("  "), []byte("\t")),
		"no newline":    bytes.TrimSuffix(good, []byte("\n")),
		"trailing":      append(append([]byte{}, good...), []byte("{}\n")...),
		"not json":      []byte("{"),
		"empty":         nil,
		"array":         []byte("[]\n"),
		"huge":          make([]byte, MaxListBytes+1),
	} {
		if _, err := ParseRuntimeRelease(data); err == nil || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzParseRuntimeRelease checks that the runtime-release.json reader never
// panics and that what it accepts is exactly its own canonical encoding.
func FuzzParseRuntimeRelease(f *testing.F) {
	good, err := sampleRelease().Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("{}\n"))
	f.Add(bytes.Replace(good, []byte("README.md"), []byte("../README.md"), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRuntimeRelease(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		out, err := r.Marshal()
		if err != nil {
			t.Fatalf("accepted release does not marshal: %v", err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("accepted bytes are not the canonical encoding")
		}
		for _, f := range r.Files {
			if CheckPath(f.Path, BundlePath) != nil {
				t.Fatalf("unsafe path %q accepted", f.Path)
			}
		}
	})
}

package publish

import (
	"strings"
	"testing"

	"github.com/lfmq/lfmq/release/bundle"
)

const (
	oidA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	oidB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestGitAttributes(t *testing.T) {
	release := parseGitAttributes(bundle.GitAttributes)
	custom := parseGitAttributes(`# comment
*.bin filter=lfs diff=lfs merge=lfs -text
/top.dat filter=lfs
docs/** filter=lfs
**/deep/*.x filter=lfs
keep.bin -filter
a/**/b.y filter=lfs
[attr]binary -diff -merge -text
!neg.bin filter=lfs
"quoted file" filter=lfs
*.txt text
`)
	tests := []struct {
		g    *gitAttributes
		path string
		want bool
	}{
		{release, "checkpoint/global.safetensors", true},
		{release, "checkpoint/manifest.json", false},
		{release, "checkpoint/sub/x.safetensors", false}, // anchored: * stays in a segment
		{release, "runtime/lfmq-linux-amd64", true},
		{release, "runtime/lfmq-src.tar.gz", true},
		{release, "runtime/x/y", false},
		{release, "evidence/bundle.tar.gz", true}, // no slash: any depth
		{release, "README.md", false},
		{release, ".gitattributes", false},
		{custom, "x.bin", true},
		{custom, "d/e/x.bin", true},
		{custom, "keep.bin", false}, // a later -filter wins
		{custom, "sub/keep.bin", false},
		{custom, "top.dat", true},
		{custom, "sub/top.dat", false},
		{custom, "docs/a", true},
		{custom, "docs/a/b/c", true},
		{custom, "docs", false},
		{custom, "deep/f.x", true},
		{custom, "p/q/deep/f.x", true},
		{custom, "a/b.y", true},
		{custom, "a/1/2/b.y", true},
		{custom, "neg.bin", true}, // the negative pattern line is skipped; *.bin still applies
		{custom, "quoted file", false},
		{custom, "notes.txt", false},
		{nil, "x.bin", false},
	}
	for _, tt := range tests {
		if got := tt.g.lfs(tt.path); got != tt.want {
			t.Errorf("lfs(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestDecodeBatch(t *testing.T) {
	want := map[string]int64{oidA: 300, oidB: 10}
	good := `{"transfer":"multipart","objects":[
		{"oid":"` + oidA + `","size":300,"actions":{"upload":{"href":"https://hub/complete?id=1","header":{"chunk_size":"128","00001":"https://s3/p1","00002":"https://s3/p2","00003":"https://s3/p3"}},"verify":{"href":"https://hub/verify"}}},
		{"oid":"` + oidB + `","size":10}]}`
	got, err := decodeBatch([]byte(good), want)
	if err != nil {
		t.Fatal(err)
	}
	if a := got[oidA]; a.Chunk != 128 || len(a.Parts) != 3 || a.Parts[2] != "https://s3/p3" || a.Verify == nil {
		t.Errorf("multipart object %+v", a)
	}
	if b := got[oidB]; b.Upload != nil {
		t.Errorf("stored object %+v has an upload", b)
	}
	obj := func(s string) string { return `{"objects":[` + s + `,{"oid":"` + oidB + `","size":10}]}` }
	up := func(header string) string {
		return obj(`{"oid":"` + oidA + `","size":300,"actions":{"upload":{"href":"https://hub/c","header":{` + header + `}}}}`)
	}
	for name, bad := range map[string]string{
		"not json":      `[`,
		"no objects":    `{}`,
		"unasked":       `{"objects":[{"oid":"` + strings.Repeat("c", 64) + `","size":1}]}`,
		"missing":       `{"objects":[{"oid":"` + oidB + `","size":10}]}`,
		"size":          obj(`{"oid":"` + oidA + `","size":301}`),
		"error":         obj(`{"oid":"` + oidA + `","size":300,"error":{"code":422,"message":"no"}}`),
		"twice":         `{"objects":[{"oid":"` + oidB + `","size":10},{"oid":"` + oidB + `","size":10},{"oid":"` + oidA + `","size":300}]}`,
		"href":          obj(`{"oid":"` + oidA + `","size":300,"actions":{"upload":{"href":"file:///etc/passwd"}}}`),
		"chunk":         up(`"chunk_size":"0","00001":"https://s3/1"`),
		"chunk text":    up(`"chunk_size":"x"`),
		"part count":    up(`"chunk_size":"128","00001":"https://s3/1","00002":"https://s3/2"`),
		"part gap":      up(`"chunk_size":"128","00001":"https://s3/1","00002":"https://s3/2","00004":"https://s3/4"`),
		"part twice":    up(`"chunk_size":"128","00001":"https://s3/1","1":"https://s3/1b","00002":"https://s3/2","00003":"https://s3/3"`),
		"part url":      up(`"chunk_size":"128","00001":"https://s3/1","00002":"ftp://s3/2","00003":"https://s3/3"`),
		"other header":  up(`"chunk_size":"128","x-amz":"1","00001":"https://s3/1","00002":"https://s3/2","00003":"https://s3/3"`),
		"signed number": up(`"chunk_size":"128","+1":"https://s3/1","00002":"https://s3/2","00003":"https://s3/3"`),
	} {
		if _, err := decodeBatch([]byte(bad), want); err == nil {
			t.Errorf("%s: decodeBatch accepted %s", name, bad)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"objects":[{"oid":"`+oidA+`","size":300,"actions":{"upload":{"href":"https://h/c","header":{"chunk_size":"128","00001":"https://s/1","00002":"https://s/2","00003":"https://s/3"}},"verify":{"href":"https://h/v"}}}]}`), int64(300))
	f.Add([]byte(`{"objects":[{"oid":"`+oidA+`","size":5,"actions":{"upload":{"href":"https://s/x"}}}]}`), int64(5))
	f.Add([]byte(`{"objects":[{"oid":"`+oidA+`","size":0}]}`), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, size int64) {
		got, err := decodeBatch(data, map[string]int64{oidA: size})
		if err != nil {
			return
		}
		o, ok := got[oidA]
		if !ok || len(got) != 1 || o.Size != size {
			t.Fatalf("decoded %+v", got)
		}
		if o.Chunk > 0 {
			if int64(len(o.Parts)) != (size+o.Chunk-1)/o.Chunk {
				t.Fatalf("%d parts of %d for %d bytes", len(o.Parts), o.Chunk, size)
			}
			for _, p := range o.Parts {
				if !httpURL(p) {
					t.Fatalf("part URL %q", p)
				}
			}
		}
	})
}

func FuzzGitAttributes(f *testing.F) {
	f.Add(bundle.GitAttributes, "checkpoint/global.safetensors")
	f.Add("**/a/**/b*.x filter=lfs\n", "q/a/r/s/bz.x")
	f.Add("[ab filter=lfs\n", "a")
	f.Fuzz(func(t *testing.T, text, p string) {
		if len(text) > 4096 || len(p) > 512 {
			return
		}
		g := parseGitAttributes(text)
		got := g.lfs(p)
		// Appending a rule that takes everything out must win.
		if parseGitAttributes(text + "\n* -filter\n").lfs(p) {
			t.Fatalf("a final '* -filter' does not win for %q (was %v)", p, got)
		}
	})
}

package hubapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const (
	oidA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	blob = "0123456789abcdef0123456789abcdef01234567"
)

func TestNextLink(t *testing.T) {
	req, _ := url.Parse("https://hub.example/api/models/o/n/tree/main?recursive=true")
	tests := []struct {
		header []string
		want   string
	}{
		{nil, ""},
		{[]string{`<https://hub.example/api/models/o/n/tree/main?recursive=true&cursor=abc>; rel="next"`}, "https://hub.example/api/models/o/n/tree/main?recursive=true&cursor=abc"},
		{[]string{`</api/x?cursor=2>; rel=next`}, "https://hub.example/api/x?cursor=2"},
		{[]string{`<https://a/prev>; rel="prev", <https://a/next>; rel="next"`}, "https://a/next"},
		{[]string{`<https://a/first>; rel="first"`, `<https://a/n>; title="t"; rel="last next"`}, "https://a/n"},
		{[]string{`garbage`}, ""},
		{[]string{`<https://a/x>; rel="prev"`}, ""},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.header {
			h.Add("Link", v)
		}
		u, ok := nextLink(h, req)
		got := ""
		if ok {
			got = u.String()
		}
		if got != tt.want {
			t.Errorf("nextLink(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

func TestHubMessage(t *testing.T) {
	tests := []struct {
		header, contentType, body string
		want                      string
	}{
		{"Repository not found", "application/json", `{"error":"Repository not found"}`, "Repository not found"},
		{"", "application/json", `{"error":["one","two"]}`, "one; two"},
		{"", "application/json", `{"errors":[{"message":"bad a"},{"message":"bad b"}]}`, "bad a; bad b"},
		{"", "application/vnd.git-lfs+json", `{"message":"Credentials needed","request_id":"1"}`, "Credentials needed"},
		{"head", "text/plain", "plain body\n", "head; plain body"},
		{"", "text/html", "<html>nope</html>", ""},
		{"", "", "", ""},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.header != "" {
			h.Set("X-Error-Message", tt.header)
		}
		h.Set("Content-Type", tt.contentType)
		if got := hubMessage(h, []byte(tt.body)); got != tt.want {
			t.Errorf("hubMessage(%q, %q) = %q, want %q", tt.header, tt.body, got, tt.want)
		}
	}
}

func TestDecodeTreePage(t *testing.T) {
	good := `[{"type":"directory","oid":"` + blob + `","size":0,"path":"checkpoint"},
		{"type":"file","oid":"` + blob + `","size":5,"path":"README.md"},
		{"type":"file","oid":"` + blob + `","size":9,"path":"checkpoint/a.safetensors","lfs":{"oid":"` + oidA + `","size":9,"pointerSize":130}}]`
	entries, err := decodeTreePage([]byte(good))
	if err != nil || len(entries) != 2 || entries[1].LFS == nil || entries[1].LFS.OID != oidA {
		t.Fatalf("decode: %v %+v", err, entries)
	}
	for _, bad := range []string{
		`{}`,
		`[{"type":"file","oid":"` + blob + `","size":5,"path":"../x"}]`,
		`[{"type":"file","oid":"` + blob + `","size":5,"path":"/abs"}]`,
		`[{"type":"file","oid":"xyz","size":5,"path":"a"}]`,
		`[{"type":"file","oid":"` + blob + `","size":-1,"path":"a"}]`,
		`[{"type":"symlink","oid":"` + blob + `","size":1,"path":"a"}]`,
		`[{"type":"file","oid":"` + blob + `","size":9,"path":"a","lfs":{"oid":"short","size":9}}]`,
		`[{"type":"file","oid":"` + blob + `","size":9,"path":"a","lfs":{"oid":"` + oidA + `","size":8}}]`,
	} {
		if _, err := decodeTreePage([]byte(bad)); err == nil {
			t.Errorf("decodeTreePage(%s) accepted", bad)
		}
	}
}

func FuzzDecodeTree(f *testing.F) {
	f.Add([]byte(`[{"type":"file","oid":"` + blob + `","size":9,"path":"a/b","lfs":{"oid":"` + oidA + `","size":9,"pointerSize":130}}]`))
	f.Add([]byte(`[{"type":"directory","oid":"` + blob + `","size":0,"path":"a"}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeTreePage(data)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Type != "file" || !IsCommit(e.OID) || e.Size < 0 || e.Path == "" || strings.HasPrefix(e.Path, "/") || strings.Contains(e.Path, "..") && strings.Contains("/"+e.Path+"/", "/../") {
				t.Fatalf("accepted entry %+v", e)
			}
			if e.LFS != nil && (len(e.LFS.OID) != 64 || e.LFS.Size != e.Size) {
				t.Fatalf("accepted lfs %+v", e.LFS)
			}
		}
	})
}

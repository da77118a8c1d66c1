package hubtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const testToken = "hf_servertest"

func TestReadCommit(t *testing.T) {
	oid := strings.Repeat("a", 64)
	good := `{"key":"header","value":{"summary":"s","description":"d","parentCommit":"0123456789abcdef0123456789abcdef01234567"}}
{"key":"file","value":{"path":"README.md","encoding":"base64","content":"aGk="}}
{"key":"lfsFile","value":{"path":"w/a.bin","algo":"sha256","oid":"` + oid + `","size":3}}
{"key":"deletedFile","value":{"path":"old.txt"}}
{"key":"deletedFolder","value":{"path":"dir/"}}

`
	req, err := readCommit(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if req.Summary != "s" || req.Parent == "" || len(req.Ops) != 4 || string(req.Ops[0].Content) != "hi" || req.Ops[1].Size != 3 || req.Ops[3].Path != "dir" {
		t.Errorf("parsed %+v", req)
	}
	header := `{"key":"header","value":{"summary":"s"}}` + "\n"
	for name, bad := range map[string]string{
		"empty":          "",
		"no header":      `{"key":"file","value":{"path":"a","content":"x"}}`,
		"empty summary":  `{"key":"header","value":{"summary":" "}}`,
		"misspelt field": `{"key":"header","value":{"summary":"s","parent_commit":"abc"}}`,
		"bad parent":     `{"key":"header","value":{"summary":"s","parentCommit":"main"}}`,
		"unknown key":    header + `{"key":"rename","value":{"path":"a"}}`,
		"bad base64":     header + `{"key":"file","value":{"path":"a","encoding":"base64","content":"!!"}}`,
		"bad encoding":   header + `{"key":"file","value":{"path":"a","encoding":"gzip","content":""}}`,
		"lfs algo":       header + `{"key":"lfsFile","value":{"path":"a","algo":"md5","oid":"` + oid + `"}}`,
		"lfs oid":        header + `{"key":"lfsFile","value":{"path":"a","algo":"sha256","oid":"abc"}}`,
		"path ..":        header + `{"key":"deletedFile","value":{"path":"../x"}}`,
		"path .git":      header + `{"key":"deletedFile","value":{"path":"a/.git/config"}}`,
		"absolute":       header + `{"key":"deletedFile","value":{"path":"/x"}}`,
		"twice":          header + `{"key":"deletedFile","value":{"path":"x"}}` + "\n" + `{"key":"file","value":{"path":"x","content":""}}`,
		"not json":       header + `{"key":`,
		"trailing":       header + `{"key":"deletedFile","value":{"path":"x"}} {}`,
		"no value":       header + `{"key":"deletedFile"}`,
	} {
		if _, err := readCommit(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestGlobRegexp(t *testing.T) {
	rules := parseAttributes("*.bin filter=lfs\n/top.dat filter=lfs\ndocs/** filter=lfs\n**/deep/*.x filter=lfs\nkeep.bin -filter\na/**/b.y filter=lfs\nr/[ab]?.z filter=lfs\n")
	for p, want := range map[string]bool{
		"x.bin": true, "d/x.bin": true, "keep.bin": false, "d/keep.bin": false, "top.dat": true, "s/top.dat": false,
		"docs/a": true, "docs/a/b": true, "docs": false, "deep/q.x": true, "z/deep/q.x": true, "a/b.y": true,
		"a/1/2/b.y": true, "r/a1.z": true, "r/c1.z": false, "r/a/.z": false, "README.md": false,
	} {
		if got := rules.lfs(p); got != want {
			t.Errorf("lfs(%q) = %v, want %v", p, got, want)
		}
	}
	ignore := parseIgnore("evidence/\n*.log\n!keep.log\n")
	for p, want := range map[string]bool{"evidence/a.json": true, "x/y.log": true, "keep.log": false, "README.md": false} {
		if got := ignore.match(p); got != want {
			t.Errorf("ignore(%q) = %v, want %v", p, got, want)
		}
	}
}

// post sends a request to the server and returns the status and body.
func post(t *testing.T, srv *httptest.Server, method, path, ctype, auth string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Accept", ctype)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestServerRefusesProtocolMistakes checks that the answers a client
// could get wrong are refused.
func TestServerRefusesProtocolMistakes(t *testing.T) {
	s := NewServer()
	s.Token = testToken
	s.MultipartThreshold, s.ChunkSize = 10, 4
	srv := httptest.NewServer(s)
	defer srv.Close()
	if err := s.CreateRepo("o/r", false); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRepo("o/r", false); err == nil {
		t.Error("a second CreateRepo succeeded")
	}
	data := []byte("hello, multipart")
	oid := sha256Hex(data)
	lfs := "application/vnd.git-lfs+json"
	batch := fmt.Sprintf(`{"operation":"upload","transfers":["basic","multipart"],"objects":[{"oid":%q,"size":%d}],"hash_algo":"sha256"}`, oid, len(data))
	commit := func(lines ...string) (int, string) {
		return post(t, srv, "POST", "/api/models/o/r/commit/main", "application/x-ndjson", testToken, []byte(strings.Join(lines, "\n")))
	}
	header := `{"key":"header","value":{"summary":"s"}}`
	lfsLine := fmt.Sprintf(`{"key":"lfsFile","value":{"path":"w.dat","algo":"sha256","oid":%q,"size":%d}}`, oid, len(data))

	checks := []struct {
		name   string
		status int
		got    func() (int, string)
	}{
		{"create without token", 401, func() (int, string) {
			return post(t, srv, "POST", "/api/repos/create", "application/json", "", []byte(`{"name":"x","organization":"o"}`))
		}},
		{"create existing", 409, func() (int, string) {
			return post(t, srv, "POST", "/api/repos/create", "application/json", testToken, []byte(`{"name":"r","organization":"o"}`))
		}},
		{"batch without LFS media type", 406, func() (int, string) {
			return post(t, srv, "POST", "/o/r.git/info/lfs/objects/batch", "application/json", testToken, []byte(batch))
		}},
		{"batch without token", 401, func() (int, string) {
			return post(t, srv, "POST", "/o/r.git/info/lfs/objects/batch", lfs, "", []byte(batch))
		}},
		{"commit of an object never uploaded", 422, func() (int, string) { return commit(header, lfsLine) }},
		{"commit with a wrong content type", 415, func() (int, string) {
			return post(t, srv, "POST", "/api/models/o/r/commit/main", "application/json", testToken, []byte(header))
		}},
		{"commit with a stale parent", 412, func() (int, string) {
			return commit(`{"key":"header","value":{"summary":"s","parentCommit":"0000000000000000000000000000000000000000"}}`)
		}},
		{"commit deleting a missing file", 404, func() (int, string) { return commit(header, `{"key":"deletedFile","value":{"path":"nope"}}`) }},
		{"commit of a binary inline file", 400, func() (int, string) {
			return commit(header, `{"key":"file","value":{"path":"b","encoding":"base64","content":"AAEC"}}`)
		}},
		{"tag of an unknown revision", 404, func() (int, string) {
			return post(t, srv, "POST", "/api/models/o/r/tag/nope", "application/json", testToken, []byte(`{"tag":"v1"}`))
		}},
		{"tag", 200, func() (int, string) {
			return post(t, srv, "POST", "/api/models/o/r/tag/main", "application/json", testToken, []byte(`{"tag":"v1"}`))
		}},
		{"tag again", 409, func() (int, string) {
			return post(t, srv, "POST", "/api/models/o/r/tag/main", "application/json", testToken, []byte(`{"tag":"v1"}`))
		}},
	}
	for _, c := range checks {
		if status, body := c.got(); status != c.status {
			t.Errorf("%s: HTTP %d, want %d (%s)", c.name, status, c.status, body)
		}
	}

	// A multipart upload: 16 bytes in parts of 4.
	status, body := post(t, srv, "POST", "/o/r.git/info/lfs/objects/batch", lfs, testToken, []byte(batch))
	if status != 200 {
		t.Fatalf("batch: %d %s", status, body)
	}
	var ans struct {
		Objects []struct {
			Actions map[string]struct {
				Href   string            `json:"href"`
				Header map[string]string `json:"header"`
			} `json:"actions"`
		} `json:"objects"`
	}
	if err := json.Unmarshal([]byte(body), &ans); err != nil || len(ans.Objects) != 1 {
		t.Fatalf("batch answer %s", body)
	}
	up := ans.Objects[0].Actions["upload"]
	if up.Header["chunk_size"] != "4" || up.Header["00004"] == "" || up.Header["00005"] != "" {
		t.Fatalf("upload action %+v", up)
	}
	put := func(part int, b []byte, chunked bool) (int, string) {
		req, _ := http.NewRequest("PUT", up.Header[fmt.Sprintf("%05d", part)], bytes.NewReader(b))
		if chunked {
			req.ContentLength = -1
			req.Body = io.NopCloser(bytes.NewReader(b))
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("ETag")
	}
	if status, _ := put(1, data[:4], true); status != http.StatusLengthRequired {
		t.Errorf("chunked part: HTTP %d, want 411", status)
	}
	if status, _ := put(1, data[:3], false); status != http.StatusBadRequest {
		t.Errorf("short part: HTTP %d, want 400", status)
	}
	etags := make([]string, 4)
	for i := range 4 {
		var st int
		st, etags[i] = put(i+1, data[4*i:4*i+4], false)
		if st != 200 || etags[i] == "" {
			t.Fatalf("part %d: HTTP %d etag %q", i+1, st, etags[i])
		}
	}
	completion := func(tags []string) int {
		var parts []string
		for i, e := range tags {
			parts = append(parts, fmt.Sprintf(`{"partNumber":%d,"etag":%q}`, i+1, e))
		}
		path := strings.TrimPrefix(up.Href, srv.URL)
		st, _ := post(t, srv, "POST", path, lfs, "", fmt.Appendf(nil, `{"oid":%q,"parts":[%s]}`, oid, strings.Join(parts, ",")))
		return st
	}
	if st := completion([]string{etags[0], etags[1], etags[3], etags[2]}); st != 400 {
		t.Errorf("completion with swapped etags: HTTP %d, want 400", st)
	}
	if st := completion(etags[:3]); st != 400 {
		t.Errorf("completion without the last part: HTTP %d, want 400", st)
	}
	if st := completion(etags); st != 200 {
		t.Fatalf("completion: HTTP %d", st)
	}
	// Not committable before verify; committable after.
	if st, b := commit(header, lfsLine); st != 422 {
		t.Errorf("commit before verify: HTTP %d %s", st, b)
	}
	verify := fmt.Appendf(nil, `{"oid":%q,"size":%d}`, oid, len(data))
	if st, _ := post(t, srv, "POST", "/o/r.git/info/lfs/objects/verify", lfs, "", verify); st != 401 {
		t.Errorf("verify without token: HTTP %d", st)
	}
	if st, b := post(t, srv, "POST", "/o/r.git/info/lfs/objects/verify", lfs, testToken, verify); st != 200 {
		t.Fatalf("verify: HTTP %d %s", st, b)
	}
	if st, b := commit(header, lfsLine); st != 200 {
		t.Fatalf("commit: HTTP %d %s", st, b)
	}
	// The hub appended a .gitattributes rule for the unrouted LFS file.
	files, _ := s.Files("o/r", "main")
	if !strings.Contains(string(files[".gitattributes"].Content), "w.dat filter=lfs") || files["w.dat"].LFS != oid {
		t.Errorf("tree after the commit: %+v", files)
	}
	if s.Received(oid) != int64(len(data)) { // the refused PUTs were not read
		t.Errorf("received %d bytes", s.Received(oid))
	}
}

func FuzzReadCommit(f *testing.F) {
	f.Add([]byte(`{"key":"header","value":{"summary":"s","parentCommit":"0123456"}}
{"key":"file","value":{"path":"a","encoding":"base64","content":"aGk="}}
{"key":"lfsFile","value":{"path":"b","algo":"sha256","oid":"` + strings.Repeat("0", 64) + `","size":1}}
{"key":"deletedFile","value":{"path":"c"}}`))
	f.Add([]byte(`{"key":"header","value":{"summary":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := readCommit(bytes.NewReader(data))
		if err != nil {
			return
		}
		if strings.TrimSpace(req.Summary) == "" {
			t.Fatal("accepted an empty summary")
		}
		seen := map[string]bool{}
		for _, op := range req.Ops {
			if checkPath(op.Path) != nil || seen[op.Path] {
				t.Fatalf("accepted path %q", op.Path)
			}
			seen[op.Path] = true
			if op.Key == "lfsFile" && !isSHA256(op.OID) {
				t.Fatalf("accepted oid %q", op.OID)
			}
		}
	})
}

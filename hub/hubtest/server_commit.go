package hubtest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/lfmq/lfmq/internal/strictjson"
)

// Bounds on a commit request.
const (
	maxCommitBytes = 256 << 20
	maxCommitOps   = 100000
)

// commitRequest is a parsed NDJSON commit payload.
type commitRequest struct {
	Summary, Description string
	// Parent is the header's parentCommit, "" when absent.
	Parent string
	Ops    []commitOp
}

// commitOp is one operation line.
type commitOp struct {
	// Key is "file", "lfsFile", "deletedFile" or "deletedFolder".
	Key     string
	Path    string
	Content []byte // file
	OID     string // lfsFile
	Size    int64  // lfsFile; -1 when absent
}

// strictUnmarshal decodes one JSON line of a commit into v, refusing
// unknown fields and trailing data, so that a misspelt key is an error, not
// ignored.
func strictUnmarshal(data []byte, v any) error {
	return strictjson.Unmarshal(data, maxCommitBytes, v)
}

// readCommit parses the commit endpoint's body: one JSON object per line,
// {"key": …, "value": …}; the first is the header (summary required,
// description and parentCommit optional), then operations. Blank lines
// are skipped. Every path is checked; a path may appear in one operation
// only.
func readCommit(r io.Reader) (*commitRequest, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxCommitBytes)
	req := &commitRequest{}
	seen := map[string]bool{}
	line, header := 0, false
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var item struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if err := strictUnmarshal(text, &item); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		if len(item.Value) == 0 {
			return nil, fmt.Errorf("line %d: no value", line)
		}
		if !header {
			if item.Key != "header" {
				return nil, fmt.Errorf("line %d: the first line must be the header, not %q", line, item.Key)
			}
			var h struct {
				Summary      string  `json:"summary"`
				Description  string  `json:"description"`
				ParentCommit *string `json:"parentCommit"`
			}
			if err := strictUnmarshal(item.Value, &h); err != nil {
				return nil, fmt.Errorf("line %d: header: %v", line, err)
			}
			if strings.TrimSpace(h.Summary) == "" {
				return nil, fmt.Errorf("line %d: the commit summary is empty", line)
			}
			req.Summary, req.Description = h.Summary, h.Description
			if h.ParentCommit != nil {
				if !isHex(*h.ParentCommit) || len(*h.ParentCommit) < 7 || len(*h.ParentCommit) > 40 {
					return nil, fmt.Errorf("line %d: parentCommit %q is not a commit id", line, *h.ParentCommit)
				}
				req.Parent = *h.ParentCommit
			}
			header = true
			continue
		}
		op := commitOp{Key: item.Key, Size: -1}
		switch item.Key {
		case "file":
			var v struct {
				Path     string `json:"path"`
				Content  string `json:"content"`
				Encoding string `json:"encoding"`
			}
			if err := strictUnmarshal(item.Value, &v); err != nil {
				return nil, fmt.Errorf("line %d: file: %v", line, err)
			}
			op.Path = v.Path
			switch v.Encoding {
			case "base64":
				data, err := base64.StdEncoding.DecodeString(v.Content)
				if err != nil {
					return nil, fmt.Errorf("line %d: %s: content is not base64: %v", line, v.Path, err)
				}
				op.Content = data
			case "utf-8", "":
				op.Content = []byte(v.Content)
			default:
				return nil, fmt.Errorf("line %d: %s: unknown encoding %q", line, v.Path, v.Encoding)
			}
		case "lfsFile":
			var v struct {
				Path string `json:"path"`
				Algo string `json:"algo"`
				OID  string `json:"oid"`
				Size *int64 `json:"size"`
			}
			if err := strictUnmarshal(item.Value, &v); err != nil {
				return nil, fmt.Errorf("line %d: lfsFile: %v", line, err)
			}
			if v.Algo != "sha256" || !isSHA256(v.OID) {
				return nil, fmt.Errorf("line %d: %s: want algo sha256 and a 64-hex oid", line, v.Path)
			}
			if v.Size != nil {
				if *v.Size < 0 {
					return nil, fmt.Errorf("line %d: %s: negative size", line, v.Path)
				}
				op.Size = *v.Size
			}
			op.Path, op.OID = v.Path, v.OID
		case "deletedFile", "deletedFolder":
			var v struct {
				Path string `json:"path"`
			}
			if err := strictUnmarshal(item.Value, &v); err != nil {
				return nil, fmt.Errorf("line %d: %s: %v", line, item.Key, err)
			}
			op.Path = strings.TrimSuffix(v.Path, "/")
		default:
			return nil, fmt.Errorf("line %d: unknown key %q", line, item.Key)
		}
		if err := checkPath(op.Path); err != nil {
			return nil, fmt.Errorf("line %d: path %q: %v", line, op.Path, err)
		}
		if seen[op.Path] {
			return nil, fmt.Errorf("line %d: %s appears in two operations", line, op.Path)
		}
		seen[op.Path] = true
		if len(req.Ops) == maxCommitOps {
			return nil, fmt.Errorf("line %d: more than %d operations", line, maxCommitOps)
		}
		req.Ops = append(req.Ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !header {
		return nil, errors.New("no header line")
	}
	return req, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// serveCommit is the commit endpoint: application/x-ndjson in, a commit
// on the branch out ({"commitOid", "commitUrl", "hookOutput",
// "pullRequestUrl"}). A parentCommit that is not the branch head is
// answered 412 with StaleMessage; an lfsFile must name an object stored
// (verified) with that size; an inline file must be below LFSThreshold
// and hold no NUL byte in its first 8000 bytes (git's binary test); a
// deleted file must exist. Like the hub, it appends a rule to
// .gitattributes for each LFS file the resulting .gitattributes does not
// already route to LFS.
func (s *Server) serveCommit(w http.ResponseWriter, r *http.Request, id, branch string) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-ndjson") {
		apiError(w, http.StatusUnsupportedMediaType, "", "Content-Type must be application/x-ndjson, not "+ct)
		return
	}
	req, err := readCommit(http.MaxBytesReader(w, r.Body, maxCommitBytes))
	if err != nil {
		apiError(w, http.StatusBadRequest, "", "invalid commit payload: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := s.repoFor(w, r, id, true)
	if repo == nil {
		return
	}
	if s.movers[id+"\x00"+branch] {
		delete(s.movers, id+"\x00"+branch)
		files := map[string]File{}
		if head, ok := repo.branches[branch]; ok {
			files = maps.Clone(repo.commits[head].files)
		}
		files["MOVED.md"] = regular(fmt.Appendf(nil, "moved by someone else (%d)\n", s.seq))
		s.addCommit(repo, branch, "a concurrent commit", "", files)
	}
	head, exists := repo.branches[branch]
	if !exists && len(repo.commits) > 0 {
		apiError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+branch)
		return
	}
	if req.Parent != "" && !strings.HasPrefix(head, req.Parent) || req.Parent != "" && head == "" {
		apiError(w, http.StatusPreconditionFailed, "", StaleMessage)
		return
	}
	files := map[string]File{}
	if exists {
		files = maps.Clone(repo.commits[head].files)
	}
	var lfsPaths []string
	for _, op := range req.Ops {
		switch op.Key {
		case "deletedFile":
			if _, ok := files[op.Path]; !ok {
				apiError(w, http.StatusNotFound, "EntryNotFound", "cannot delete "+op.Path+": no such file")
				return
			}
			delete(files, op.Path)
		case "deletedFolder":
			n := 0
			for p := range files {
				if strings.HasPrefix(p, op.Path+"/") {
					delete(files, p)
					n++
				}
			}
			if n == 0 {
				apiError(w, http.StatusNotFound, "EntryNotFound", "cannot delete folder "+op.Path+": no such folder")
				return
			}
		case "file":
			if int64(len(op.Content)) >= s.LFSThreshold || bytes.IndexByte(op.Content[:min(len(op.Content), 8000)], 0) >= 0 {
				apiError(w, http.StatusBadRequest, "", op.Path+" is binary or too large for a regular file; upload it with LFS")
				return
			}
			files[op.Path] = regular(op.Content)
		case "lfsFile":
			data, ok := repo.objects[op.OID]
			if !ok {
				apiError(w, http.StatusUnprocessableEntity, "", op.Path+": LFS object "+op.OID+" was not uploaded")
				return
			}
			if op.Size >= 0 && op.Size != int64(len(data)) {
				apiError(w, http.StatusUnprocessableEntity, "", fmt.Sprintf("%s: size %d, the stored object has %d", op.Path, op.Size, len(data)))
				return
			}
			files[op.Path] = File{Size: int64(len(data)), LFS: op.OID}
			lfsPaths = append(lfsPaths, op.Path)
		}
	}
	rules := parseAttributes(string(files[".gitattributes"].Content))
	var extra []string
	for _, p := range lfsPaths {
		if !rules.lfs(p) {
			extra = append(extra, p+" filter=lfs diff=lfs merge=lfs -text\n")
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		attrs := files[".gitattributes"].Content
		if len(attrs) > 0 && attrs[len(attrs)-1] != '\n' {
			attrs = append(attrs, '\n')
		}
		files[".gitattributes"] = regular(append(slices.Clone(attrs), strings.Join(extra, "")...))
	}
	commitID := s.addCommit(repo, branch, req.Summary, req.Description, files)
	writeJSON(w, map[string]any{
		"commitOid": commitID, "commitUrl": "http://" + r.Host + "/" + id + "/commit/" + commitID,
		"hookOutput": "", "pullRequestUrl": nil,
	})
}

package publish

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/lfmq/lfmq/internal/httpstatus"
	"github.com/lfmq/lfmq/verify/sums"
)

// Bounds on hub answers.
const (
	maxInfoBytes  = 16 << 20
	maxPageBytes  = 64 << 20
	maxTreeFiles  = 1 << 20
	maxTreePages  = 1 << 16
	preuploadSize = 256 // files per preupload request, as huggingface_hub
)

// repoAPI is the client for one repository.
type repoAPI struct {
	*client
	repo string // owner/name
	// dataset: a dataset repository, whose routes are under api/datasets.
	dataset bool
}

// modelPath returns "api/models/{owner}/{name}/{verb}/{escaped rev}"
// (api/datasets/… for a dataset repository).
func (a *repoAPI) modelPath(verb, rev string) string {
	owner, name, _ := strings.Cut(a.repo, "/")
	kind := "models"
	if a.dataset {
		kind = "datasets"
	}
	return "api/" + kind + "/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/" + verb + "/" + url.PathEscape(rev)
}

// revState says what the hub knows of a revision.
type revState int

const (
	revUnknown revState = iota // with an error
	revFound
	revMissing
	repoMissing
)

// revision resolves a branch, tag or commit to its commit id:
//
//	GET {endpoint}/api/models/{repo}/revision/{rev}  →  {"sha": …, …}
//
// (huggingface_hub: HfApi.model_info / repo_info with revision). A 404
// with X-Error-Code RevisionNotFound is revMissing; RepoNotFound, or a 401
// that does not complain about the token (what the hub answers for a
// repository it will not show), is repoMissing with the error.
func (a *repoAPI) revision(ctx context.Context, rev string) (string, revState, error) {
	u := a.api(a.modelPath("revision", rev))
	resp, err := a.do(ctx, call{op: "repo info", ok: []int{http.StatusOK}, mk: func() (*http.Request, error) {
		return http.NewRequest(http.MethodGet, u.String(), nil)
	}})
	var he *HubError
	if errors.As(err, &he) {
		switch {
		case he.Status == http.StatusNotFound && he.Code == "RevisionNotFound":
			return "", revMissing, nil
		case he.Status == http.StatusNotFound && he.Code != "EntryNotFound",
			he.Status == http.StatusUnauthorized && !strings.Contains(strings.ToLower(he.Message), "invalid credentials"):
			return "", repoMissing, err
		}
	}
	if err != nil {
		return "", 0, err
	}
	var info struct {
		SHA string `json:"sha"`
	}
	if _, err := readJSON(resp, maxInfoBytes, &info); err != nil {
		return "", 0, &ProtocolError{Op: "repo info", URL: redact(u), Msg: err.Error()}
	}
	if !isCommit(info.SHA) {
		return "", 0, &ProtocolError{Op: "repo info", URL: redact(u), Msg: fmt.Sprintf("sha %q is not a 40-hex commit id", info.SHA)}
	}
	return info.SHA, revFound, nil
}

// createRepo creates the repository:
//
//	POST {endpoint}/api/repos/create  {"name", "organization", "private"}
//
// (huggingface_hub: HfApi.create_repo; a model repository sends no
// "type"). 409 means it exists already, which is fine. It reports whether
// this call created it.
func (a *repoAPI) createRepo(ctx context.Context, private bool) (bool, error) {
	owner, name, _ := strings.Cut(a.repo, "/")
	body, _ := json.Marshal(map[string]any{"name": name, "organization": owner, "private": private})
	u := a.api("api/repos/create")
	resp, err := a.do(ctx, call{op: "create repo", ok: []int{http.StatusOK, http.StatusCreated, http.StatusConflict}, mk: func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}})
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusConflict, nil
}

// remoteFile is a file of the hub's tree.
type remoteFile struct {
	Size int64
	// OID is the git blob id (of the pointer, for an LFS file).
	OID string
	// LFS is the object's sha256 for an LFS file, else "".
	LFS string
}

// treeEntry is one element of the tree endpoint's JSON array.
type treeEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	OID  string `json:"oid"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// decodeTreePage parses one page of the tree endpoint: a JSON array of
// {"type": "file"|"directory", "path", "size", "oid", "lfs": {"oid",
// "size", "pointerSize"}}. Directories are dropped; files must have a
// safe path, a 40-hex oid, a size ≥ 0 and, for LFS, a 64-hex oid and the
// same size.
func decodeTreePage(data []byte) ([]treeEntry, error) {
	var page []treeEntry
	if err := json.Unmarshal(data, &page); err != nil {
		return nil, err
	}
	out := page[:0]
	for _, e := range page {
		switch e.Type {
		case "directory":
			continue
		case "file":
		default:
			return nil, fmt.Errorf("entry %q has type %q", e.Path, e.Type)
		}
		if err := sums.CheckPath(e.Path, sums.AnyPath); err != nil {
			return nil, err
		}
		if !isCommit(e.OID) || e.Size < 0 {
			return nil, fmt.Errorf("%s: oid %q, size %d", e.Path, e.OID, e.Size)
		}
		if e.LFS != nil && (!sums.ValidSHA256(e.LFS.OID) || e.LFS.Size != e.Size) {
			return nil, fmt.Errorf("%s: lfs oid %q, size %d (file size %d)", e.Path, e.LFS.OID, e.LFS.Size, e.Size)
		}
		out = append(out, e)
	}
	return out, nil
}

// tree lists every file of a revision:
//
//	GET {endpoint}/api/models/{repo}/tree/{rev}?recursive=true&expand=false
//
// following the Link rel="next" header from page to page
// (huggingface_hub: HfApi.list_repo_tree, utils.paginate).
func (a *repoAPI) tree(ctx context.Context, rev string) (map[string]remoteFile, error) {
	u := a.api(a.modelPath("tree", rev))
	u.RawQuery = "recursive=true&expand=false"
	files := map[string]remoteFile{}
	seen := map[string]bool{}
	for pages := 0; u != nil; pages++ {
		if pages == maxTreePages || seen[u.String()] {
			return nil, &ProtocolError{Op: "tree", URL: redact(u), Msg: "the pages do not end"}
		}
		seen[u.String()] = true
		page := u
		resp, err := a.do(ctx, call{op: "tree", ok: []int{http.StatusOK}, mk: func() (*http.Request, error) {
			return http.NewRequest(http.MethodGet, page.String(), nil)
		}})
		if err != nil {
			return nil, err
		}
		next, more := nextLink(resp.Header, page)
		data, err := readJSON(resp, maxPageBytes, nil)
		if err != nil {
			return nil, &ProtocolError{Op: "tree", URL: redact(page), Msg: err.Error()}
		}
		entries, err := decodeTreePage(data)
		if err != nil {
			return nil, &ProtocolError{Op: "tree", URL: redact(page), Msg: err.Error()}
		}
		for _, e := range entries {
			if _, dup := files[e.Path]; dup {
				return nil, &ProtocolError{Op: "tree", URL: redact(page), Msg: e.Path + " listed twice"}
			}
			f := remoteFile{Size: e.Size, OID: e.OID}
			if e.LFS != nil {
				f.LFS = e.LFS.OID
			}
			files[e.Path] = f
		}
		if len(files) > maxTreeFiles {
			return nil, &ProtocolError{Op: "tree", URL: redact(page), Msg: "too many files"}
		}
		u = nil
		if more {
			u = next
		}
	}
	return files, nil
}

// uploadMode is the hub's answer for one file.
type uploadMode struct {
	LFS    bool
	Ignore bool
}

// preupload asks which files go to LFS:
//
//	POST {endpoint}/api/models/{repo}/preupload/{branch}
//	{"files": [{"path", "size", "sample": base64 of the first 512 bytes}],
//	 "gitAttributes": the release's .gitattributes}
//	→ {"files": [{"path", "uploadMode": "lfs"|"regular", "shouldIgnore", "oid"}]}
//
// in requests of 256 files (huggingface_hub: _commit_api._fetch_upload_modes;
// gitAttributes as huggingface.js commit() sends it, so that the hub
// routes by the release's rules rather than the branch's).
func (a *repoAPI) preupload(ctx context.Context, branch string, files []*relFile, samples map[string][]byte, attrs *string) (map[string]uploadMode, error) {
	type fileReq struct {
		Path   string `json:"path"`
		Size   int64  `json:"size"`
		Sample string `json:"sample"`
	}
	u := a.api(a.modelPath("preupload", branch))
	out := map[string]uploadMode{}
	for start := 0; start < len(files); start += preuploadSize {
		chunk := files[start:min(start+preuploadSize, len(files))]
		req := struct {
			Files         []fileReq `json:"files"`
			GitAttributes *string   `json:"gitAttributes,omitempty"`
		}{GitAttributes: attrs}
		for _, f := range chunk {
			req.Files = append(req.Files, fileReq{Path: f.path, Size: f.size, Sample: base64.StdEncoding.EncodeToString(samples[f.path])})
		}
		body, _ := json.Marshal(req)
		resp, err := a.do(ctx, call{op: "preupload", ok: []int{http.StatusOK}, mk: func() (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
			if err == nil {
				r.Header.Set("Content-Type", "application/json")
			}
			return r, err
		}})
		if err != nil {
			return nil, err
		}
		var ans struct {
			Files []struct {
				Path         *string `json:"path"`
				UploadMode   *string `json:"uploadMode"`
				ShouldIgnore bool    `json:"shouldIgnore"`
			} `json:"files"`
		}
		if _, err := readJSON(resp, maxInfoBytes, &ans); err != nil {
			return nil, &ProtocolError{Op: "preupload", URL: redact(u), Msg: err.Error()}
		}
		for _, f := range ans.Files {
			if f.Path == nil || f.UploadMode == nil || *f.UploadMode != "lfs" && *f.UploadMode != "regular" {
				return nil, &ProtocolError{Op: "preupload", URL: redact(u), Msg: "a file without path or with an upload mode other than lfs or regular"}
			}
			out[*f.Path] = uploadMode{LFS: *f.UploadMode == "lfs", Ignore: f.ShouldIgnore}
		}
		for _, f := range chunk {
			if _, ok := out[f.path]; !ok {
				return nil, &ProtocolError{Op: "preupload", URL: redact(u), Msg: "no answer for " + f.path}
			}
		}
	}
	return out, nil
}

// commitAnswer is the commit endpoint's answer.
type commitAnswer struct {
	OID string `json:"commitOid"`
	URL string `json:"commitUrl"`
}

// commit sends the NDJSON payload:
//
//	POST {endpoint}/api/models/{repo}/commit/{branch}
//	Content-Type: application/x-ndjson
//	→ {"commitOid", "commitUrl", "pullRequestUrl", "hookOutput"}
//
// (huggingface_hub: HfApi.create_commit, _commit_api._prepare_commit_payload).
// Retried on network errors, 429, 5xx and 409 (the hub's answer while
// another commit holds the repository). A 412 (the parentCommit is no
// longer the head) comes back as the *HubError.
func (a *repoAPI) commit(ctx context.Context, branch string, payload []byte) (commitAnswer, error) {
	u := a.api(a.modelPath("commit", branch))
	resp, err := a.do(ctx, call{op: "commit", ok: []int{http.StatusOK, http.StatusCreated},
		retry: func(s int) bool { return s == http.StatusConflict || httpstatus.Retryable(s) },
		mk: func() (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(payload))
			if err == nil {
				r.Header.Set("Content-Type", "application/x-ndjson")
			}
			return r, err
		}})
	if err != nil {
		return commitAnswer{}, err
	}
	var ans commitAnswer
	if _, err := readJSON(resp, maxInfoBytes, &ans); err != nil {
		return ans, &ProtocolError{Op: "commit", URL: redact(u), Msg: err.Error()}
	}
	if !isCommit(ans.OID) {
		return ans, &ProtocolError{Op: "commit", URL: redact(u), Msg: fmt.Sprintf("commitOid %q is not a 40-hex commit id", ans.OID)}
	}
	return ans, nil
}

// errTagExists is createTag's answer to a 409.
var errTagExists = errors.New("publish: tag exists")

// createTag tags a commit:
//
//	POST {endpoint}/api/models/{repo}/tag/{commit}  {"tag", "message"}
//
// (huggingface_hub: HfApi.create_tag). 409 (the tag exists) is
// errTagExists.
func (a *repoAPI) createTag(ctx context.Context, tag, commit, message string) error {
	body, _ := json.Marshal(map[string]string{"tag": tag, "message": message})
	u := a.api(a.modelPath("tag", commit))
	resp, err := a.do(ctx, call{op: "tag", ok: []int{http.StatusOK, http.StatusCreated, http.StatusConflict}, mk: func() (*http.Request, error) {
		r, err := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	}})
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusConflict {
		return errTagExists
	}
	return nil
}

// isCommit reports whether s is a 40-hex (lower-case) commit id.
func isCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

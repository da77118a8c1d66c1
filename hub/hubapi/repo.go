package hubapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/lfmq/lfmq/verify/sums"
)

// MaxInfoBytes bounds a JSON answer of the hub that is not a page of a
// list (repo info, preupload, commit).
const MaxInfoBytes = 16 << 20

// Bounds on the tree's answers.
const (
	maxPageBytes = 64 << 20
	maxTreeFiles = 1 << 20
	maxTreePages = 1 << 16
)

// Repo is the client for one repository: the calls that reading it and
// publishing to it share. Package publish adds its writes on top.
type Repo struct {
	*Client
	// ID is the repository, OWNER/NAME.
	ID string
	// Dataset: a dataset repository, whose routes are under api/datasets.
	Dataset bool
}

// Path returns "api/models/{owner}/{name}/{verb}/{escaped rev}"
// (api/datasets/… for a dataset repository), for Client.URL.
func (a *Repo) Path(verb, rev string) string {
	owner, name, _ := strings.Cut(a.ID, "/")
	kind := "models"
	if a.Dataset {
		kind = "datasets"
	}
	return "api/" + kind + "/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/" + verb + "/" + url.PathEscape(rev)
}

// RevState says what the hub knows of a revision.
type RevState int

// The answers of Repo.Revision.
const (
	RevUnknown  RevState = iota // with an error
	RevFound                    // the revision names a commit
	RevMissing                  // the repository has no such revision
	RepoMissing                 // the hub does not have (or show) the repository
)

// Revision resolves a branch, tag or commit to its commit id:
//
//	GET {endpoint}/api/models/{repo}/revision/{rev}  →  {"sha": …, …}
//
// (huggingface_hub: HfApi.model_info / repo_info with revision). A 404
// with X-Error-Code RevisionNotFound is RevMissing; RepoNotFound, or a 401
// that does not complain about the token (what the hub answers for a
// repository it will not show), is RepoMissing with the error.
func (a *Repo) Revision(ctx context.Context, rev string) (string, RevState, error) {
	u := a.URL(a.Path("revision", rev))
	resp, err := a.Do(ctx, Call{Op: "repo info", OK: []int{http.StatusOK}, Build: func() (*http.Request, error) {
		return http.NewRequest(http.MethodGet, u.String(), nil)
	}})
	var he *HubError
	if errors.As(err, &he) {
		switch {
		case he.Status == http.StatusNotFound && he.Code == "RevisionNotFound":
			return "", RevMissing, nil
		case he.Status == http.StatusNotFound && he.Code != "EntryNotFound",
			he.Status == http.StatusUnauthorized && !strings.Contains(strings.ToLower(he.Message), "invalid credentials"):
			return "", RepoMissing, err
		}
	}
	if err != nil {
		return "", 0, err
	}
	var info struct {
		SHA string `json:"sha"`
	}
	if _, err := ReadJSON(resp, MaxInfoBytes, &info); err != nil {
		return "", 0, &ProtocolError{Op: "repo info", URL: Redact(u), Msg: err.Error(), Reading: a.reading}
	}
	if !IsCommit(info.SHA) {
		return "", 0, &ProtocolError{Op: "repo info", URL: Redact(u), Msg: fmt.Sprintf("sha %q is not a 40-hex commit id", info.SHA), Reading: a.reading}
	}
	return info.SHA, RevFound, nil
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
		if !IsCommit(e.OID) || e.Size < 0 {
			return nil, fmt.Errorf("%s: oid %q, size %d", e.Path, e.OID, e.Size)
		}
		if e.LFS != nil && (!sums.ValidSHA256(e.LFS.OID) || e.LFS.Size != e.Size) {
			return nil, fmt.Errorf("%s: lfs oid %q, size %d (file size %d)", e.Path, e.LFS.OID, e.LFS.Size, e.Size)
		}
		out = append(out, e)
	}
	return out, nil
}

// Tree lists every file of a revision, by path:
//
//	GET {endpoint}/api/models/{repo}/tree/{rev}?recursive=true&expand=false
//
// following the Link rel="next" header from page to page
// (huggingface_hub: HfApi.list_repo_tree, utils.paginate).
func (a *Repo) Tree(ctx context.Context, rev string) (map[string]RemoteFile, error) {
	u := a.URL(a.Path("tree", rev))
	u.RawQuery = "recursive=true&expand=false"
	files := map[string]RemoteFile{}
	seen := map[string]bool{}
	for pages := 0; u != nil; pages++ {
		if pages == maxTreePages || seen[u.String()] {
			return nil, &ProtocolError{Op: "tree", URL: Redact(u), Msg: "the pages do not end", Reading: a.reading}
		}
		seen[u.String()] = true
		page := u
		resp, err := a.Do(ctx, Call{Op: "tree", OK: []int{http.StatusOK}, Build: func() (*http.Request, error) {
			return http.NewRequest(http.MethodGet, page.String(), nil)
		}})
		if err != nil {
			return nil, err
		}
		next, more := nextLink(resp.Header, page)
		data, err := ReadJSON(resp, maxPageBytes, nil)
		if err != nil {
			return nil, &ProtocolError{Op: "tree", URL: Redact(page), Msg: err.Error(), Reading: a.reading}
		}
		entries, err := decodeTreePage(data)
		if err != nil {
			return nil, &ProtocolError{Op: "tree", URL: Redact(page), Msg: err.Error(), Reading: a.reading}
		}
		for _, e := range entries {
			if _, dup := files[e.Path]; dup {
				return nil, &ProtocolError{Op: "tree", URL: Redact(page), Msg: e.Path + " listed twice", Reading: a.reading}
			}
			f := RemoteFile{Path: e.Path, Size: e.Size, GitOID: e.OID}
			if e.LFS != nil {
				f.LFS = e.LFS.OID
			}
			files[e.Path] = f
		}
		if len(files) > maxTreeFiles {
			return nil, &ProtocolError{Op: "tree", URL: Redact(page), Msg: "too many files", Reading: a.reading}
		}
		u = nil
		if more {
			u = next
		}
	}
	return files, nil
}

// IsCommit reports whether s is a 40-hex (lower-case) commit id.
func IsCommit(s string) bool {
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

package publish

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/lfmq/lfmq/hub/hubapi"
	"github.com/lfmq/lfmq/internal/httpstatus"
)

// preuploadSize is the files per preupload request, as huggingface_hub.
const preuploadSize = 256

// repoAPI is the client for the repository being published: the reads
// of hubapi.Repo (the head, the tree) and the writes below.
type repoAPI struct {
	*hubapi.Repo
}

// createRepo creates the repository:
//
//	POST {endpoint}/api/repos/create  {"name", "organization", "private"}
//
// (huggingface_hub: HfApi.create_repo; a model repository sends no
// "type"). 409 means it exists already, which is fine. It reports whether
// this call created it.
func (a *repoAPI) createRepo(ctx context.Context, private bool) (bool, error) {
	owner, name, _ := strings.Cut(a.ID, "/")
	body, _ := json.Marshal(map[string]any{"name": name, "organization": owner, "private": private})
	u := a.URL("api/repos/create")
	resp, err := a.Do(ctx, hubapi.Call{Op: "create repo", OK: []int{http.StatusOK, http.StatusCreated, http.StatusConflict}, Build: func() (*http.Request, error) {
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
	u := a.URL(a.Path("preupload", branch))
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
		resp, err := a.Do(ctx, hubapi.Call{Op: "preupload", OK: []int{http.StatusOK}, Build: func() (*http.Request, error) {
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
		if _, err := hubapi.ReadJSON(resp, hubapi.MaxInfoBytes, &ans); err != nil {
			return nil, &hubapi.ProtocolError{Op: "preupload", URL: hubapi.Redact(u), Msg: err.Error()}
		}
		for _, f := range ans.Files {
			if f.Path == nil || f.UploadMode == nil || *f.UploadMode != "lfs" && *f.UploadMode != "regular" {
				return nil, &hubapi.ProtocolError{Op: "preupload", URL: hubapi.Redact(u), Msg: "a file without path or with an upload mode other than lfs or regular"}
			}
			out[*f.Path] = uploadMode{LFS: *f.UploadMode == "lfs", Ignore: f.ShouldIgnore}
		}
		for _, f := range chunk {
			if _, ok := out[f.path]; !ok {
				return nil, &hubapi.ProtocolError{Op: "preupload", URL: hubapi.Redact(u), Msg: "no answer for " + f.path}
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
// longer the head) comes back as the *hubapi.HubError.
func (a *repoAPI) commit(ctx context.Context, branch string, payload []byte) (commitAnswer, error) {
	u := a.URL(a.Path("commit", branch))
	resp, err := a.Do(ctx, hubapi.Call{Op: "commit", OK: []int{http.StatusOK, http.StatusCreated},
		Retry: func(s int) bool { return s == http.StatusConflict || httpstatus.Retryable(s) },
		Build: func() (*http.Request, error) {
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
	if _, err := hubapi.ReadJSON(resp, hubapi.MaxInfoBytes, &ans); err != nil {
		return ans, &hubapi.ProtocolError{Op: "commit", URL: hubapi.Redact(u), Msg: err.Error()}
	}
	if !hubapi.IsCommit(ans.OID) {
		return ans, &hubapi.ProtocolError{Op: "commit", URL: hubapi.Redact(u), Msg: fmt.Sprintf("commitOid %q is not a 40-hex commit id", ans.OID)}
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
	u := a.URL(a.Path("tag", commit))
	resp, err := a.Do(ctx, hubapi.Call{Op: "tag", OK: []int{http.StatusOK, http.StatusCreated, http.StatusConflict}, Build: func() (*http.Request, error) {
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

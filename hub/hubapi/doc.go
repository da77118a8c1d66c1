// Package hubapi is lfmq's client of a Hugging Face style hub's HTTP API:
// the Client (the token sent to the endpoint's own host only, retries,
// URLs redacted in messages, the hub's error answers read into
// *HubError), the repository calls that reading a repository and
// publishing to it share (Repo: the commit a revision names, the files of
// a commit), and Remote, the read-only access that package hfcache lists
// a model's or a dataset's commit with. It speaks the API directly, as the
// huggingface_hub Python library does; it needs no git.
//
// It does not write to the hub: package publish adds the repository
// creation, preupload, the LFS uploads, the commit and the tag on top of
// Client and Repo. It does not fetch file contents either: packages
// download and hfcache read them from the resolve URLs.
//
// # Protocol
//
// Every path below is under the endpoint (default https://huggingface.co)
// and every revision in a path is percent-escaped as one segment; a
// dataset repository's routes are under api/datasets instead of
// api/models. The token goes as "Authorization: Bearer" to the endpoint's
// scheme and host only. Errors are read as the hub writes them
// (huggingface_hub: utils._http.hf_raise_for_status): X-Error-Code
// (RepoNotFound, RevisionNotFound, EntryNotFound), X-Error-Message, and a
// JSON body with "error" (string or list), "errors"[].message or
// "message" (the LFS API's field); they become *HubError. Network errors,
// 429 and 5xx are retried with backoff (RetryDefaults); each attempt
// rebuilds its request (Call.Build), so that a body can be sent again.
//
// The commit a branch, tag or commit names, and whether the repository
// exists (huggingface_hub: HfApi.repo_info / model_info with a revision):
//
//	GET  /api/models/{owner}/{name}/revision/{rev}
//	200  {"sha": "<40 hex>", …}
//	404  X-Error-Code: RevisionNotFound   no such revision (a branch: no commit yet)
//	404  X-Error-Code: RepoNotFound (or 401 without "Invalid credentials")
//
// Files of a revision (HfApi.list_repo_tree, utils.paginate):
//
//	GET  /api/models/{owner}/{name}/tree/{commit}?recursive=true&expand=false
//	200  [{"type": "file", "path", "size", "oid": git blob id,
//	       "lfs": {"oid": sha256, "size", "pointerSize"}}, {"type": "directory", …}]
//	     Link: <next page URL>; rel="next"      followed until absent
package hubapi

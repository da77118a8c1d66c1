// Package publish uploads a release directory
// (docs/release.md, "Layout") to a Hugging Face style hub as one
// commit on a branch, and tags it with the release's revision, so that
// lfmq download (package download) fetches it back byte for byte. It
// speaks the hub's HTTP API directly through package hubapi's client,
// as the huggingface_hub Python library does; it needs no git and no git-lfs.
//
// It publishes; it does not build, sign or verify a release (packages
// release/bundle, format/sshsig and verify do), and it is not a general
// upload tool: the release's own lists (SHA256SUMS, runtime-release.json)
// say which files are published, and the branch ends up holding exactly
// those files: remote files that are not part of the release are deleted
// in the same commit (except .gitattributes, which the release replaces
// with its own). Reading a repository (the commit a revision names, the
// files of a commit) is package hubapi's, which hfcache uses as well;
// publish adds the writes.
//
// # Protocol
//
// Every path below is under the endpoint (default https://huggingface.co)
// and every revision in a path is percent-escaped as one segment. The
// token, the hub's error answers (*hubapi.HubError) and the retries (here
// Options.Retries) are package hubapi's, whose documentation gives them;
// each attempt rebuilds its request, re-reading an upload body from the
// file.
//
// Head of the branch, and whether the repository exists: hubapi's
// Repo.Revision (GET /api/models/{owner}/{name}/revision/{branch}), where
// RevisionNotFound means the branch has no commit yet and a repository
// the hub does not have is a *hubapi.RepoNotFoundError.
//
// Repository creation, only with Options.Create (HfApi.create_repo):
//
//	POST /api/repos/create  {"name", "organization", "private"}
//	200  created;  409  exists already (fine)
//
// Files of a revision: hubapi's Repo.Tree (GET
// /api/models/{owner}/{name}/tree/{commit}, every page).
//
// A release file is unchanged when the remote file at its path has the
// same size and, for an LFS file, the same sha256 (from SHA256SUMS, not
// recomputed), or, for a regular file, the same git blob id
// sha1("blob <size>\0" + content).
//
// Upload modes of the changed files (_commit_api._fetch_upload_modes;
// the gitAttributes field as huggingface.js commit() sends it), 256 files
// a request:
//
//	POST /api/models/{owner}/{name}/preupload/{branch}
//	     {"files": [{"path", "size", "sample": base64 of the first 512 bytes}],
//	      "gitAttributes": the release's .gitattributes}
//	200  {"files": [{"path", "uploadMode": "lfs"|"regular", "shouldIgnore", "oid"}]}
//
// Decisions here: the release's .gitattributes is the authority for LFS
// routing (a file it routes goes to LFS whatever the hub says; an empty
// file is always regular); a file the hub wants in LFS that the release
// does not route is a *RoutingError before anything is uploaded, because
// the hub would append a rule to .gitattributes and the published release
// would no longer verify; a file the hub's .gitignore ignores
// (shouldIgnore) is an *IgnoredError, because huggingface_hub would
// silently leave it out and the release would be incomplete.
//
// LFS objects (lfs.post_lfs_batch_info, lfs.lfs_upload; git-lfs
// docs/api/batch.md and basic-transfers.md), 256 objects a request:
//
//	POST /{owner}/{name}.git/info/lfs/objects/batch
//	     Accept, Content-Type: application/vnd.git-lfs+json
//	     {"operation": "upload", "transfers": ["basic", "multipart"],
//	      "ref": {"name": branch}, "objects": [{"oid", "size"}], "hash_algo": "sha256"}
//	200  {"transfer", "objects": [{"oid", "size", "actions": {"upload", "verify"}} | {"oid", "size", "error"}]}
//
// An object without actions is stored already: it is not sent (this is
// what makes a second run after an interrupted one send only what is
// missing). Otherwise:
//
//   - basic: PUT upload.href with the action's headers, the exact
//     Content-Length and the file streamed from disk; no token (the href
//     is the object store's).
//   - multipart (upload.header has "chunk_size"; lfs._upload_multi_part):
//     the parts are upload.header["00001"], ["00002"], …, exactly
//     ceil(size/chunk_size) of them; each part is PUT from its own
//     io.SectionReader and answers an ETag; then
//     POST upload.href {"oid", "parts": [{"partNumber", "etag"}]} with the
//     LFS media type. A multipart upload that fails is started again from
//     the batch call by the next run (the hub does not keep parts).
//   - then, when present, POST verify.href {"oid", "size"} with the LFS
//     media type and the action's headers.
//
// Objects upload in parallel (Options.Jobs uploads in flight, whole
// objects and parts together); one object's failure does not stop the
// others, so that what completes is kept. The hub's newer Xet transfer is
// not used: it is not offered in "transfers".
//
// The commit (HfApi.create_commit, _commit_api._prepare_commit_payload):
//
//	POST /api/models/{owner}/{name}/commit/{branch}
//	     Content-Type: application/x-ndjson, one JSON object a line:
//	     {"key": "header", "value": {"summary", "description", "parentCommit"}}
//	     {"key": "file", "value": {"path", "encoding": "base64", "content"}}
//	     {"key": "lfsFile", "value": {"path", "algo": "sha256", "oid", "size"}}
//	     {"key": "deletedFile", "value": {"path"}}
//	200  {"commitOid", "commitUrl", "hookOutput", "pullRequestUrl"}
//	412  "A commit has happened since. Please refresh and try again."
//
// parentCommit is the head read at the start (omitted for a branch
// without commits). The hub answers 412 Precondition Failed when the
// branch has moved since (huggingface_hub's parent_commit; the 412 and
// its message are reported in huggingface/dataset-viewer#2159 and
// huggingface/datasets#7777): that is a *StaleError and nothing is
// committed, unless the branch now holds exactly the release (a retried
// commit whose first answer was lost). 409 (another commit holds the
// repository) is retried. With nothing to change no commit is made
// (Result.UpToDate), as huggingface_hub skips empty commits.
//
// The tag (HfApi.create_tag):
//
//	POST /api/models/{owner}/{name}/tag/{commit}  {"tag", "message"}
//	200  created;  409  exists
//
// The tag is made on the commit id, not the branch, so a branch that
// moves after the commit cannot shift it. A tag that exists is looked up
// (GET …/revision/{tag}) before anything is uploaded: when its files are
// exactly the release's the publish is done (UpToDate, nothing sent);
// otherwise, or when it names another commit after ours, it is a
// *TagError: a published tag is never moved.
package publish

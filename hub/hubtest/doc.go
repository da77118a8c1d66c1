// Package hubtest emulates a Hugging Face style hub in process, for tests.
//
// Hub serves one release directory read-only at
// /{owner}/{name}/resolve/{rev}/{path} with Range support, X-Repo-Commit
// and optional LFS ETags, and injects faults (a connection dropped
// mid-file, a corrupted byte, a 503 or any other status).
//
// Server is a mutable hub: repositories in memory (commits holding whole
// trees, branches, tags, an LFS object store per repository) behind the
// API that packages hubapi (reads) and publish (writes) speak, strict
// enough to catch protocol mistakes:
//
//	POST /api/repos/create                          409 when it exists
//	GET  /api/models/{repo}/revision/{rev}          {"sha"}; 404 RepoNotFound / RevisionNotFound
//	GET  /api/models/{repo}/tree/{rev}[/{dir}]      paginated (PageSize), Link rel="next"
//	POST /api/models/{repo}/preupload/{rev}         lfs by .gitattributes, size, NUL in the sample
//	POST /{repo}.git/info/lfs/objects/batch         basic, or multipart above MultipartThreshold
//	PUT  /lfs-storage/{upload}[/{part}]?sig=…       on StorageURL when set; Content-Length required
//	POST /api/complete_multipart?uploadId=…&sig=…   every part's ETag, the assembled sha256
//	POST /{repo}.git/info/lfs/objects/verify        stores the object (only then is it committable)
//	POST /api/models/{repo}/commit/{branch}         NDJSON, strictly read; 412 on a stale parentCommit
//	POST /api/models/{repo}/tag/{rev}               409 when it exists
//	GET  /{repo}/resolve/{rev}/{path}               X-Repo-Commit; X-Linked-Etag for LFS files
//
// The write endpoints (create, preupload, batch, verify, commit, tag)
// want the configured token as a Bearer (401 otherwise); the storage
// URLs and the multipart completion carry a signature instead, as the
// hub's do, and the storage handler records every request that carries
// an Authorization header (Leaks). Faults: a connection cut after N bytes of an upload or
// part (DropUpload), a 5xx on an upload or part (FailUpload), a branch
// that moves just before a commit (MoveBranchOnNextCommit). Counters:
// bytes received per LFS object (Received), attempts per part (Attempts),
// every request (Requests); commits and trees for assertions (Commits,
// Files, Head, Tag).
//
// It is test support, used with net/http/httptest; nothing in lfmq serves
// releases with it.
package hubtest

package hubtest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lfmq/lfmq/internal/httpstatus"
)

// DefaultGitAttributes is the .gitattributes of the initial commit the
// server gives a new repository, a short form of the one the hub writes.
const DefaultGitAttributes = `*.bin filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
*.tar.gz filter=lfs diff=lfs merge=lfs -text
*.zip filter=lfs diff=lfs merge=lfs -text
`

// StaleMessage is the error the server answers, with 412, to a commit whose
// parentCommit is not the branch head (the hub's words).
const StaleMessage = "A commit has happened since. Please refresh and try again."

// Server is a mutable, in-memory hub for tests: repositories with commits,
// branches and tags, an LFS object store per repository, and the HTTP API
// that packages hubapi and publish speak (see the package comment for the
// endpoints).
// Serve it with httptest.NewServer; Storage serves the LFS upload URLs on
// a second server when StorageURL is set.
//
// Configure the exported fields before the first request.
type Server struct {
	// Token, when set, is the only credential accepted: write endpoints
	// require "Authorization: Bearer <Token>" (401 otherwise) and private
	// repositories require it for reads.
	Token string
	// StorageURL, when set, is the base URL of a server running Storage():
	// basic upload and multipart part URLs point there, as the hub's point
	// at its object store. When empty the hub serves them itself.
	StorageURL string
	// LFSThreshold: preupload routes files of at least this many bytes to
	// LFS, and the commit endpoint refuses larger inline files (default
	// 10 MiB).
	LFSThreshold int64
	// MultipartThreshold: LFS objects larger than this are uploaded with the
	// multipart transfer when the client offers it (default 64 MiB).
	MultipartThreshold int64
	// ChunkSize is the multipart part size (default 16 MiB).
	ChunkSize int64
	// PageSize is the number of tree entries per page (default 10, small on
	// purpose so that clients must follow the Link header).
	PageSize int
	// EmptyRepos makes new repositories have no commit at all; by default
	// a new repository gets an initial commit holding DefaultGitAttributes,
	// as the hub's do.
	EmptyRepos bool

	mu       sync.Mutex
	repos    map[string]*repoState
	uploads  map[string]*upload
	seq      int
	received map[string]int64
	// storing counts the storage PUTs being read; idle (on mu) is
	// signalled when it drops to 0. stored is when one last started or
	// ended.
	storing  int
	idle     *sync.Cond
	stored   time.Time
	attempts map[partKey]int
	drops    map[partKey]*drop
	fails    map[partKey]*fail
	movers   map[string]bool // repo+"\x00"+branch: move on the next commit
	requests []ServerRequest
	leaks    []string
}

// File is one file of a commit's tree: Content for a regular file, LFS (its
// sha256) for an LFS file.
type File struct {
	Size    int64
	Content []byte
	LFS     string
}

// CommitInfo describes one commit.
type CommitInfo struct {
	ID, Parent           string
	Summary, Description string
	// Changed are the paths added or modified, Deleted those removed,
	// relative to the parent; sorted.
	Changed, Deleted []string
}

// ServerRequest records one request either handler answered.
type ServerRequest struct {
	Method string
	// Host is the request's host; Path its escaped path.
	Host, Path string
	Status     int
	// Token reports whether the request carried the configured token.
	Token bool
}

type repoState struct {
	id       string
	private  bool
	commits  map[string]*commit
	branches map[string]string
	tags     map[string]string
	objects  map[string][]byte // LFS store, verified objects by sha256
	pending  map[string][]byte // uploaded, not yet verified
}

type commit struct {
	info  CommitInfo
	files map[string]File
}

type partKey struct {
	oid  string
	part int
}

type drop struct {
	after int64
	times int
}

type fail struct {
	status, times int
}

// NewServer returns a server with the default settings.
func NewServer() *Server {
	return &Server{
		LFSThreshold: 10 << 20, MultipartThreshold: 64 << 20, ChunkSize: 16 << 20, PageSize: 10,
		repos: map[string]*repoState{}, uploads: map[string]*upload{},
		received: map[string]int64{}, attempts: map[partKey]int{},
		drops: map[partKey]*drop{}, fails: map[partKey]*fail{}, movers: map[string]bool{},
	}
}

// CreateRepo creates a repository as the create endpoint does; it fails
// when the repository exists.
func (s *Server) CreateRepo(id string, private bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createRepo(id, private)
}

func (s *Server) createRepo(id string, private bool) error {
	if _, ok := s.repos[id]; ok {
		return errors.New("You already created this model repo")
	}
	r := &repoState{id: id, private: private, commits: map[string]*commit{}, branches: map[string]string{},
		tags: map[string]string{}, objects: map[string][]byte{}, pending: map[string][]byte{}}
	s.repos[id] = r
	if !s.EmptyRepos {
		files := map[string]File{".gitattributes": regular([]byte(DefaultGitAttributes))}
		s.addCommit(r, "main", "initial commit", "", files)
	}
	return nil
}

// CommitFiles makes a commit on branch outside the HTTP API: add's files
// (stored as regular files) are written, remove's deleted. It returns the
// new commit.
func (s *Server) CommitFiles(repo, branch, summary string, add map[string][]byte, remove []string) (string, error) {
	return s.commitFiles(repo, branch, summary, add, remove, false)
}

// CommitLFSFiles is CommitFiles, except that the files the branch's
// .gitattributes routes to LFS are stored as LFS objects, as an upload
// through the API would store them (and served with their sha256 as
// X-Linked-Etag).
func (s *Server) CommitLFSFiles(repo, branch, summary string, add map[string][]byte) (string, error) {
	return s.commitFiles(repo, branch, summary, add, nil, true)
}

func (s *Server) commitFiles(repo, branch, summary string, add map[string][]byte, remove []string, useLFS bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos[repo]
	if !ok {
		return "", fmt.Errorf("hubtest: no repository %s", repo)
	}
	files := map[string]File{}
	if head, ok := r.branches[branch]; ok {
		files = maps.Clone(r.commits[head].files)
	}
	for _, p := range remove {
		delete(files, p)
	}
	rules := parseAttributes(string(files[".gitattributes"].Content))
	for p, data := range add {
		if !useLFS || !rules.lfs(p) {
			files[p] = regular(data)
			continue
		}
		oid := sha256Hex(data)
		r.objects[oid] = data
		files[p] = File{Size: int64(len(data)), LFS: oid}
	}
	return s.addCommit(r, branch, summary, "", files), nil
}

// MoveBranchOnNextCommit makes the branch move just before the next commit
// request for it is handled, as if someone else had committed in between:
// a client that sends the head it read as parentCommit gets 412.
func (s *Server) MoveBranchOnNextCommit(repo, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.movers[repo+"\x00"+branch] = true
}

// DropUpload cuts the connection after the first after bytes of the
// request body, for the next times uploads of the LFS object oid: part 0
// is a basic upload, part n ≥ 1 the n-th multipart part.
func (s *Server) DropUpload(oid string, part int, after int64, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops[partKey{oid, part}] = &drop{after: after, times: times}
}

// FailUpload answers status (a 5xx) to the next times uploads of oid's
// part (0: a basic upload), after reading the body.
func (s *Server) FailUpload(oid string, part, status, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[partKey{oid, part}] = &fail{status: status, times: times}
}

// ClearFaults removes every pending drop, failure and branch move.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.drops)
	clear(s.fails)
	clear(s.movers)
}

// Received returns the upload body bytes received so far for the LFS
// object oid, over every attempt, basic or multipart. After a failed
// publish, call Settle first: the count can still grow.
func (s *Server) Received(oid string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received[oid]
}

// Settle waits until no upload has been read for quiet: after a client
// gave up on a release (a part failed for good), the requests it had
// already sent on other connections can still be waiting for the server
// to read them, and counts taken before they are would grow afterwards.
// A test calls it before it takes counts to compare with a later run's.
func (s *Server) Settle(quiet time.Duration) {
	for {
		s.mu.Lock()
		for s.storing > 0 {
			s.idleCond().Wait()
		}
		wait := quiet - time.Since(s.stored)
		s.mu.Unlock()
		if wait <= 0 {
			return
		}
		time.Sleep(wait)
	}
}

// idleCond is the condition that storing reached 0; s.mu must be held.
func (s *Server) idleCond() *sync.Cond {
	if s.idle == nil {
		s.idle = sync.NewCond(&s.mu)
	}
	return s.idle
}

// Attempts returns how many uploads of oid's part were started (0: basic).
func (s *Server) Attempts(oid string, part int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[partKey{oid, part}]
}

// Head returns the commit a branch points at, or "".
func (s *Server) Head(repo, branch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.repos[repo]; ok {
		return r.branches[branch]
	}
	return ""
}

// Tag returns the commit a tag points at, or "".
func (s *Server) Tag(repo, tag string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.repos[repo]; ok {
		return r.tags[tag]
	}
	return ""
}

// Commits returns the first-parent history of a branch, newest first.
func (s *Server) Commits(repo, branch string) []CommitInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos[repo]
	if !ok {
		return nil
	}
	var out []CommitInfo
	for id := r.branches[branch]; id != ""; id = r.commits[id].info.Parent {
		c := r.commits[id].info
		c.Changed, c.Deleted = slices.Clone(c.Changed), slices.Clone(c.Deleted)
		out = append(out, c)
	}
	return out
}

// Files returns the tree of a revision (branch, tag or commit).
func (s *Server) Files(repo, rev string) (map[string]File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos[repo]
	if !ok {
		return nil, fmt.Errorf("hubtest: no repository %s", repo)
	}
	c := r.resolve(rev)
	if c == nil {
		return nil, fmt.Errorf("hubtest: %s has no revision %s", repo, rev)
	}
	return maps.Clone(c.files), nil
}

// Object returns a stored LFS object of repo, or nil.
func (s *Server) Object(repo, oid string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.repos[repo]; ok {
		return r.objects[oid]
	}
	return nil
}

// Requests returns every request answered so far.
func (s *Server) Requests() []ServerRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Leaks returns the requests (method and URL) that carried an
// Authorization header to the storage server, or the token anywhere it
// was not needed on another host. Empty when the client behaves.
func (s *Server) Leaks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.leaks)
}

func regular(data []byte) File {
	return File{Size: int64(len(data)), Content: data}
}

// BlobOID returns the git blob id of content: sha1("blob <size>\0" + content).
func BlobOID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// Pointer returns the git-lfs pointer file of an object.
func Pointer(oid string, size int64) []byte {
	return fmt.Appendf(nil, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, size)
}

// gitOID is the git blob id of a tree file: of its content, or of its
// pointer for an LFS file.
func (f File) gitOID() string {
	if f.LFS != "" {
		return BlobOID(Pointer(f.LFS, f.Size))
	}
	return BlobOID(f.Content)
}

func (r *repoState) resolve(rev string) *commit {
	if id, ok := r.branches[rev]; ok {
		return r.commits[id]
	}
	if id, ok := r.tags[rev]; ok {
		return r.commits[id]
	}
	if c, ok := r.commits[rev]; ok {
		return c
	}
	return nil
}

// addCommit records a commit of files on branch and moves the branch.
func (s *Server) addCommit(r *repoState, branch, summary, description string, files map[string]File) string {
	s.seq++
	parent := r.branches[branch]
	var old map[string]File
	if parent != "" {
		old = r.commits[parent].files
	}
	h := sha1.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00%s", r.id, parent, s.seq, summary, description)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "\x00%s\x00%s", p, files[p].gitOID())
	}
	id := hex.EncodeToString(h.Sum(nil))
	info := CommitInfo{ID: id, Parent: parent, Summary: summary, Description: description}
	for p, f := range files {
		if o, ok := old[p]; !ok || o.gitOID() != f.gitOID() {
			info.Changed = append(info.Changed, p)
		}
	}
	for p := range old {
		if _, ok := files[p]; !ok {
			info.Deleted = append(info.Deleted, p)
		}
	}
	slices.Sort(info.Changed)
	slices.Sort(info.Deleted)
	r.commits[id] = &commit{info: info, files: files}
	r.branches[branch] = id
	return id
}

// randomID returns 32 random hex digits.
func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// apiError answers status with the hub's error shape: a JSON body
// {"error": msg}, the X-Error-Message header and, when code is set,
// X-Error-Code.
func apiError(w http.ResponseWriter, status int, code, msg string) {
	h := w.Header()
	if code != "" {
		h.Set("X-Error-Code", code)
	}
	h.Set("X-Error-Message", msg)
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// readJSON decodes a request body of at most limit bytes into v; on
// failure it answers 400 and returns false.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit)).Decode(v); err != nil {
		apiError(w, http.StatusBadRequest, "", "invalid JSON: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// bearer reports whether r carries the configured token. With no token
// configured every request is authorised.
func (s *Server) bearer(r *http.Request) bool {
	return s.Token == "" || r.Header.Get("Authorization") == "Bearer "+s.Token
}

func (s *Server) record(r *http.Request, status int, storage bool) {
	auth := r.Header.Get("Authorization")
	hasToken := s.Token != "" && strings.Contains(auth, s.Token)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, ServerRequest{Method: r.Method, Host: r.Host, Path: r.URL.EscapedPath(), Status: status, Token: hasToken})
	if storage && auth != "" {
		s.leaks = append(s.leaks, r.Method+" "+r.Host+r.URL.EscapedPath())
	}
}

// segments splits an escaped path into unescaped segments.
func segments(escaped string) ([]string, bool) {
	parts := strings.Split(strings.Trim(escaped, "/"), "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, false
		}
		parts[i] = u
	}
	return parts, true
}

// ServeHTTP serves the hub API, downloads and (without StorageURL) the
// LFS storage URLs.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &httpstatus.Writer{ResponseWriter: w}
	storage := strings.HasPrefix(r.URL.Path, storagePrefix)
	defer func() { s.record(r, sw.Status, storage && s.StorageURL != "") }()
	if storage {
		s.serveStorage(sw, r)
		return
	}
	s.route(sw, r)
}

// Storage returns the handler of the LFS storage URLs, for a second
// server whose URL is StorageURL. It records any request that carries an
// Authorization header: the hub's token must never reach it.
func (s *Server) Storage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &httpstatus.Writer{ResponseWriter: w}
		defer func() { s.record(r, sw.Status, true) }()
		if !strings.HasPrefix(r.URL.Path, storagePrefix) {
			apiError(sw, http.StatusNotFound, "", "not a storage URL")
			return
		}
		s.serveStorage(sw, r)
	})
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	segs, ok := segments(r.URL.EscapedPath())
	if !ok {
		apiError(w, http.StatusBadRequest, "", "bad path escape")
		return
	}
	switch {
	case len(segs) == 3 && segs[0] == "api" && segs[1] == "repos" && segs[2] == "create" && r.Method == http.MethodPost:
		s.serveCreate(w, r)
	case len(segs) == 2 && segs[0] == "api" && segs[1] == "complete_multipart" && r.Method == http.MethodPost:
		s.serveComplete(w, r)
	case len(segs) >= 5 && segs[0] == "api" && segs[1] == "models":
		s.serveAPI(w, r, segs[2]+"/"+segs[3], segs[4], segs[5:])
	case len(segs) == 6 && strings.HasSuffix(segs[1], ".git") && segs[2] == "info" && segs[3] == "lfs" && segs[4] == "objects" && r.Method == http.MethodPost:
		repo := segs[0] + "/" + strings.TrimSuffix(segs[1], ".git")
		switch segs[5] {
		case "batch":
			s.serveBatch(w, r, repo)
		case "verify":
			s.serveVerify(w, r, repo)
		default:
			apiError(w, http.StatusNotFound, "", "no such LFS endpoint")
		}
	case len(segs) >= 5 && segs[2] == "resolve" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.serveResolve(w, r, segs[0]+"/"+segs[1], segs[3], strings.Join(segs[4:], "/"))
	default:
		apiError(w, http.StatusNotFound, "", "no such endpoint: "+r.Method+" "+r.URL.Path)
	}
}

// repoFor returns the repository for a read (write: a write), answering
// the error itself when it returns nil. Call with s.mu held.
func (s *Server) repoFor(w http.ResponseWriter, r *http.Request, id string, write bool) *repoState {
	if s.Token != "" && r.Header.Get("Authorization") != "" && !s.bearer(r) {
		apiError(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
		return nil
	}
	if write && !s.bearer(r) {
		apiError(w, http.StatusUnauthorized, "", "Authorization header is required for this endpoint")
		return nil
	}
	repo, ok := s.repos[id]
	if !ok || repo.private && !s.bearer(r) {
		apiError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
		return nil
	}
	return repo
}

func (s *Server) serveCreate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name         string `json:"name"`
		Organization string `json:"organization"`
		Private      bool   `json:"private"`
		Type         string `json:"type"`
	}
	if !s.bearer(r) {
		apiError(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
		return
	}
	if !readJSON(w, r, 1<<20, &req) {
		return
	}
	if req.Type != "" && req.Type != "model" {
		apiError(w, http.StatusBadRequest, "", "only model repositories are served")
		return
	}
	id := req.Organization + "/" + req.Name
	if !validRepoName(req.Organization) || !validRepoName(req.Name) {
		apiError(w, http.StatusBadRequest, "", "invalid repository name "+strconv.Quote(id))
		return
	}
	s.mu.Lock()
	err := s.createRepo(id, req.Private)
	s.mu.Unlock()
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Error-Message", err.Error())
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error(), "url": "http://" + r.Host + "/" + id})
		return
	}
	writeJSON(w, map[string]string{"url": "http://" + r.Host + "/" + id, "name": id})
}

func validRepoName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 96 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// serveAPI routes /api/models/{owner}/{name}/{verb}/{rest...}.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, repo, verb string, rest []string) {
	switch {
	case verb == "revision" && len(rest) == 1 && r.Method == http.MethodGet:
		s.serveRevision(w, r, repo, rest[0])
	case verb == "tree" && len(rest) >= 1 && r.Method == http.MethodGet:
		s.serveTree(w, r, repo, rest[0], strings.Join(rest[1:], "/"))
	case verb == "preupload" && len(rest) == 1 && r.Method == http.MethodPost:
		s.servePreupload(w, r, repo, rest[0])
	case verb == "commit" && len(rest) == 1 && r.Method == http.MethodPost:
		s.serveCommit(w, r, repo, rest[0])
	case verb == "tag" && len(rest) == 1 && r.Method == http.MethodPost:
		s.serveTag(w, r, repo, rest[0])
	default:
		apiError(w, http.StatusNotFound, "", "no such endpoint: "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) serveRevision(w http.ResponseWriter, r *http.Request, id, rev string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := s.repoFor(w, r, id, false)
	if repo == nil {
		return
	}
	c := repo.resolve(rev)
	if c == nil {
		apiError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	siblings := []map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(c.files)) {
		siblings = append(siblings, map[string]string{"rfilename": p})
	}
	writeJSON(w, map[string]any{"id": id, "modelId": id, "sha": c.info.ID, "private": repo.private, "siblings": siblings})
}

// treeEntry is one entry of the tree endpoint's answer.
type treeEntry struct {
	Type string   `json:"type"`
	OID  string   `json:"oid"`
	Size int64    `json:"size"`
	Path string   `json:"path"`
	LFS  *lfsInfo `json:"lfs,omitempty"`
}

type lfsInfo struct {
	OID         string `json:"oid"`
	Size        int64  `json:"size"`
	PointerSize int64  `json:"pointerSize"`
}

// serveTree lists a revision's tree under dir (recursive=true for every
// level), sorted, PageSize entries a page with a Link header to the next
// (?cursor=N).
func (s *Server) serveTree(w http.ResponseWriter, r *http.Request, id, rev, dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := s.repoFor(w, r, id, false)
	if repo == nil {
		return
	}
	c := repo.resolve(rev)
	if c == nil {
		apiError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	q := r.URL.Query()
	recursive := q.Get("recursive") == "true" || q.Get("recursive") == "1"
	prefix := ""
	if dir != "" {
		prefix = strings.TrimSuffix(dir, "/") + "/"
	}
	// Entries: every file under prefix and every directory on the way.
	seen := map[string]treeEntry{}
	for p, f := range c.files {
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		parts := strings.Split(rel, "/")
		depth := len(parts)
		if !recursive {
			depth = 1
		}
		for i := 1; i < depth && i < len(parts); i++ {
			d := prefix + strings.Join(parts[:i], "/")
			seen[d] = treeEntry{Type: "directory", OID: BlobOID([]byte(d)), Path: d}
		}
		if !recursive && len(parts) > 1 {
			d := prefix + parts[0]
			seen[d] = treeEntry{Type: "directory", OID: BlobOID([]byte(d)), Path: d}
			continue
		}
		e := treeEntry{Type: "file", OID: f.gitOID(), Size: f.Size, Path: p}
		if f.LFS != "" {
			e.LFS = &lfsInfo{OID: f.LFS, Size: f.Size, PointerSize: int64(len(Pointer(f.LFS, f.Size)))}
		}
		seen[p] = e
	}
	if dir != "" && len(seen) == 0 {
		apiError(w, http.StatusNotFound, "EntryNotFound", "no such directory: "+dir)
		return
	}
	keys := slices.Sorted(maps.Keys(seen))
	start := 0
	if cur := q.Get("cursor"); cur != "" {
		n, err := strconv.Atoi(cur)
		if err != nil || n < 0 || n > len(keys) {
			apiError(w, http.StatusBadRequest, "", "bad cursor")
			return
		}
		start = n
	}
	page := max(s.PageSize, 1)
	end := min(start+page, len(keys))
	out := make([]treeEntry, 0, end-start)
	for _, k := range keys[start:end] {
		out = append(out, seen[k])
	}
	if end < len(keys) {
		next := *r.URL
		next.Scheme, next.Host = "http", r.Host
		nq := next.Query()
		nq.Set("cursor", strconv.Itoa(end))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", next.String()))
	}
	writeJSON(w, out)
}

func (s *Server) serveTag(w http.ResponseWriter, r *http.Request, id, rev string) {
	var req struct {
		Tag     string `json:"tag"`
		Message string `json:"message"`
	}
	if !readJSON(w, r, 1<<20, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := s.repoFor(w, r, id, true)
	if repo == nil {
		return
	}
	if !validRepoName(req.Tag) {
		apiError(w, http.StatusBadRequest, "", "invalid tag name "+strconv.Quote(req.Tag))
		return
	}
	c := repo.resolve(rev)
	if c == nil {
		apiError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	if _, ok := repo.tags[req.Tag]; ok {
		apiError(w, http.StatusConflict, "", "Tag "+req.Tag+" already exists")
		return
	}
	if _, ok := repo.branches[req.Tag]; ok {
		apiError(w, http.StatusConflict, "", "A branch named "+req.Tag+" exists")
		return
	}
	repo.tags[req.Tag] = c.info.ID
	writeJSON(w, map[string]string{})
}

// serveResolve serves a file of a revision as the hub's download URL
// does: X-Repo-Commit always, ETag the git blob id of a regular file, and
// for an LFS file X-Linked-Etag (its sha256) and X-Linked-Size.
func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, id, rev, p string) {
	s.mu.Lock()
	repo := s.repoFor(w, r, id, false)
	if repo == nil {
		s.mu.Unlock()
		return
	}
	c := repo.resolve(rev)
	if c == nil {
		s.mu.Unlock()
		apiError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	f, ok := c.files[p]
	var data []byte
	if ok {
		data = f.Content
		if f.LFS != "" {
			data = repo.objects[f.LFS]
		}
	}
	s.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
		return
	}
	h := w.Header()
	h.Set("X-Repo-Commit", c.info.ID)
	if f.LFS != "" {
		h.Set("X-Linked-Etag", `"`+f.LFS+`"`)
		h.Set("X-Linked-Size", strconv.FormatInt(f.Size, 10))
	} else {
		h.Set("ETag", `"`+f.gitOID()+`"`)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// sha256Hex returns the hex sha256 of data.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

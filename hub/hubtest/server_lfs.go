package hubtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// storagePrefix starts the path of every upload URL the server hands out.
const storagePrefix = "/lfs-storage/"

// upload is one LFS object's transfer in progress.
type upload struct {
	id, repo, oid string
	size          int64
	sig           string // the query signature the URLs carry
	chunk         int64  // > 0 for multipart
	// data holds a multipart object; each part is received straight into
	// its place, and parts[i] is that place once part i+1 has arrived.
	data  []byte
	parts [][]byte
	etags []string
}

func (u *upload) numParts() int {
	if u.chunk <= 0 {
		return 0
	}
	return int((u.size + u.chunk - 1) / u.chunk)
}

// servePreupload answers which files go to LFS (uploadMode "lfs" or
// "regular"), whether .gitignore rules ignore them (shouldIgnore) and the
// oid of the file now at that path (sha256 for LFS, git blob id
// otherwise). A file goes to LFS when the request's gitAttributes (else
// the revision's .gitattributes) routes it there, when it is at least
// LFSThreshold bytes, or when its sample holds a NUL byte, git's test for
// binary content; an empty file is always regular.
func (s *Server) servePreupload(w http.ResponseWriter, r *http.Request, id, rev string) {
	var req struct {
		Files []struct {
			Path   string `json:"path"`
			Size   *int64 `json:"size"`
			Sample string `json:"sample"`
		} `json:"files"`
		GitAttributes *string `json:"gitAttributes"`
		GitIgnore     *string `json:"gitIgnore"`
	}
	if !readJSON(w, r, 16<<20, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := s.repoFor(w, r, id, true)
	if repo == nil {
		return
	}
	files := map[string]File{}
	if c := repo.resolve(rev); c != nil {
		files = c.files
	} else if len(repo.commits) > 0 {
		apiError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	attrs := string(files[".gitattributes"].Content)
	if req.GitAttributes != nil {
		attrs = *req.GitAttributes
	}
	ignore := string(files[".gitignore"].Content)
	if req.GitIgnore != nil {
		ignore = *req.GitIgnore
	}
	lfsRules, ignoreRules := parseAttributes(attrs), parseIgnore(ignore)
	if len(req.Files) > 256 {
		apiError(w, http.StatusRequestEntityTooLarge, "", "at most 256 files per preupload request")
		return
	}
	type answer struct {
		Path         string  `json:"path"`
		UploadMode   string  `json:"uploadMode"`
		ShouldIgnore bool    `json:"shouldIgnore"`
		OID          *string `json:"oid,omitempty"`
	}
	out := []answer{}
	for _, f := range req.Files {
		if err := checkPath(f.Path); err != nil || f.Size == nil || *f.Size < 0 {
			apiError(w, http.StatusBadRequest, "", fmt.Sprintf("invalid file entry %q", f.Path))
			return
		}
		sample, err := base64.StdEncoding.DecodeString(f.Sample)
		if err != nil || len(sample) > 512 {
			apiError(w, http.StatusBadRequest, "", fmt.Sprintf("%s: sample must be base64 of at most 512 bytes", f.Path))
			return
		}
		mode := "regular"
		if *f.Size > 0 && (lfsRules.lfs(f.Path) || *f.Size >= s.LFSThreshold || bytes.IndexByte(sample, 0) >= 0) {
			mode = "lfs"
		}
		a := answer{Path: f.Path, UploadMode: mode, ShouldIgnore: ignoreRules.match(f.Path)}
		if old, ok := files[f.Path]; ok {
			oid := old.LFS
			if oid == "" {
				oid = old.gitOID()
			}
			a.OID = &oid
		}
		out = append(out, a)
	}
	writeJSON(w, map[string]any{"files": out})
}

// batchRequest is the LFS batch API's request body.
type batchRequest struct {
	Operation string   `json:"operation"`
	Transfers []string `json:"transfers"`
	Ref       *struct {
		Name string `json:"name"`
	} `json:"ref"`
	Objects []struct {
		OID  string `json:"oid"`
		Size *int64 `json:"size"`
	} `json:"objects"`
	HashAlgo string `json:"hash_algo"`
}

type lfsAction struct {
	Href      string            `json:"href"`
	Header    map[string]string `json:"header,omitempty"`
	ExpiresIn int               `json:"expires_in,omitempty"`
}

type lfsObject struct {
	OID     string                `json:"oid"`
	Size    int64                 `json:"size"`
	Actions map[string]*lfsAction `json:"actions,omitempty"`
	Error   *lfsError             `json:"error,omitempty"`
}

type lfsError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// lfsFail answers an LFS API error ({"message": …}).
func lfsFail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/vnd.git-lfs+json")
	if status == http.StatusUnauthorized {
		w.Header().Set("LFS-Authenticate", `Basic realm="Git LFS"`)
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

// serveBatch is the LFS batch API for uploads: objects already stored
// come back without actions; others get a basic upload (PUT the whole
// object) or, when the client offers "multipart" and the object is larger
// than MultipartThreshold, a multipart upload (chunk_size and numbered
// part URLs in the upload action's header, the completion URL as its
// href); both with a verify action.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, id string) {
	if !strings.Contains(r.Header.Get("Accept"), "application/vnd.git-lfs+json") {
		lfsFail(w, http.StatusNotAcceptable, "Accept must be application/vnd.git-lfs+json")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/vnd.git-lfs+json") {
		lfsFail(w, http.StatusUnsupportedMediaType, "Content-Type must be application/vnd.git-lfs+json")
		return
	}
	var req batchRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20)).Decode(&req); err != nil {
		lfsFail(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	if !s.bearer(r) {
		lfsFail(w, http.StatusUnauthorized, "Credentials needed")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.repos[id]
	if !ok {
		lfsFail(w, http.StatusNotFound, "Repository not found")
		return
	}
	switch {
	case req.Operation != "upload":
		lfsFail(w, http.StatusUnprocessableEntity, "only the upload operation is served")
		return
	case req.HashAlgo != "" && req.HashAlgo != "sha256":
		lfsFail(w, http.StatusConflict, "unsupported hash algorithm "+req.HashAlgo)
		return
	case len(req.Objects) == 0 || len(req.Objects) > 1000:
		lfsFail(w, http.StatusUnprocessableEntity, "between 1 and 1000 objects per request")
		return
	}
	offered := func(t string) bool {
		for _, x := range req.Transfers {
			if x == t {
				return true
			}
		}
		return len(req.Transfers) == 0 && t == "basic"
	}
	if !offered("basic") {
		lfsFail(w, http.StatusUnprocessableEntity, "the basic transfer is required")
		return
	}
	hub := "http://" + r.Host
	store := s.StorageURL
	if store == "" {
		store = hub
	}
	transfer := "basic"
	out := []lfsObject{}
	for _, o := range req.Objects {
		if !isSHA256(o.OID) || o.Size == nil || *o.Size < 0 {
			lfsFail(w, http.StatusUnprocessableEntity, fmt.Sprintf("invalid object %q", o.OID))
			return
		}
		obj := lfsObject{OID: o.OID, Size: *o.Size}
		if data, ok := repo.objects[o.OID]; ok {
			if int64(len(data)) != *o.Size {
				obj.Error = &lfsError{Code: 422, Message: fmt.Sprintf("object %s is stored with size %d", o.OID, len(data))}
			}
			out = append(out, obj)
			continue
		}
		u := &upload{id: randomID(), repo: id, oid: o.OID, size: *o.Size, sig: randomID()}
		verify := &lfsAction{Href: hub + "/" + id + ".git/info/lfs/objects/verify", ExpiresIn: 3600}
		if offered("multipart") && *o.Size > s.MultipartThreshold {
			transfer = "multipart"
			u.chunk = max(s.ChunkSize, 1)
			n := u.numParts()
			u.data, u.parts, u.etags = make([]byte, u.size), make([][]byte, n), make([]string, n)
			header := map[string]string{"chunk_size": strconv.FormatInt(u.chunk, 10)}
			for i := 1; i <= n; i++ {
				header[fmt.Sprintf("%05d", i)] = fmt.Sprintf("%s%s%s/%d?sig=%s", store, storagePrefix, u.id, i, u.sig)
			}
			obj.Actions = map[string]*lfsAction{
				"upload": {Href: fmt.Sprintf("%s/api/complete_multipart?uploadId=%s&sig=%s", hub, u.id, u.sig), Header: header, ExpiresIn: 86400},
				"verify": verify,
			}
		} else {
			obj.Actions = map[string]*lfsAction{
				"upload": {Href: fmt.Sprintf("%s%s%s?sig=%s", store, storagePrefix, u.id, u.sig), ExpiresIn: 86400},
				"verify": verify,
			}
		}
		s.uploads[u.id] = u
		out = append(out, obj)
	}
	w.Header().Set("Content-Type", "application/vnd.git-lfs+json")
	json.NewEncoder(w).Encode(map[string]any{"transfer": transfer, "objects": out})
}

// serveStorage takes a PUT of a whole object (basic) or of one part. Like
// an object store it wants Content-Length and the exact length; it does
// not check the content (the verify action and the multipart completion
// do).
func (s *Server) serveStorage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.storing++
	s.stored = time.Now()
	s.mu.Unlock()
	defer func() { // also when the handler aborts a dropped connection
		s.mu.Lock()
		s.stored = time.Now()
		if s.storing--; s.storing == 0 {
			s.idleCond().Broadcast()
		}
		s.mu.Unlock()
	}()
	rest := strings.TrimPrefix(r.URL.Path, storagePrefix)
	uid, partStr, multipart := strings.Cut(rest, "/")
	s.mu.Lock()
	u, ok := s.uploads[uid]
	s.mu.Unlock()
	if r.Method != http.MethodPut || !ok || r.URL.Query().Get("sig") != u.sig {
		apiError(w, http.StatusForbidden, "", "no such upload URL, or a bad signature")
		return
	}
	part, want := 0, u.size
	if multipart != (u.chunk > 0) {
		apiError(w, http.StatusForbidden, "", "wrong upload URL for this transfer")
		return
	}
	if multipart {
		n, err := strconv.Atoi(partStr)
		if err != nil || n < 1 || n > u.numParts() {
			apiError(w, http.StatusNotFound, "", "no such part")
			return
		}
		part = n
		want = min(u.chunk, u.size-int64(n-1)*u.chunk)
	}
	key := partKey{u.oid, part}
	s.mu.Lock()
	s.attempts[key]++
	var cut int64 = -1
	if d := s.drops[key]; d != nil && d.times > 0 {
		d.times--
		cut = d.after
	}
	var failWith int
	if f := s.fails[key]; f != nil && f.times > 0 {
		f.times--
		failWith = f.status
	}
	s.mu.Unlock()
	if r.ContentLength < 0 {
		apiError(w, http.StatusLengthRequired, "", "Content-Length is required")
		return
	}
	if r.ContentLength != want {
		apiError(w, http.StatusBadRequest, "", fmt.Sprintf("Content-Length %d, want %d", r.ContentLength, want))
		return
	}
	body := io.Reader(r.Body)
	if cut >= 0 {
		body = io.LimitReader(r.Body, cut)
	}
	// The body goes straight to its place: a part into the object, whose
	// size is known, so nothing is copied again or grown.
	var dst []byte
	if multipart {
		off := int64(part-1) * u.chunk
		dst = u.data[off : off+want]
	} else {
		dst = make([]byte, want)
	}
	n, err := io.ReadFull(body, dst)
	s.mu.Lock()
	s.received[u.oid] += int64(n)
	s.mu.Unlock()
	if cut >= 0 && int64(n) >= cut && cut < want {
		// The connection drops mid-body: no answer at all.
		panic(http.ErrAbortHandler)
	}
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return
	}
	if failWith != 0 {
		apiError(w, failWith, "", "injected failure")
		return
	}
	if int64(n) != want {
		apiError(w, http.StatusBadRequest, "", "short body")
		return
	}
	// The ETag is opaque to clients, which must echo it: a CRC-32C of the
	// part (as cheap as a copy) serves as well as the MD5 S3 sends.
	etag := fmt.Sprintf(`"%08x-%d"`, crc32.Checksum(dst, castagnoli), len(dst))
	s.mu.Lock()
	if multipart {
		u.parts[part-1], u.etags[part-1] = dst, etag
	} else if repo := s.repos[u.repo]; repo != nil {
		repo.pending[u.oid] = dst
		delete(s.uploads, u.id)
	}
	s.mu.Unlock()
	w.Header().Set("ETag", etag)
	w.WriteHeader(http.StatusOK)
}

// serveComplete finishes a multipart upload: every part listed once, in
// order, with the ETag its upload answered, and the assembled object's
// sha256 equal to its oid.
func (s *Server) serveComplete(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var req struct {
		OID   string `json:"oid"`
		Parts []struct {
			PartNumber int    `json:"partNumber"`
			ETag       string `json:"etag"`
		} `json:"parts"`
	}
	if !readJSON(w, r, 16<<20, &req) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.uploads[q.Get("uploadId")]
	if !ok || q.Get("sig") != u.sig || u.chunk <= 0 {
		apiError(w, http.StatusForbidden, "", "no such multipart upload")
		return
	}
	if req.OID != u.oid {
		apiError(w, http.StatusBadRequest, "", "oid does not match the upload")
		return
	}
	if len(req.Parts) != u.numParts() {
		apiError(w, http.StatusBadRequest, "", fmt.Sprintf("%d parts listed, the upload has %d", len(req.Parts), u.numParts()))
		return
	}
	for i, p := range req.Parts {
		if p.PartNumber != i+1 {
			apiError(w, http.StatusBadRequest, "", "parts must be listed in order from 1")
			return
		}
		if u.parts[i] == nil {
			apiError(w, http.StatusBadRequest, "", fmt.Sprintf("part %d was not uploaded", i+1))
			return
		}
		if p.ETag != u.etags[i] {
			apiError(w, http.StatusBadRequest, "", fmt.Sprintf("part %d: etag %q does not match %q", i+1, p.ETag, u.etags[i]))
			return
		}
	}
	// The object is checked against its oid by the verify action, which
	// stores it only then.
	if repo := s.repos[u.repo]; repo != nil {
		repo.pending[u.oid] = u.data
	}
	delete(s.uploads, u.id)
	writeJSON(w, map[string]string{})
}

// serveVerify is the verify action: the object must have been uploaded
// with this size and sha256; only then is it stored (a stricter rule than
// the hub needs, so that a client that skips verify is caught).
func (s *Server) serveVerify(w http.ResponseWriter, r *http.Request, id string) {
	var req struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
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
	if data, ok := repo.objects[req.OID]; ok && int64(len(data)) == req.Size {
		writeJSON(w, map[string]string{})
		return
	}
	data, ok := repo.pending[req.OID]
	if !ok {
		apiError(w, http.StatusNotFound, "", "object "+req.OID+" was not uploaded")
		return
	}
	// Hash without the lock: other uploads go on meanwhile, as on a hub.
	s.mu.Unlock()
	match := int64(len(data)) == req.Size && sha256Hex(data) == req.OID
	s.mu.Lock()
	if !match {
		delete(repo.pending, req.OID)
		apiError(w, http.StatusUnprocessableEntity, "", "object "+req.OID+": the uploaded bytes do not match its oid and size")
		return
	}
	repo.objects[req.OID] = data
	delete(repo.pending, req.OID)
	writeJSON(w, map[string]string{})
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

package hubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Hub serves one repository's release directory.
type Hub struct {
	// Dir is the release directory served.
	Dir string
	// Repo is "owner/name".
	Repo string
	// Revision is the tag served; Commit, when set, is sent as
	// X-Repo-Commit and also accepted as a revision.
	Revision string
	Commit   string
	// ETag sends X-Linked-Etag: the sha256 of the bytes served, as the
	// hub does for LFS files.
	ETag bool

	mu sync.Mutex
	// dropAfter[path] cuts the connection after that many body bytes, for
	// the next drops[path] responses.
	dropAfter map[string]int64
	drops     map[string]int
	// corrupt[path] flips the byte at that offset in every response.
	corrupt map[string]int64
	// failures[path] answers its status instead of the file, its times
	// times.
	failures map[string]failure
	served   map[string]int64
	requests []Request
}

// failure is an injected answer: status, times more times.
type failure struct{ status, times int }

// Request records one request the hub answered.
type Request struct {
	Path     string
	Revision string
	Range    string
	Status   int
}

// New returns a hub serving dir as repo at revision.
func New(dir, repo, revision string) *Hub {
	return &Hub{Dir: dir, Repo: repo, Revision: revision,
		dropAfter: map[string]int64{}, drops: map[string]int{}, corrupt: map[string]int64{},
		failures: map[string]failure{}, served: map[string]int64{}}
}

// DropAfter makes the next times responses for path cut the connection
// after n body bytes.
func (h *Hub) DropAfter(path string, n int64, times int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropAfter[path] = n
	h.drops[path] = times
}

// Corrupt flips the byte at offset of path in every response.
func (h *Hub) Corrupt(path string, offset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.corrupt[path] = offset
}

// Unavailable answers 503 to the next times requests for path.
func (h *Hub) Unavailable(path string, times int) {
	h.Fail(path, http.StatusServiceUnavailable, times)
}

// Fail answers status (with a short text body) instead of path's content
// to the next times requests for path, whether or not the file exists.
func (h *Hub) Fail(path string, status, times int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures[path] = failure{status: status, times: times}
}

// Served returns the body bytes sent for path so far.
func (h *Hub) Served(path string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.served[path]
}

// Requests returns the requests answered so far.
func (h *Hub) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.requests...)
}

// ServeHTTP implements the resolve endpoint.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	prefix := "/" + h.Repo + "/resolve/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	rev, path, ok2 := strings.Cut(rest, "/")
	rec := Request{Path: path, Revision: rev, Range: r.Header.Get("Range")}
	status := http.StatusOK
	defer func() {
		h.mu.Lock()
		rec.Status = status
		h.requests = append(h.requests, rec)
		h.mu.Unlock()
	}()
	if r.Method != http.MethodGet && r.Method != http.MethodHead || !ok || !ok2 || (rev != h.Revision && (h.Commit == "" || rev != h.Commit)) {
		status = http.StatusNotFound
		http.NotFound(w, r)
		return
	}
	h.mu.Lock()
	if f := h.failures[path]; f.times > 0 {
		f.times--
		h.failures[path] = f
		h.mu.Unlock()
		status = f.status
		http.Error(w, http.StatusText(status), status)
		return
	}
	drop, dropping := h.dropAfter[path], h.drops[path] > 0
	if dropping {
		h.drops[path]--
	}
	flip, corrupt := h.corrupt[path]
	h.mu.Unlock()

	root, err := os.OpenRoot(h.Dir)
	if err != nil {
		status = http.StatusInternalServerError
		http.Error(w, err.Error(), status)
		return
	}
	defer root.Close()
	data, err := root.ReadFile(path)
	if err != nil {
		status = http.StatusNotFound
		http.NotFound(w, r)
		return
	}
	if corrupt && flip < int64(len(data)) {
		data = bytes.Clone(data)
		data[flip] ^= 0x01
	}
	if h.Commit != "" {
		w.Header().Set("X-Repo-Commit", h.Commit)
	}
	if h.ETag {
		sum := sha256.Sum256(data)
		w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
	}
	cw := &countingWriter{ResponseWriter: w, hub: h, path: path, limit: -1}
	if dropping {
		cw.limit = drop
	}
	if r.Header.Get("Range") != "" {
		status = http.StatusPartialContent
	}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(data))
}

// countingWriter counts body bytes and cuts the connection at limit.
type countingWriter struct {
	http.ResponseWriter
	hub   *Hub
	path  string
	n     int64
	limit int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.limit >= 0 && c.n+int64(len(p)) > c.limit {
		k := c.limit - c.n
		c.ResponseWriter.Write(p[:k])
		c.add(k)
		if f, ok := c.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		// Abort: the server closes the connection mid-body.
		panic(http.ErrAbortHandler)
	}
	n, err := c.ResponseWriter.Write(p)
	c.add(int64(n))
	return n, err
}

func (c *countingWriter) add(n int64) {
	c.n += n
	c.hub.mu.Lock()
	c.hub.served[c.path] += n
	c.hub.mu.Unlock()
}

package download

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/lfmq/lfmq/verify/sums"
)

// Blob is one file of a hub repository at a commit, as the hub's tree
// lists it: an LFS file by the sha256 of its content, any other by its git
// blob id.
type Blob struct {
	// Path is the file's path in the repository.
	Path string
	// Size is its size in bytes.
	Size int64
	// SHA256 is the LFS object id (lower-case hex), "" for a file kept in
	// git itself.
	SHA256 string
	// GitOID is the git blob id (40 hex) of a file kept in git; unused
	// for an LFS file.
	GitOID string
}

// BlobOptions configures FetchBlob.
type BlobOptions struct {
	// URL is the repository's address, {endpoint}/owner/name.
	URL string
	// Commit is the 40-hex commit the file is fetched at.
	Commit string
	// Client, Token, Retries, Backoff and Log are as in Options.
	Client  *http.Client
	Token   string
	Retries int
	Backoff func(n int) time.Duration
	Log     io.Writer
}

// FetchBlob brings b's bytes to part, resuming what part already holds
// with an HTTP Range request and retrying network errors, and checks them:
// the size and, for an LFS file, the sha256 (refused at once when the
// hub's ETag names another), for any other file the git blob id. It
// returns the body bytes received. Checked bytes stay in part for the
// caller to rename; bytes that fail the check twice are removed and
// reported as a *verify.MismatchError. An interrupted fetch (the context
// ends) keeps part for the next call.
func FetchBlob(ctx context.Context, opts BlobOptions, b Blob, part string) (int64, error) {
	base, err := url.Parse(opts.URL)
	if err != nil || base.Scheme != "http" && base.Scheme != "https" || base.Host == "" {
		return 0, fmt.Errorf("download: URL %q: want http(s)://host/owner/name", opts.URL)
	}
	if !commitRe.MatchString(opts.Commit) {
		return 0, fmt.Errorf("download: commit %q is not 40 lower-case hex digits", opts.Commit)
	}
	if err := sums.CheckPath(b.Path, sums.AnyPath); err != nil {
		return 0, fmt.Errorf("download: %w", err)
	}
	o := Options{URL: opts.URL, Revision: opts.Commit, Client: opts.Client, Token: opts.Token, Retries: opts.Retries, Backoff: opts.Backoff, Log: opts.Log}
	d := newDownloader(&o, base, "")
	want := b.SHA256
	if want == "" {
		want = b.GitOID
	}
	check := func(part string) (string, int64, bool, error) {
		got, n, err := blobDigest(part, b.SHA256 == "")
		return got, n, err == nil && got == want && n == b.Size, err
	}
	e := sums.Entry{Path: b.Path, SHA256: b.SHA256}
	out := d.fetchInto(ctx, e, b.Size, part, "hub tree", check)
	return d.recv.Load(), out.err
}

// blobDigest returns the sha256 of the file at p, or with git its git
// blob id (sha1 of "blob SIZE\x00" and the content), and its size.
func blobDigest(p string, git bool) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	if git {
		h = sha1.New()
		fmt.Fprintf(h, "blob %d\x00", st.Size())
	}
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

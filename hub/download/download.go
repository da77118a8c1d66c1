package download

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/sshsig"
	"github.com/lfmq/lfmq/internal/httpstatus"
	"github.com/lfmq/lfmq/verify"
	"github.com/lfmq/lfmq/verify/sums"
)

// IncompleteDir is where partial files are kept, relative to the
// destination; verify ignores the top-level .cache directory, as for
// huggingface_hub's local-dir downloads.
const IncompleteDir = ".cache/lfmq/download"

// CommitFile records the commit the files were fetched at, relative to the
// destination.
const CommitFile = ".cache/lfmq/commit"

// AuthorityETag names the hub's ETag as the authority of a finding.
const AuthorityETag = "hub ETag"

// Options configures Download.
type Options struct {
	// URL is the repository's address, e.g.
	// https://huggingface.co/owner/name.
	URL string
	// Revision is a tag, branch or 40-hex commit of [A-Za-z0-9._-].
	Revision string
	// CacheRoot holds the downloads: CacheRoot/<owner>--<name>/<revision>/.
	CacheRoot string
	// Client is the HTTP client (default: one with header timeouts).
	Client *http.Client
	// Token, if set, is sent as "Authorization: Bearer" to the URL's host
	// only (HF_TOKEN).
	Token string
	// Jobs bounds the files fetched at once (default 4).
	Jobs int
	// Retries is the number of retries of a file after a network error
	// (default 5).
	Retries int
	// Backoff gives the wait before retry n (1-based); default
	// 250ms·2^(n-1), at most 8 s.
	Backoff func(n int) time.Duration
	// Log, if set, receives one line per file.
	Log io.Writer
	// Verify configures the final verification. With AllowedSigners set,
	// the signature is also checked as soon as it and SHA256SUMS have
	// arrived, before any listed file is fetched or anything is written.
	Verify verify.Options
}

// Result describes a download.
type Result struct {
	// Dir is the release directory.
	Dir string
	// Commit is the hub's X-Repo-Commit, when it sent one.
	Commit string
	// Fetched are the files (partly) transferred; Skipped those already
	// present and correct. Sorted.
	Fetched []string
	Skipped []string
	// BytesReceived counts the body bytes received.
	BytesReceived int64
	// Report is the final verification of Dir.
	Report *verify.Report
}

// HTTPError reports a response that ends a file's download. URL is without
// credentials.
type HTTPError struct {
	URL    string
	Status int
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("download: %s: HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
}

var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// pageSegments follow OWNER/NAME in the URLs of a Hugging Face
// repository's pages and files, never in the repository's own URL.
var pageSegments = []string{"tree", "blob", "resolve", "commit", "commits", "raw", "discussions"}

// Repo returns the OWNER/NAME a repository URL names (its last two path
// segments), as lfmq launch --repo takes it.
func Repo(rawURL string) (string, error) {
	if _, err := Dest("", rawURL, "x"); err != nil {
		return "", err
	}
	u, _ := url.Parse(rawURL)
	segs := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	if len(segs) < 2 {
		return "", fmt.Errorf("download: URL %q names no OWNER/NAME repository", rawURL)
	}
	return segs[len(segs)-2] + "/" + segs[len(segs)-1], nil
}

// Dest returns the destination directory of a download:
// cacheRoot/<owner>--<name>/<revision> for URL .../owner/name.
func Dest(cacheRoot, rawURL, revision string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("download: URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("download: URL %q: want http(s)://host/owner/name", rawURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("download: URL %q: no query, fragment or user info", u.Redacted())
	}
	segs := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	if len(segs) == 0 {
		return "", fmt.Errorf("download: URL %q names no repository", rawURL)
	}
	// A URL copied from a browser names a page of the repository
	// (.../owner/name/tree/main); its last two segments are no repository.
	// Only a page segment with something after it counts, so that a
	// repository named "tree" behind a mirror's path prefix still works.
	for i := 2; i < len(segs)-1; i++ {
		if slices.Contains(pageSegments, segs[i]) {
			repoURL := *u
			repoURL.Path = "/" + strings.Join(segs[:i], "/")
			return "", fmt.Errorf("download: URL %q names a page of the repository (%s/…), not the repository: give %s, and the branch, tag or commit as --revision", rawURL, segs[i], repoURL.String())
		}
	}
	if len(segs) > 2 {
		segs = segs[len(segs)-2:]
	}
	for _, s := range segs {
		if !sums.ValidName(s) {
			return "", fmt.Errorf("download: URL %q: %q is not a repository name of [A-Za-z0-9._-]", rawURL, s)
		}
	}
	if !sums.ValidName(revision) {
		return "", fmt.Errorf("download: revision %q is not a name of [A-Za-z0-9._-]", revision)
	}
	return filepath.Join(cacheRoot, strings.Join(segs, "--"), revision), nil
}

// resolveURL returns {base}/resolve/{rev}/{path} with every segment
// percent-escaped.
func resolveURL(base *url.URL, rev, p string) string {
	u := *base
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	u.Path = strings.TrimSuffix(base.Path, "/") + "/resolve/" + rev + "/" + strings.Join(segs, "/")
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + "/resolve/" + url.PathEscape(rev) + "/" + strings.Join(segs, "/")
	return u.String()
}

type downloader struct {
	opts   *Options
	base   *url.URL
	dir    string
	client *http.Client
	rev    string // the revision, or the commit once known
	recv   atomic.Int64
	logMu  sync.Mutex
}

// newDownloader fills in opts' defaults and returns a downloader of the
// repository at base into dir.
func newDownloader(opts *Options, base *url.URL, dir string) *downloader {
	if opts.Jobs <= 0 {
		opts.Jobs = 4
	}
	if opts.Retries <= 0 {
		opts.Retries = 5
	}
	if opts.Backoff == nil {
		opts.Backoff = httpstatus.Backoff
	}
	client := opts.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = time.Minute
		client = &http.Client{Transport: tr}
	}
	return &downloader{opts: opts, base: base, dir: dir, client: client, rev: opts.Revision}
}

func (d *downloader) logf(format string, args ...any) {
	if d.opts.Log != nil {
		d.logMu.Lock()
		fmt.Fprintf(d.opts.Log, format+"\n", args...)
		d.logMu.Unlock()
	}
}

// Download fetches the release and verifies it. The error joins every
// finding (each a *verify.MismatchError: a file the hub serves wrong, and
// the final verification's findings) and any file that could not be
// fetched; it is an operational error alone when SHA256SUMS or its
// signature cannot be fetched (other than a 404 for the signature: an
// unsigned release) or the context ends. A signature that opts.Verify
// requires and that is absent or bad is a *verify.MismatchError of
// verify.KindSignature alone, returned before any listed file is fetched,
// with no Report.
func Download(ctx context.Context, opts Options) (*Result, error) {
	dir, err := Dest(opts.CacheRoot, opts.URL, opts.Revision)
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(opts.URL)
	d := newDownloader(&opts, base, dir)
	res := &Result{Dir: dir}

	// SHA256SUMS first: the authority for everything else.
	list, commit, err := d.fetchList(ctx)
	if err != nil {
		return res, err
	}
	if commit != "" {
		// Everything else, the signature included, comes from this commit.
		res.Commit, d.rev = commit, commit
	}
	entries, err := sums.Parse(sums.SumsFile, list, sums.BundlePath)
	if err != nil {
		kind := verify.KindMalformed
		if errors.Is(err, sums.ErrUnsafePath) {
			kind = verify.KindUnsafe
		}
		return res, &verify.MismatchError{Path: sums.SumsFile, Kind: kind, WantSize: verify.Unknown, GotSize: verify.Unknown, Authority: "hub", Detail: err.Error()}
	}
	sig, err := d.fetchSignature(ctx)
	if err != nil {
		res.BytesReceived = d.recv.Load()
		return res, err
	}
	if opts.Verify.AllowedSigners != nil {
		// A signature is required: check it now, so that an unsigned or
		// wrongly signed release costs two small requests rather than the
		// release, and nothing of it is written. The final verification
		// checks it again, on disk.
		if _, err := verify.CheckSignature(sig, list, opts.Verify); err != nil {
			res.BytesReceived = d.recv.Load()
			return res, err
		}
	}
	// The release's directory is made only now, once SHA256SUMS (and the
	// signature, when one is required) are in hand: a revision the hub
	// does not have, or a refused signature, leaves nothing behind that
	// lfmq launch would take for a download whose files went missing.
	tmp := filepath.Join(dir, filepath.FromSlash(IncompleteDir))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return res, fmt.Errorf("download: %w", err)
	}
	if commit != "" {
		if err := atomicWrite(tmp, filepath.Join(dir, filepath.FromSlash(CommitFile)), []byte(commit+"\n")); err != nil {
			return res, err
		}
	}
	if err := atomicWrite(tmp, filepath.Join(dir, sums.SumsFile), list); err != nil {
		return res, err
	}
	d.logf("SHA256SUMS: %d files (revision %s)", len(entries), d.rev)
	if err := d.placeSignature(sig); err != nil {
		return res, err
	}

	// runtime-release.json next, when listed: once checked, its sizes let
	// every other file be bounded and resumed exactly.
	sizes := map[string]int64{}
	outcomes := make([]outcome, len(entries))
	rrIndex := slices.IndexFunc(entries, func(e sums.Entry) bool { return e.Path == sums.RuntimeReleaseFile })
	if rrIndex >= 0 {
		outcomes[rrIndex] = d.fetchFile(ctx, entries[rrIndex], -1)
		if outcomes[rrIndex].err == nil {
			if data, err := os.ReadFile(filepath.Join(dir, sums.RuntimeReleaseFile)); err == nil {
				if rr, err := sums.ParseRuntimeRelease(data); err == nil {
					for _, f := range rr.Files {
						sizes[f.Path] = f.Size
					}
				}
			}
		}
	}
	p := pool.New().WithMaxGoroutines(opts.Jobs)
	for i, e := range entries {
		if i == rrIndex {
			continue
		}
		size, ok := sizes[e.Path]
		if !ok {
			size = -1
		}
		p.Go(func() { outcomes[i] = d.fetchFile(ctx, e, size) })
	}
	p.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}

	var errs []error
	for i, o := range outcomes {
		switch {
		case o.err != nil:
			errs = append(errs, o.err)
		case o.skipped:
			res.Skipped = append(res.Skipped, entries[i].Path)
		default:
			res.Fetched = append(res.Fetched, entries[i].Path)
		}
	}
	res.BytesReceived = d.recv.Load()

	rep, err := verify.Release(ctx, dir, opts.Verify)
	if err != nil {
		return res, err
	}
	res.Report = rep
	if err := rep.Err(); err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// outcome is one file's result.
type outcome struct {
	skipped bool
	err     error
}

// request sends a GET for p, with a Range from offset when positive.
func (d *downloader) request(ctx context.Context, p string, offset int64) (*http.Response, string, error) {
	u := resolveURL(d.base, d.rev, p)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, u, fmt.Errorf("download: %w", err)
	}
	if d.opts.Token != "" && req.URL.Host == d.base.Host {
		// Go's client drops Authorization on a redirect to another host
		// (the CDN), which is what we want.
		req.Header.Set("Authorization", "Bearer "+d.opts.Token)
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := d.client.Do(req)
	return resp, u, err
}

func (d *downloader) wait(ctx context.Context, attempt int) error {
	t := time.NewTimer(d.opts.Backoff(attempt))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fetchList downloads SHA256SUMS into memory, bounded.
func (d *downloader) fetchList(ctx context.Context) ([]byte, string, error) {
	data, commit, _, err := d.fetchSmall(ctx, sums.SumsFile, sums.MaxListBytes, false)
	if err != nil {
		return nil, "", err
	}
	if len(data) > sums.MaxListBytes {
		return nil, "", &verify.MismatchError{Path: sums.SumsFile, Kind: verify.KindMalformed, WantSize: verify.Unknown, GotSize: int64(len(data)), Authority: "hub", Detail: "larger than the list size limit"}
	}
	return data, commit, nil
}

// fetchSignature fetches SHA256SUMS.sig, the one release file SHA256SUMS
// cannot list, at the revision (or commit) of SHA256SUMS. A release may be
// unsigned, so a 404 is not an error: the data is nil. Any other failure
// is an error that names the URL, and a signature larger than
// sshsig.MaxSignatureBytes is refused unread past the limit.
func (d *downloader) fetchSignature(ctx context.Context) ([]byte, error) {
	data, _, found, err := d.fetchSmall(ctx, verify.SignatureFile, sshsig.MaxSignatureBytes, true)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, nil
	case len(data) > sshsig.MaxSignatureBytes:
		return nil, &verify.MismatchError{Path: verify.SignatureFile, Kind: verify.KindMalformed, WantSize: verify.Unknown, GotSize: verify.Unknown, Authority: "hub",
			Detail: fmt.Sprintf("%s serves more than %d bytes, more than any signature; not kept", resolveURL(d.base, d.rev, verify.SignatureFile), sshsig.MaxSignatureBytes)}
	case data == nil:
		data = []byte{} // an empty answer is a (malformed) signature, not none
	}
	return data, nil
}

// placeSignature writes the fetched signature (temporary name, fsync,
// rename), or, for a release the hub serves unsigned (nil), removes a
// signature an earlier download left. An identical file is left as it is.
func (d *downloader) placeSignature(sig []byte) error {
	final := filepath.Join(d.dir, verify.SignatureFile)
	if sig == nil {
		if err := os.Remove(final); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("download: %w", err)
		}
		return nil
	}
	d.logf("%s: %d bytes", verify.SignatureFile, len(sig))
	if info, err := os.Lstat(final); err == nil && info.Mode().IsRegular() && info.Size() == int64(len(sig)) {
		if have, err := os.ReadFile(final); err == nil && bytes.Equal(have, sig) {
			return nil
		}
	}
	return atomicWrite(filepath.Join(d.dir, filepath.FromSlash(IncompleteDir)), final, sig)
}

// fetchSmall downloads p into memory, reading at most limit+1 bytes so
// the caller can tell an oversized answer. With optional, a 404 is not an
// error: found is false.
func (d *downloader) fetchSmall(ctx context.Context, p string, limit int, optional bool) (data []byte, commit string, found bool, err error) {
	var lastErr error
	for attempt := 0; attempt <= d.opts.Retries; attempt++ {
		if attempt > 0 {
			if err := d.wait(ctx, attempt); err != nil {
				return nil, "", false, err
			}
		}
		resp, u, err := d.request(ctx, p, 0)
		if err != nil {
			lastErr = fmt.Errorf("download: %w", err)
			if ctx.Err() != nil {
				return nil, "", false, ctx.Err()
			}
			continue
		}
		if optional && resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return nil, "", false, nil
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			lastErr = &HTTPError{URL: u, Status: resp.StatusCode}
			if httpstatus.Retryable(resp.StatusCode) {
				continue
			}
			return nil, "", false, lastErr
		}
		commit := resp.Header.Get("X-Repo-Commit")
		if !commitRe.MatchString(commit) {
			commit = ""
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
		resp.Body.Close()
		d.recv.Add(int64(len(data)))
		if err != nil {
			lastErr = fmt.Errorf("download: %s: %w", u, err)
			continue
		}
		return data, commit, true, nil
	}
	return nil, "", false, lastErr
}

// fetchFile brings one listed file to its final name, verified; size is
// its expected size, or -1 when unknown.
func (d *downloader) fetchFile(ctx context.Context, e sums.Entry, size int64) outcome {
	final := filepath.Join(d.dir, filepath.FromSlash(e.Path))
	if e.Path == sums.SumsFile {
		return outcome{skipped: true}
	}
	mismatch := func(kind verify.Kind, got string, gotSize int64, authority, detail string) outcome {
		return outcome{err: &verify.MismatchError{Path: e.Path, Kind: kind, WantSHA256: e.SHA256, GotSHA256: got, WantSize: size, GotSize: gotSize, Authority: authority, Detail: detail}}
	}
	// A final file that already matches is kept, after re-hashing it.
	if info, err := os.Lstat(final); err == nil {
		if !info.Mode().IsRegular() {
			return mismatch(verify.KindUnsafe, "", verify.Unknown, sums.SumsFile, "not a regular file at a listed path; remove it")
		}
		if size < 0 || info.Size() == size {
			if sum, _, err := lfmq1.HashFile(final); err == nil && sum == e.SHA256 {
				if err := setMode(final, e.Path); err != nil {
					return outcome{err: err}
				}
				d.logf("ok       %s (already present)", e.Path)
				return outcome{skipped: true}
			}
		}
		if err := os.Remove(final); err != nil {
			return outcome{err: fmt.Errorf("download: %w", err)}
		}
	}
	part := filepath.Join(d.dir, filepath.FromSlash(IncompleteDir), filepath.FromSlash(e.Path)+".incomplete")
	check := func(part string) (string, int64, bool, error) {
		sum, n, err := lfmq1.HashFile(part)
		return sum, n, err == nil && sum == e.SHA256 && (size < 0 || n == size), err
	}
	if o := d.fetchInto(ctx, e, size, part, sums.SumsFile, check); o.err != nil {
		return o
	}
	if err := setMode(part, e.Path); err != nil {
		return outcome{err: err}
	}
	if err := syncRename(part, final); err != nil {
		return outcome{err: err}
	}
	return outcome{}
}

// fetchInto brings e's bytes into part, resuming what part holds, until
// check accepts the whole file (check returns the digest it found, the
// size and whether they are the right ones). Network errors and retryable
// statuses are retried with backoff, keeping the partial file; bytes that
// check refuses are fetched once more from zero (a resumed prefix may have
// been stale) and then refused. It does not rename part.
func (d *downloader) fetchInto(ctx context.Context, e sums.Entry, size int64, part, authority string, check func(part string) (got string, n int64, ok bool, err error)) outcome {
	if err := os.MkdirAll(filepath.Dir(part), 0o755); err != nil {
		return outcome{err: fmt.Errorf("download: %w", err)}
	}
	restarted := false
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return outcome{err: err}
		}
		res, err := d.transfer(ctx, e, size, part)
		if err != nil && res == resultRefused {
			os.Remove(part)
			return outcome{err: err}
		}
		if err != nil && ctx.Err() != nil {
			// Interrupted: the partial file stays for the next run, and
			// nothing is retried.
			return outcome{err: ctx.Err()}
		}
		if err != nil {
			// A network error or a retryable status: keep the partial
			// file and resume after a pause.
			failures++
			if failures > d.opts.Retries {
				return outcome{err: fmt.Errorf("download: %s: giving up after %d retries: %w", e.Path, d.opts.Retries, err)}
			}
			d.logf("retry    %s (%v)", e.Path, err)
			if err := d.wait(ctx, failures); err != nil {
				return outcome{err: err}
			}
			continue
		}
		// The body is complete: check every byte of the file.
		sum, n, ok, err := check(part)
		if err != nil {
			return outcome{err: fmt.Errorf("download: %w", err)}
		}
		if ok {
			d.logf("fetched  %s (%d bytes)", e.Path, n)
			return outcome{}
		}
		os.Remove(part)
		if !restarted {
			// Perhaps a resumed prefix was stale: once more from zero.
			restarted = true
			d.logf("refetch  %s (digest %s, want %s)", e.Path, sum, e.SHA256)
			continue
		}
		return outcome{err: &verify.MismatchError{Path: e.Path, Kind: verify.KindHash, WantSHA256: e.SHA256, GotSHA256: sum, WantSize: size, GotSize: n, Authority: authority, Detail: "the hub served these bytes twice; not kept"}}
	}
}

type transferResult int

const (
	resultDone    transferResult = iota // the body ended cleanly
	resultRetry                         // a transient failure
	resultRefused                       // a final failure
)

// transfer makes one request for the file and appends what arrives to
// part. It returns resultRefused with a final error, resultRetry with a
// transient one, or resultDone with nil when the body ended cleanly.
func (d *downloader) transfer(ctx context.Context, e sums.Entry, size int64, part string) (transferResult, error) {
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return resultRefused, fmt.Errorf("download: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return resultRefused, fmt.Errorf("download: %w", err)
	}
	have := info.Size()
	if size >= 0 && have > size {
		have = 0
	}
	if size >= 0 && have == size {
		return resultDone, nil // complete already; the caller hashes it
	}
	resp, u, err := d.request(ctx, e.Path, have)
	if err != nil {
		return resultRetry, fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		have = 0 // the server ignored the range: start over
	case http.StatusPartialContent:
		start, ok := contentRangeStart(resp.Header.Get("Content-Range"))
		if !ok || start != have {
			// Not the bytes asked for: start over without a range.
			if err := f.Truncate(0); err != nil {
				return resultRefused, fmt.Errorf("download: %w", err)
			}
			return resultRetry, fmt.Errorf("download: %s: Content-Range %q does not start at %d", u, resp.Header.Get("Content-Range"), have)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		if err := f.Truncate(0); err != nil {
			return resultRefused, fmt.Errorf("download: %w", err)
		}
		return resultRetry, &HTTPError{URL: u, Status: resp.StatusCode}
	case http.StatusNotFound:
		return resultRefused, &verify.MismatchError{Path: e.Path, Kind: verify.KindMissing, WantSHA256: e.SHA256, WantSize: size, GotSize: verify.Unknown, Authority: sums.SumsFile, Detail: "listed, but the hub has no such file (HTTP 404)"}
	default:
		herr := &HTTPError{URL: u, Status: resp.StatusCode}
		if httpstatus.Retryable(resp.StatusCode) {
			return resultRetry, herr
		}
		return resultRefused, herr
	}
	// For LFS files the hub's ETag is the file's sha256: refuse before
	// reading a byte when it names other content.
	if etag := etagSHA256(resp.Header); etag != "" && e.SHA256 != "" && etag != e.SHA256 {
		return resultRefused, &verify.MismatchError{Path: e.Path, Kind: verify.KindHash, WantSHA256: e.SHA256, GotSHA256: etag, WantSize: size, GotSize: verify.Unknown, Authority: sums.SumsFile, Detail: "the hub's ETag names other content; not downloaded"}
	}
	if err := f.Truncate(have); err != nil {
		return resultRefused, fmt.Errorf("download: %w", err)
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return resultRefused, fmt.Errorf("download: %w", err)
	}
	var body io.Reader = resp.Body
	if size >= 0 {
		// One byte more than expected is enough to know it is wrong.
		body = io.LimitReader(resp.Body, size-have+1)
	}
	n, err := io.CopyBuffer(f, countingReader{body, &d.recv}, make([]byte, 256<<10))
	if err != nil {
		return resultRetry, fmt.Errorf("download: %s: after %d bytes: %w", u, have+n, err)
	}
	return resultDone, nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// contentRangeStart parses "bytes START-END/TOTAL" (TOTAL may be "*") and
// returns START.
func contentRangeStart(h string) (int64, bool) {
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	rng, total, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, false
	}
	first, last, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, false
	}
	a, err1 := strconv.ParseInt(first, 10, 64)
	b, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || a < 0 || b < a {
		return 0, false
	}
	if total != "*" {
		t, err := strconv.ParseInt(total, 10, 64)
		if err != nil || t <= b {
			return 0, false
		}
	}
	return a, true
}

// etagSHA256 returns the X-Linked-Etag (else ETag) value when it is a
// 64-hex sha256, lower-cased; else "".
func etagSHA256(h http.Header) string {
	v := h.Get("X-Linked-Etag")
	if v == "" {
		v = h.Get("ETag")
	}
	v = strings.TrimPrefix(v, "W/")
	v = strings.Trim(v, `"`)
	v = strings.ToLower(v)
	if !sums.ValidSHA256(v) {
		return ""
	}
	return v
}

// setMode gives a release's runtime binaries (runtime/lfmq-<os>-<arch>)
// the execute bits, which a hub does not keep, and every other file
// 0644.
func setMode(file, releasePath string) error {
	mode := os.FileMode(0o644)
	if isRuntimeBinary(releasePath) {
		mode = 0o755
	}
	if err := os.Chmod(file, mode); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}

// isRuntimeBinary reports whether a release path is a runtime binary
// (not the source archive).
func isRuntimeBinary(p string) bool {
	return strings.HasPrefix(p, "runtime/lfmq-") && p != sums.SourceArchivePath
}

// syncRename fsyncs a finished file and renames it to its final path.
func syncRename(part, final string) error {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if err := durable.Rename(part, final); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}

// atomicWrite writes p through a temporary file in tmpDir.
func atomicWrite(tmpDir, p string, data []byte) error {
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	tmp := filepath.Join(tmpDir, filepath.Base(p)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if err := syncRename(tmp, p); err != nil {
		return err
	}
	return nil
}

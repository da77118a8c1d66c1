package publish

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lfmq/lfmq/hub/hubapi"
	"github.com/lfmq/lfmq/verify/sums"
)

// DefaultEndpoint is the Hugging Face hub, Options.Endpoint's default
// (the same as hubapi.DefaultEndpoint).
const DefaultEndpoint = hubapi.DefaultEndpoint

// Options configures Publish.
type Options struct {
	// Endpoint is the hub's base URL (default DefaultEndpoint).
	Endpoint string
	// Repo is the model repository, "owner/name".
	Repo string
	// Branch receives the commit (default "main").
	Branch string
	// Revision, if set, is the tag to create on the release's commit
	// (usually runtime-release.json's revision). An existing tag is never
	// moved.
	Revision string
	// Dir is the release directory. Publish trusts the caller to have
	// verified it (package verify); it still refuses a file whose size or
	// inline content no longer matches the lists.
	Dir string
	// Create creates the repository when the hub does not have it;
	// Private makes a created repository private. Without Create a missing
	// repository is a *hubapi.RepoNotFoundError.
	Create, Private bool
	// Message is the commit summary (default "Publish <release_id>").
	Message string
	// Token is the hub token (HF_TOKEN), sent as "Authorization: Bearer"
	// to the endpoint's scheme and host only: never to the object storage
	// that LFS actions point at, never in an error or a log.
	Token string
	// Client is the HTTP client (default: one with a 5-minute header
	// timeout). Publish uses a copy whose redirects drop the token when
	// they leave the endpoint's host.
	Client *http.Client
	// Jobs bounds the LFS uploads in flight, whole objects and multipart
	// parts together (default 4).
	Jobs int
	// Retries is the number of retries of a request after a network
	// error, a 429 or a 5xx: 0 means the default, 5; a negative value
	// means none (one attempt).
	Retries int
	// Backoff gives the wait before retry n (1-based); default
	// 250ms·2^(n-1), at most 8 s.
	Backoff func(n int) time.Duration
	// Progress, if set, is told about each release file.
	Progress Progress
}

// Outcome says what publishing did with one file.
type Outcome int

const (
	// Uploaded: the content went to the hub (an LFS upload, or inline in
	// the commit).
	Uploaded Outcome = iota
	// Unchanged: the branch already has this content at this path.
	Unchanged
	// Stored: the hub already stored this LFS object (an earlier, perhaps
	// interrupted, publish); only its pointer is committed.
	Stored
)

// String returns "uploaded", "unchanged" or "stored".
func (o Outcome) String() string {
	switch o {
	case Uploaded:
		return "uploaded"
	case Unchanged:
		return "unchanged"
	case Stored:
		return "stored"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Progress receives per-file events. Publish calls them one at a time
// (never concurrently), from several goroutines; they must return
// quickly. Any may be nil.
type Progress struct {
	// Started: bytes of path (size in all) are about to be sent.
	Started func(path string, size int64)
	// Bytes: n more bytes of path were sent; n is negative when a failed
	// attempt's bytes are taken back before a retry.
	Bytes func(path string, n int64)
	// Done: path is finished (every release file gets one call, except
	// those a failure left unfinished). Inline files are done when the
	// commit succeeds.
	Done func(path string, outcome Outcome)
}

// progress serialises the callbacks.
type progress struct {
	mu sync.Mutex
	p  Progress
}

func (p *progress) started(path string, size int64) {
	if p.p.Started != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.p.Started(path, size)
	}
}

func (p *progress) bytes(path string, n int64) {
	if p.p.Bytes != nil && n != 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.p.Bytes(path, n)
	}
}

func (p *progress) done(path string, o Outcome) {
	if p.p.Done != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.p.Done(path, o)
	}
}

// Result describes a publish.
type Result struct {
	// Endpoint and Repo as used; URL is the repository's page.
	Endpoint, Repo, URL string
	Branch              string
	// Created: this run created the repository.
	Created bool
	// Parent is the branch head the publish started from ("" for a branch
	// without commits).
	Parent string
	// Commit is the commit that holds the release: the new commit, or the
	// existing one when UpToDate. CommitURL is its page.
	Commit, CommitURL string
	// UpToDate: the hub already had exactly this release (on the branch,
	// or under the existing tag); no commit was made.
	UpToDate bool
	// Tag is the revision tag on Commit ("" without Options.Revision);
	// TagCreated says whether this run created it.
	Tag        string
	TagCreated bool
	// Uploaded are the files whose content was sent; Skipped those that
	// needed nothing sent (unchanged on the branch, or an LFS object the
	// hub had). Sorted, with their total sizes.
	Uploaded, Skipped           []string
	UploadedBytes, SkippedBytes int64
	// Changed are the paths the commit added or modified, Deleted those it
	// removed: remote files that are not part of the release. Sorted.
	Changed, Deleted []string
}

// publisher is one run.
type publisher struct {
	opts     Options
	api      *repoAPI
	rel      *release
	progress *progress
	res      *Result
}

// Publish makes the hub's branch hold exactly the release in Dir, in one
// commit, and tags it. It uploads only what the hub does not have: files
// already on the branch with the same content are left alone, LFS objects
// the hub stores already (from an interrupted run, say) are not sent
// again. Remote files that are not part of the release are deleted,
// except .gitattributes, which the release replaces when it has one.
//
// Steps: read the release's lists; read the branch head (creating the
// repository if asked); if the tag exists already, succeed when its files
// are the release's and fail otherwise; list the head's tree and compare;
// ask preupload how the changed files are stored; upload the changed LFS
// objects through the LFS batch API (basic or multipart, then verify); make
// one commit with parentCommit set to the head read, so that a branch that
// moved meanwhile is a *StaleError and nothing changes; tag the commit.
func Publish(ctx context.Context, opts Options) (*Result, error) {
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	if opts.Branch == "" {
		opts.Branch = "main"
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 4
	}
	opts.Retries, opts.Backoff = hubapi.RetryDefaults(opts.Retries, opts.Backoff)
	base, err := checkOptions(&opts)
	if err != nil {
		return nil, err
	}
	rel, err := loadRelease(opts.Dir)
	if err != nil {
		return nil, err
	}
	defer rel.root.Close()
	if opts.Message == "" {
		id := rel.id
		if id == "" {
			id = "release " + rel.digest[:12]
		}
		opts.Message = "Publish " + id
	}
	endpoint := strings.TrimSuffix(base.String(), "/")
	p := &publisher{
		opts:     opts,
		api:      &repoAPI{&hubapi.Repo{Client: hubapi.NewClient(opts.Client, base, opts.Token, opts.Retries, opts.Backoff), ID: opts.Repo}},
		rel:      rel,
		progress: &progress{p: opts.Progress},
		res:      &Result{Endpoint: endpoint, Repo: opts.Repo, URL: endpoint + "/" + opts.Repo, Branch: opts.Branch, Tag: opts.Revision},
	}
	if err := p.run(ctx); err != nil {
		return p.res, err
	}
	return p.res, nil
}

// checkOptions validates opts and returns the endpoint URL.
func checkOptions(opts *Options) (*url.URL, error) {
	base, err := hubapi.CheckRepo(opts.Endpoint, opts.Repo)
	if err != nil {
		return nil, err
	}
	if !validBranch(opts.Branch) {
		return nil, fmt.Errorf("publish: branch %q is not a branch name of [A-Za-z0-9._/-]", opts.Branch)
	}
	if opts.Revision != "" && (!sums.ValidName(opts.Revision) || opts.Revision == opts.Branch) {
		return nil, fmt.Errorf("publish: revision %q is not a tag name of [A-Za-z0-9._-] other than the branch's", opts.Revision)
	}
	if opts.Dir == "" {
		return nil, errors.New("publish: no release directory")
	}
	return base, nil
}

// validBranch accepts git branch names of [A-Za-z0-9._/-] that git
// would: no empty, "." or ".."-holding component, no ".lock" ending.
func validBranch(b string) bool {
	if b == "" || len(b) > 255 || strings.HasSuffix(b, ".lock") || strings.Contains(b, "..") {
		return false
	}
	for seg := range strings.SplitSeq(b, "/") {
		if seg == "" || seg[0] == '.' || !sums.ValidName(seg) {
			return false
		}
	}
	return true
}

func (p *publisher) run(ctx context.Context) error {
	// The branch head, creating the repository if asked.
	head, state, err := p.api.Revision(ctx, p.opts.Branch)
	if state == hubapi.RepoMissing {
		if !p.opts.Create {
			return &hubapi.RepoNotFoundError{Endpoint: p.res.Endpoint, Repo: p.opts.Repo, Err: err}
		}
		created, cerr := p.api.createRepo(ctx, p.opts.Private)
		if cerr != nil {
			return cerr
		}
		p.res.Created = created
		head, state, err = p.api.Revision(ctx, p.opts.Branch)
		if state == hubapi.RepoMissing {
			return &hubapi.RepoNotFoundError{Endpoint: p.res.Endpoint, Repo: p.opts.Repo, Err: err}
		}
	}
	if err != nil {
		return err
	}
	p.res.Parent = head

	// A release tag that exists already: fine if it holds this release.
	if p.opts.Revision != "" {
		target, st, err := p.api.Revision(ctx, p.opts.Revision)
		if err != nil {
			return err
		}
		if st == hubapi.RevFound {
			remote, err := p.api.Tree(ctx, target)
			if err != nil {
				return err
			}
			d, err := p.diff(remote)
			if err != nil {
				return err
			}
			if len(d.changed) > 0 || len(d.deleted) > 0 {
				return &TagError{Tag: p.opts.Revision, Target: target}
			}
			p.finishUnchanged(d, target)
			return nil
		}
	}

	remote := map[string]hubapi.RemoteFile{}
	if head != "" {
		if remote, err = p.api.Tree(ctx, head); err != nil {
			return err
		}
	}
	d, err := p.diff(remote)
	if err != nil {
		return err
	}
	if len(d.changed) == 0 && len(d.deleted) == 0 {
		p.finishUnchanged(d, head)
		return p.tag(ctx, head)
	}
	for _, f := range d.unchanged {
		p.skip(f, Unchanged)
	}

	// How the hub stores each changed file.
	lfs, err := p.modes(ctx, d.changed)
	if err != nil {
		return err
	}

	// LFS objects: ask the batch API, upload what the hub lacks.
	if err := p.uploadLFS(ctx, d.changed, lfs); err != nil {
		return err
	}

	// One commit.
	payload, inline, err := p.payload(head, d, lfs)
	if err != nil {
		return err
	}
	for _, f := range inline {
		p.progress.started(f.path, f.size)
	}
	ans, err := p.api.commit(ctx, p.opts.Branch, payload)
	var he *hubapi.HubError
	if errors.As(err, &he) && he.Status == http.StatusPreconditionFailed {
		now, lerr := p.landed(ctx, head, he)
		if lerr != nil {
			return lerr
		}
		ans, err = commitAnswer{OID: now}, nil
	}
	if err != nil {
		return err
	}
	for _, f := range inline {
		p.progress.bytes(f.path, f.size)
		p.progress.done(f.path, Uploaded)
		p.uploaded(f)
	}
	p.res.Commit, p.res.CommitURL = ans.OID, ans.URL
	if p.res.CommitURL == "" {
		p.res.CommitURL = p.res.URL + "/commit/" + ans.OID
	}
	p.res.Changed = pathsOf(d.changed)
	p.res.Deleted = d.deleted
	p.sortResult()
	return p.tag(ctx, ans.OID)
}

// diffResult compares the release with a remote tree.
type diffResult struct {
	changed, unchanged []*relFile
	// deleted are remote paths outside the release, sorted.
	deleted []string
}

// diff compares by content: an LFS file by its sha256 and size, a
// regular remote file by its git blob id (the local file is hashed only
// when the sizes agree). Remote files outside the release are to be
// deleted, except .gitattributes.
func (p *publisher) diff(remote map[string]hubapi.RemoteFile) (diffResult, error) {
	var d diffResult
	for _, f := range p.rel.files {
		r, ok := remote[f.path]
		same := false
		switch {
		case !ok || r.Size != f.size:
		case r.LFS != "":
			same = r.LFS == f.sha256
		default:
			oid, err := p.rel.blobOID(f)
			if err != nil {
				return d, err
			}
			same = oid == r.GitOID
		}
		if same {
			d.unchanged = append(d.unchanged, f)
		} else {
			d.changed = append(d.changed, f)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(remote)) {
		if _, ok := p.rel.byPath[path]; !ok && path != ".gitattributes" {
			d.deleted = append(d.deleted, path)
		}
	}
	return d, nil
}

// finishUnchanged records a publish that found the release on the hub.
func (p *publisher) finishUnchanged(d diffResult, commit string) {
	for _, f := range d.unchanged {
		p.skip(f, Unchanged)
	}
	p.res.UpToDate = true
	p.res.Commit = commit
	if commit != "" {
		p.res.CommitURL = p.res.URL + "/commit/" + commit
	}
	p.sortResult()
}

// modes asks preupload how the changed files are stored and returns, per
// path, whether it goes to LFS. The release's .gitattributes decides
// when it routes a file to LFS; a file the hub wants in LFS that the
// release does not route there is a *RoutingError (when the release has a
// .gitattributes), a file the hub's .gitignore ignores an *IgnoredError.
// Empty files are always regular (object stores refuse empty uploads;
// huggingface_hub does the same).
func (p *publisher) modes(ctx context.Context, changed []*relFile) (map[string]bool, error) {
	samples := map[string][]byte{}
	for _, f := range changed {
		s, err := p.rel.sample(f)
		if err != nil {
			return nil, err
		}
		samples[f.path] = s
	}
	hub, err := p.api.preupload(ctx, p.opts.Branch, changed, samples, p.rel.attrsText)
	if err != nil {
		return nil, err
	}
	lfs := map[string]bool{}
	var ignored, misrouted []string
	for _, f := range changed {
		m := hub[f.path]
		switch {
		case m.Ignore:
			ignored = append(ignored, f.path)
		case f.size == 0:
		case f.lfs:
			lfs[f.path] = true
		case m.LFS && p.rel.attrs != nil:
			misrouted = append(misrouted, f.path)
		case m.LFS:
			lfs[f.path] = true
		}
	}
	if len(ignored) > 0 {
		return nil, &IgnoredError{Paths: ignored}
	}
	if len(misrouted) > 0 {
		return nil, &RoutingError{Paths: misrouted}
	}
	return lfs, nil
}

// uploadLFS sends the changed LFS files' objects that the hub lacks.
func (p *publisher) uploadLFS(ctx context.Context, changed []*relFile, lfs map[string]bool) error {
	objects := map[string]*lfsObject{}
	var order []string
	sizes := map[string]int64{}
	for _, f := range changed {
		if !lfs[f.path] {
			continue
		}
		o, ok := objects[f.sha256]
		if !ok {
			o = &lfsObject{oid: f.sha256, size: f.size}
			objects[f.sha256] = o
			order = append(order, f.sha256)
			sizes[f.sha256] = f.size
		}
		o.paths = append(o.paths, f.path)
	}
	if len(order) == 0 {
		return nil
	}
	plans, err := p.api.batch(ctx, p.opts.Branch, sizes, order)
	if err != nil {
		return err
	}
	var todo []*lfsObject
	for _, oid := range order {
		o := objects[oid]
		o.plan = plans[oid]
		if o.plan.Upload == nil {
			for _, path := range o.paths {
				p.skip(p.rel.byPath[path], Stored)
			}
			continue
		}
		todo = append(todo, o)
	}
	up := &uploader{api: p.api, root: p.rel.root, progress: p.progress, jobs: p.opts.Jobs}
	errs := up.run(ctx, todo)
	for i, o := range todo {
		// An object whose upload completed counts even when another
		// failed: the hub keeps it, and the next run will not send it.
		if errs[i] != nil {
			continue
		}
		p.uploaded(p.rel.byPath[o.paths[0]])
		for _, path := range o.paths[1:] {
			p.skip(p.rel.byPath[path], Stored)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		p.sortResult()
		return err
	}
	return nil
}

// payload builds the NDJSON commit: a header line {"summary",
// "description", "parentCommit"} (parentCommit omitted for a branch
// without commits), then "file" lines (base64 content) for inline files,
// "lfsFile" lines {"path", "algo": "sha256", "oid", "size"} for LFS
// files and "deletedFile" lines {"path"}. It returns the inline files.
func (p *publisher) payload(head string, d diffResult, lfs map[string]bool) ([]byte, []*relFile, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	header := map[string]string{
		"summary": p.opts.Message,
		"description": fmt.Sprintf("lfmq release %s, revision %s\n\nRelease digest: sha256(SHA256SUMS) = %s\n",
			p.rel.id, p.rel.revision, p.rel.digest),
	}
	if head != "" {
		header["parentCommit"] = head
	}
	line := func(key string, value any) error {
		return enc.Encode(map[string]any{"key": key, "value": value})
	}
	if err := line("header", header); err != nil {
		return nil, nil, err
	}
	var inline []*relFile
	for _, f := range d.changed {
		if lfs[f.path] {
			if err := line("lfsFile", map[string]any{"path": f.path, "algo": "sha256", "oid": f.sha256, "size": f.size}); err != nil {
				return nil, nil, err
			}
			continue
		}
		data, err := p.rel.content(f)
		if err != nil {
			return nil, nil, err
		}
		if err := line("file", map[string]string{"path": f.path, "encoding": "base64", "content": base64.StdEncoding.EncodeToString(data)}); err != nil {
			return nil, nil, err
		}
		inline = append(inline, f)
	}
	for _, path := range d.deleted {
		if err := line("deletedFile", map[string]string{"path": path}); err != nil {
			return nil, nil, err
		}
	}
	return buf.Bytes(), inline, nil
}

// landed handles a 412 (the head is no longer parent). If the branch now
// holds exactly the release, our commit landed on an attempt whose answer
// was lost, or someone published the same release meanwhile: either way
// the publish succeeded, at the head it returns. Otherwise the branch
// moved: a *StaleError.
func (p *publisher) landed(ctx context.Context, parent string, cause *hubapi.HubError) (string, error) {
	now, st, err := p.api.Revision(ctx, p.opts.Branch)
	if err != nil || st != hubapi.RevFound {
		return "", &StaleError{Branch: p.opts.Branch, Parent: parent, Err: cause}
	}
	stale := &StaleError{Branch: p.opts.Branch, Parent: parent, Head: now, Err: cause}
	if now == parent {
		return "", stale
	}
	remote, err := p.api.Tree(ctx, now)
	if err != nil {
		return "", stale
	}
	d, err := p.diff(remote)
	if err != nil || len(d.changed) > 0 || len(d.deleted) > 0 {
		return "", stale
	}
	return now, nil
}

// tag creates the revision tag on commit; an existing tag must already
// name it.
func (p *publisher) tag(ctx context.Context, commit string) error {
	if p.opts.Revision == "" {
		return nil
	}
	if commit == "" {
		return fmt.Errorf("publish: the branch %s has no commit to tag %s", p.opts.Branch, p.opts.Revision)
	}
	msg := fmt.Sprintf("lfmq release %s; sha256(SHA256SUMS) = %s", p.rel.id, p.rel.digest)
	err := p.api.createTag(ctx, p.opts.Revision, commit, msg)
	if errors.Is(err, errTagExists) {
		target, st, err := p.api.Revision(ctx, p.opts.Revision)
		if err != nil {
			return err
		}
		if st != hubapi.RevFound || target != commit {
			return &TagError{Tag: p.opts.Revision, Target: target, Commit: commit}
		}
		return nil
	}
	if err != nil {
		return err
	}
	p.res.TagCreated = true
	return nil
}

func (p *publisher) skip(f *relFile, o Outcome) {
	p.progress.done(f.path, o)
	p.res.Skipped = append(p.res.Skipped, f.path)
	p.res.SkippedBytes += f.size
}

func (p *publisher) uploaded(f *relFile) {
	p.res.Uploaded = append(p.res.Uploaded, f.path)
	p.res.UploadedBytes += f.size
}

func (p *publisher) sortResult() {
	slices.Sort(p.res.Uploaded)
	slices.Sort(p.res.Skipped)
}

func pathsOf(fs []*relFile) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.path
	}
	return out
}

// Validate checks the options' endpoint, repository, branch and revision
// (with the defaults Publish would fill in) without contacting the hub, so
// that a command line can be refused before any work.
func (o Options) Validate() error {
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	if o.Branch == "" {
		o.Branch = "main"
	}
	_, err := checkOptions(&o)
	return err
}

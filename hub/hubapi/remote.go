package hubapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// RemoteOptions configures OpenRemote.
type RemoteOptions struct {
	// Endpoint is the hub's base URL (default DefaultEndpoint).
	Endpoint string
	// Repo is OWNER/NAME.
	Repo string
	// Dataset reads a dataset repository (api/datasets/OWNER/NAME,
	// files at {endpoint}/datasets/OWNER/NAME/resolve/…) instead of a
	// model's.
	Dataset bool
	// Token, if set, is sent as a Bearer to the endpoint's host only.
	Token string
	// Client is the HTTP client (default: one with header timeouts).
	Client *http.Client
	// Retries and Backoff are as RetryDefaults takes them.
	Retries int
	Backoff func(n int) time.Duration
}

// Remote reads one repository of the hub: what commit a revision names and
// which files that commit holds. It is the read-only half of the client
// package publish uses, for commands that take a model by its hub id.
type Remote struct {
	api *Repo
	// URL is the repository's address, {endpoint}/OWNER/NAME (a
	// dataset's: {endpoint}/datasets/OWNER/NAME).
	URL string
}

// RemoteFile is one file of a commit's tree (Remote.Files, Repo.Tree).
type RemoteFile struct {
	Path string
	Size int64
	// GitOID is the git blob id (of the pointer, for an LFS file).
	GitOID string
	// LFS is the object's sha256 for an LFS file, else "".
	LFS string
}

// OpenRemote checks opts and returns the repository's reader; it sends
// nothing.
func OpenRemote(opts RemoteOptions) (*Remote, error) {
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	opts.Retries, opts.Backoff = RetryDefaults(opts.Retries, opts.Backoff)
	base, err := checkRepo(opts.Endpoint, opts.Repo, true)
	if err != nil {
		return nil, err
	}
	cl := NewClient(opts.Client, base, opts.Token, opts.Retries, opts.Backoff)
	cl.reading = true
	prefix := "/"
	if opts.Dataset {
		prefix = "/datasets/"
	}
	return &Remote{
		api: &Repo{Client: cl, ID: opts.Repo, Dataset: opts.Dataset},
		URL: strings.TrimSuffix(base.String(), "/") + prefix + opts.Repo,
	}, nil
}

// RevisionNotFoundError reports a branch, tag or commit the repository
// does not have.
type RevisionNotFoundError struct {
	Repo, Revision string
}

func (e *RevisionNotFoundError) Error() string {
	return fmt.Sprintf("hub: repository %s has no revision %q", e.Repo, e.Revision)
}

// Resolve returns the commit a branch, tag or commit names. A repository
// the hub does not have (or does not show to the token) is a
// *RepoNotFoundError, a revision it does not have a *RevisionNotFoundError.
func (r *Remote) Resolve(ctx context.Context, rev string) (string, error) {
	commit, state, err := r.api.Revision(ctx, rev)
	switch state {
	case RevFound:
		return commit, nil
	case RevMissing:
		return "", &RevisionNotFoundError{Repo: r.api.ID, Revision: rev}
	case RepoMissing:
		return "", &RepoNotFoundError{Endpoint: r.api.base.String(), Repo: r.api.ID, Err: err, Reading: true}
	}
	return "", err
}

// Files lists every file of a commit (or any revision), sorted by path.
func (r *Remote) Files(ctx context.Context, rev string) ([]RemoteFile, error) {
	tree, err := r.api.Tree(ctx, rev)
	if err != nil {
		return nil, err
	}
	out := make([]RemoteFile, 0, len(tree))
	for _, f := range tree {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b RemoteFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

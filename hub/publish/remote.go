package publish

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
	// Retries and Backoff are as in Options.
	Retries int
	Backoff func(n int) time.Duration
}

// Remote reads one repository of the hub: what commit a revision names and
// which files that commit holds. It is the read-only half of the client
// Publish uses, for commands that take a model by its hub id.
type Remote struct {
	api *repoAPI
	// URL is the repository's address, {endpoint}/OWNER/NAME (a
	// dataset's: {endpoint}/datasets/OWNER/NAME).
	URL string
}

// RemoteFile is one file of a commit's tree.
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
	opts.Retries, opts.Backoff = retryDefaults(opts.Retries, opts.Backoff)
	base, err := checkRepo(opts.Endpoint, opts.Repo)
	if err != nil {
		return nil, err
	}
	prefix := "/"
	if opts.Dataset {
		prefix = "/datasets/"
	}
	return &Remote{
		api: &repoAPI{client: newClient(opts.Client, base, opts.Token, opts.Retries, opts.Backoff), repo: opts.Repo, dataset: opts.Dataset},
		URL: strings.TrimSuffix(base.String(), "/") + prefix + opts.Repo,
	}, nil
}

// RevisionNotFoundError reports a branch, tag or commit the repository
// does not have.
type RevisionNotFoundError struct {
	Repo, Revision string
}

func (e *RevisionNotFoundError) Error() string {
	return fmt.Sprintf("publish: repository %s has no revision %q", e.Repo, e.Revision)
}

// Resolve returns the commit a branch, tag or commit names. A repository
// the hub does not have (or does not show to the token) is a
// *RepoNotFoundError, a revision it does not have a *RevisionNotFoundError.
func (r *Remote) Resolve(ctx context.Context, rev string) (string, error) {
	commit, state, err := r.api.revision(ctx, rev)
	switch state {
	case revFound:
		return commit, nil
	case revMissing:
		return "", &RevisionNotFoundError{Repo: r.api.repo, Revision: rev}
	case repoMissing:
		return "", &RepoNotFoundError{Endpoint: r.api.base.String(), Repo: r.api.repo, Err: err, Reading: true}
	}
	return "", err
}

// Files lists every file of a commit (or any revision), sorted by path.
func (r *Remote) Files(ctx context.Context, rev string) ([]RemoteFile, error) {
	tree, err := r.api.tree(ctx, rev)
	if err != nil {
		return nil, err
	}
	out := make([]RemoteFile, 0, len(tree))
	for p, f := range tree {
		out = append(out, RemoteFile{Path: p, Size: f.Size, GitOID: f.OID, LFS: f.LFS})
	}
	slices.SortFunc(out, func(a, b RemoteFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/hub/hfcache"
	"github.com/lfmq/lfmq/hub/hubapi"
)

// ModelOptions configures ResolveModel and ModelDir.
type ModelOptions struct {
	// Label is how the command line names the argument ("--model"); every
	// message and error starts with "Label value".
	Label string
	// Endpoint is the hub's base URL (default: $HF_ENDPOINT, else
	// hubapi.DefaultEndpoint).
	Endpoint string
	// Token is sent as a Bearer to the hub's own host (default: $HF_TOKEN,
	// without surrounding space).
	Token string
	// Log, if set, receives where the snapshot came from and one line per
	// file fetched.
	Log io.Writer
}

// ArgError reports a model argument that is the command line's fault: a
// malformed hub id, or a repository or revision the hub does not have.
// Err carries the whole message.
type ArgError struct{ Err error }

func (e *ArgError) Error() string { return e.Err.Error() }
func (e *ArgError) Unwrap() error { return e.Err }

// IsModelID reports whether a model argument is a hub id rather than a
// directory: a string that names an existing directory is that directory,
// whatever it looks like, and one that no hub repository can be named
// (RepoNameProblem) is a directory that is not there, for which nothing
// is asked of the hub.
func IsModelID(value string) bool {
	if _, err := os.Stat(value); err == nil {
		return false
	}
	id, err := hfcache.ParseID(value)
	return err == nil && RepoNameProblem(id.Repo) == ""
}

// RepoNameProblem says why OWNER/NAME (of [A-Za-z0-9._-], as
// hfcache.ParseID takes it) cannot name a repository on a Hugging Face
// hub, by huggingface_hub's validate_repo_id: each part starts and ends
// with a letter, digit or '_'; the name has at most 96 characters; no
// "--" or ".." anywhere; no ".git" at the end. "" when it can.
func RepoNameProblem(repo string) string {
	word := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	owner, name, _ := strings.Cut(repo, "/")
	switch {
	case strings.Contains(repo, "--") || strings.Contains(repo, ".."):
		return `it has "--" or ".."`
	case strings.HasSuffix(repo, ".git"):
		return `it ends in ".git"`
	case len(name) > 96:
		return "the name is longer than 96 characters"
	}
	for _, part := range []string{owner, name} {
		if part == "" || !word(part[0]) || !word(part[len(part)-1]) {
			return "OWNER and NAME must start and end with a letter, digit or '_'"
		}
	}
	return ""
}

// ModelDir returns the directory a model argument names: value itself
// unless IsModelID, else ResolveModel's snapshot.
func ModelDir(ctx context.Context, value string, opts ModelOptions) (string, error) {
	if !IsModelID(value) {
		return value, nil
	}
	return ResolveModel(ctx, value, opts)
}

// ResolveModel returns the snapshot directory of the model value names
// (OWNER/NAME[@REVISION]) in the Hugging Face cache: without the network
// when the cache holds all of it, otherwise after fetching what is missing
// from the hub. A malformed id, or a repository or revision the hub does
// not have, is an *ArgError.
func ResolveModel(ctx context.Context, value string, opts ModelOptions) (string, error) {
	label := opts.Label + " " + value
	id, err := hfcache.ParseID(value)
	if err != nil {
		return "", &ArgError{fmt.Errorf("%s: %w", label, err)}
	}
	if p := RepoNameProblem(id.Repo); p != "" {
		return "", &ArgError{fmt.Errorf("%s: no such directory, and no hub id: %s", label, p)}
	}
	root, err := hfcache.Root()
	if err != nil {
		return "", err
	}
	endpoint := opts.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("HF_ENDPOINT")
	}
	token := opts.Token
	if token == "" {
		token = strings.TrimSpace(os.Getenv("HF_TOKEN"))
	}
	snap, ok, err := hfcache.Lookup(root, id)
	if err != nil {
		return "", fmt.Errorf("%s: %w", label, err)
	}
	if ok {
		logf(opts.Log, "%s: snapshot %s from the Hugging Face cache, %s\n", label, snap.Commit, snap.Dir)
		return snap.Dir, nil
	}
	logf(opts.Log, "%s: fetching into the Hugging Face cache, %s\n", label, hfcache.RepoDir(root, id.Repo))
	snap, err = hfcache.Fetch(ctx, id, hfcache.Options{Root: root, Endpoint: endpoint, Token: token, Log: opts.Log})
	// Without @REVISION the value may as well be a mistyped relative
	// path (out/ckpt), and the hub's answer alone would hide that no
	// directory has that name.
	if !strings.Contains(value, "@") {
		label += ": no such directory, and as a hub id"
	}
	var rn *hubapi.RepoNotFoundError
	var vn *hubapi.RevisionNotFoundError
	if errors.As(err, &rn) || errors.As(err, &vn) {
		return "", &ArgError{fmt.Errorf("%s: %w", label, err)}
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s: %w (what arrived is kept; the same command resumes it)", label, err)
		}
		return "", fmt.Errorf("%s: %w", label, err)
	}
	logf(opts.Log, "%s: snapshot %s (%d files fetched, %s; %d linked from the cache), %s\n",
		label, snap.Commit, len(snap.Fetched), units.Bytes(snap.BytesReceived), len(snap.Linked), snap.Dir)
	return snap.Dir, nil
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

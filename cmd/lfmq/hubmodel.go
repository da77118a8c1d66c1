package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/format/units"
	"github.com/lfmq/lfmq/hub/hfcache"
	"github.com/lfmq/lfmq/hub/publish"
)

// hubEndpointUsage is the help of --endpoint on the commands that read a
// source checkpoint.
const hubEndpointUsage = "hub base URL for a model given as OWNER/NAME[@REVISION] (default: $HF_ENDPOINT, else " + publish.DefaultEndpoint + ")"

// isHubID reports whether a source checkpoint argument is a hub id rather
// than a directory: a string that names an existing directory is that
// directory, whatever it looks like.
func isHubID(value string) bool {
	if _, err := os.Stat(value); err == nil {
		return false
	}
	_, err := hfcache.ParseID(value)
	return err == nil
}

// modelDir returns the directory a model argument names: value itself,
// or, for a hub id OWNER/NAME[@REVISION], its snapshot in the Hugging Face
// cache (resolveHubModel: found there without the network, else fetched).
// flag is how the command line names the argument ("--model").
func modelDir(cmd *cobra.Command, ios *IOStreams, flag, value, endpoint string) (string, error) {
	if !isHubID(value) {
		return value, nil
	}
	return resolveHubModel(cmd, ios, flag, value, endpoint)
}

// resolveHubModel returns the snapshot directory of the model value
// names (OWNER/NAME[@REVISION]) in the Hugging Face cache: without the
// network when the cache holds all of it, otherwise after fetching what
// is missing from endpoint (else $HF_ENDPOINT, else the Hugging Face hub)
// with $HF_TOKEN. A repository or revision the hub does not have is the
// command line's fault.
func resolveHubModel(cmd *cobra.Command, ios *IOStreams, flag, value, endpoint string) (string, error) {
	label := flag + " " + value
	id, err := hfcache.ParseID(value)
	if err != nil {
		return "", &usageError{fmt.Errorf("%s: %w", label, err)}
	}
	root, err := hfcache.Root()
	if err != nil {
		return "", err
	}
	if endpoint == "" {
		endpoint = os.Getenv("HF_ENDPOINT")
	}
	snap, ok, err := hfcache.Lookup(root, id)
	if err != nil {
		return "", fmt.Errorf("%s: %w", label, err)
	}
	if ok {
		ios.Errorf("%s: snapshot %s from the Hugging Face cache, %s\n", label, snap.Commit, snap.Dir)
		return snap.Dir, nil
	}
	ios.Errorf("%s: fetching into the Hugging Face cache, %s\n", label, hfcache.RepoDir(root, id.Repo))
	snap, err = hfcache.Fetch(cmd.Context(), id, hfcache.Options{Root: root, Endpoint: endpoint,
		Token: strings.TrimSpace(os.Getenv("HF_TOKEN")), Log: ios.ErrOut})
	// Without @REVISION the value may as well be a mistyped relative
	// path (out/ckpt), and the hub's answer alone would hide that no
	// directory has that name.
	if !strings.Contains(value, "@") {
		label += ": no such directory, and as a hub id"
	}
	var rn *publish.RepoNotFoundError
	var vn *publish.RevisionNotFoundError
	if errors.As(err, &rn) || errors.As(err, &vn) {
		return "", &usageError{fmt.Errorf("%s: %w", label, err)}
	}
	if err != nil {
		if cmd.Context().Err() != nil {
			return "", fmt.Errorf("%s: %w (what arrived is kept; the same command resumes it)", label, err)
		}
		return "", fmt.Errorf("%s: %w", label, err)
	}
	ios.Errorf("%s: snapshot %s (%d files fetched, %s; %d linked from the cache), %s\n",
		label, snap.Commit, len(snap.Fetched), units.Bytes(snap.BytesReceived), len(snap.Linked), snap.Dir)
	return snap.Dir, nil
}

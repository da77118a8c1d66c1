package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/hub"
	"github.com/lfmq/lfmq/hub/hubapi"
)

// hubEndpointUsage is the help of --endpoint on the commands that read a
// source checkpoint.
const hubEndpointUsage = "hub base URL for a model given as OWNER/NAME[@REVISION] (default: $HF_ENDPOINT, else " + hubapi.DefaultEndpoint + ")"

// isHubID reports whether a source checkpoint argument is a hub id rather
// than a directory (hub.IsModelID).
func isHubID(value string) bool { return hub.IsModelID(value) }

// modelDir returns the directory a model argument names: value itself,
// or, for a hub id OWNER/NAME[@REVISION], its snapshot in the Hugging Face
// cache (hub.ModelDir). flag is how the command line names the argument
// ("--model").
func modelDir(cmd *cobra.Command, ios *IOStreams, flag, value, endpoint string) (string, error) {
	return hubResult(hub.ModelDir(cmd.Context(), value, hubModelOptions(ios, flag, endpoint)))
}

// resolveHubModel returns the snapshot directory of the hub id value in
// the Hugging Face cache (hub.ResolveModel).
func resolveHubModel(cmd *cobra.Command, ios *IOStreams, flag, value, endpoint string) (string, error) {
	return hubResult(hub.ResolveModel(cmd.Context(), value, hubModelOptions(ios, flag, endpoint)))
}

// hubModelOptions logs to the command's error stream; the token comes
// from $HF_TOKEN.
func hubModelOptions(ios *IOStreams, flag, endpoint string) hub.ModelOptions {
	return hub.ModelOptions{Label: flag, Endpoint: endpoint, Log: ios.ErrOut}
}

// hubResult makes a model argument the hub refuses the command line's
// fault.
func hubResult(dir string, err error) (string, error) {
	var ae *hub.ArgError
	if errors.As(err, &ae) {
		return "", &usageError{ae.Err}
	}
	return dir, err
}

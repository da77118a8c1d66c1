package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/lfmq/lfmq/version"
)

func newVersionCmd(ios *IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the lfmq version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(ios.Out, versionText())
			return nil
		},
	}
}

// versionText is what 'lfmq version' and 'lfmq --version' print.
func versionText() string {
	s := fmt.Sprintf("lfmq %s (%s, %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if version.SourceDigest != "" {
		s += fmt.Sprintf("source sha256 %s\n", version.SourceDigest)
	}
	return s
}

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
			fmt.Fprintf(ios.Out, "lfmq %s (%s, %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if version.SourceDigest != "" {
				fmt.Fprintf(ios.Out, "source sha256 %s\n", version.SourceDigest)
			}
			return nil
		},
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// executeWith runs the command line args (command words first) on a root
// command whose command of the same name is replaced by cmd — usually built
// with a capture hook as its run function, so a test sees the parsed Options.
func executeWith(ios *IOStreams, cmd *cobra.Command, args ...string) error {
	root := newRootCmd(ios)
	root.RemoveCommand(findCmd(root, cmd.Name()))
	root.AddCommand(cmd)
	root.SetArgs(args)
	return root.Execute()
}

// wantUsageError fails the test unless err is a usage error (exit code 2)
// whose message contains want.
func wantUsageError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) || exitCode(err) != exitUsage {
		t.Fatalf("err = %v (exit %d), want a usage error containing %q", err, exitCode(err), want)
	}
}

func findCmd(root *cobra.Command, name string) *cobra.Command {
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

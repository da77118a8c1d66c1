// Command lfmq quantizes BF16 LFM2-MoE checkpoints to the lfmq-1 format
// (BFP4 experts, BFP8 dense weights) and inspects checkpoints.
//
// Run "lfmq help" for the commands. Exit codes: 0 success, 1 failure,
// 2 usage error, 3 verification failed (a mismatch was found).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], systemStreams())
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code; main is only this
// call, so tests drive the whole program through it.
func run(ctx context.Context, args []string, ios *IOStreams) int {
	root := newRootCmd(ios)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	ios.Errorf("lfmq: %v\n", err)
	return exitCode(err)
}

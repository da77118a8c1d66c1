// Command lfmq quantizes BF16 LFM2-MoE checkpoints to the lfmq-1 format
// (BFP4 experts, BFP8 dense weights) and inspects checkpoints.
//
// Run "lfmq help" for the commands. Exit codes: 0 success, 1 failure,
// 2 usage error, 3 verification failed (a mismatch was found).
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ios := systemStreams()
	go exitOnSecondSignal(ctx, func(c chan<- os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }, ios, os.Exit)
	code := run(ctx, os.Args[1:], ios)
	stop()
	os.Exit(code)
}

// exitOnSecondSignal lets a second Ctrl-C (or SIGTERM) stop at once. The
// first cancels ctx and commands wind down in order (lfmq serve lets
// running requests finish for up to --shutdown-timeout); without this,
// signal.NotifyContext would swallow every further signal, and a person
// pressing Ctrl-C again would wait out the whole wind-down. notify
// registers the channel for the signals, once ctx is done, so that the
// first signal is not counted twice. Writes in progress are crash-safe
// (quantize continues with --resume), so stopping at once loses nothing
// but the wind-down.
func exitOnSecondSignal(ctx context.Context, notify func(chan<- os.Signal), ios *IOStreams, exit func(int)) {
	<-ctx.Done()
	sigs := make(chan os.Signal, 1)
	notify(sigs)
	<-sigs
	ios.Errorf("lfmq: interrupted again: stopping now, without waiting for running work\n")
	exit(exitFailure)
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
	// A command that printed its own report of the failure (lfmq verify's
	// findings and summary) is not repeated here.
	var shown *reportedError
	if !errors.As(err, &shown) {
		ios.Errorf("lfmq: %s\n", message(ctx, err))
	}
	return exitCode(err)
}

// message is err for people: a run stopped by Ctrl-C or SIGTERM says
// "interrupted" where Go's context would say "context canceled".
func message(ctx context.Context, err error) string {
	msg := err.Error()
	if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return msg
	}
	if msg = strings.ReplaceAll(msg, context.Canceled.Error(), "interrupted"); !strings.Contains(msg, "interrupted") {
		msg = "interrupted: " + msg
	}
	return msg
}

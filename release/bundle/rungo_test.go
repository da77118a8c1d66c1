package bundle

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// TestRunGoCancelled: a go command killed because the build was cancelled
// (Ctrl-C) reports the cancellation, which lfmq prints as "interrupted",
// not the go command's "signal: killed" as if the build had failed.
func TestRunGoCancelled(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command to stand in for a long go build")
	}
	b := &builder{opts: &Options{GoCommand: sleep}}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = b.runGo(ctx, t.TempDir(), "linux/amd64", nil, "30")
	var be *BuildError
	if !errors.Is(err, context.Canceled) || errors.As(err, &be) {
		t.Errorf("err = %v, want the cancellation, not a BuildError", err)
	}
}

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lfmq/lfmq/engine/config"
	"github.com/lfmq/lfmq/internal/progress"

	"golang.org/x/term"
)

// statusEvery is how often long work reports itself off a terminal
// (progress.Every). A variable only so that a test can make the lines come
// during a short run.
var statusEvery = progress.Every

// IOStreams is where a command reads and writes. Commands never touch
// os.Stdout directly, so tests capture output and progress bars appear only
// on a terminal.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// ErrTTY reports whether ErrOut is a terminal (progress bars go there).
	ErrTTY bool
}

func systemStreams() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
	}
}

// testStreams returns streams backed by buffers.
func testStreams() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}, &out, &errOut
}

// Errorf writes a human message to the error stream.
func (s *IOStreams) Errorf(format string, args ...any) {
	fmt.Fprintf(s.ErrOut, format, args...)
}

// ConfigWarnings writes a warning line for each unknown key of the
// config.json in the checkpoint directories, so that a typo such as
// hidden_sise is heard before it becomes a shape error. A config that
// does not load is left to the command's own load to report.
func (s *IOStreams) ConfigWarnings(dirs ...string) {
	for _, dir := range dirs {
		cfg, err := config.Load(dir)
		if err != nil {
			continue
		}
		for _, w := range cfg.Warnings() {
			s.Errorf("warning: %s: %s\n", filepath.Join(dir, "config.json"), w)
		}
	}
}

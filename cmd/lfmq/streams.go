package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

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

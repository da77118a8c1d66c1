package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLine bounds one line of an event stream: a chunk of one token is a
// few hundred bytes; a server's first chunk may carry the prompt's token
// ids or log-probs, still far below this.
const MaxLine = 8 << 20

// ErrLongLine is a stream line over MaxLine.
var ErrLongLine = fmt.Errorf("a line over %d bytes", MaxLine)

// Stream reads the data lines of a server-sent event stream (a streamed
// completion or chat answer), bounded line by line.
type Stream struct {
	br   *bufio.Reader
	line int
	err  error // the error to give after the last line
}

// NewStream reads the event stream r.
func NewStream(r io.Reader) *Stream {
	return &Stream{br: bufio.NewReaderSize(r, 64<<10)}
}

// Line is the 1-based number of the line Next read last.
func (s *Stream) Line() int { return s.line }

// Next returns the next data line's value, without "data:" and the space
// around it ("[DONE]" included: the caller decides what ends the answer).
// Blank lines, comments, event: and id: fields are passed over. It
// returns io.EOF at the end of r, ErrLongLine for a line over MaxLine and
// r's own error when it fails; a last line without a newline is returned
// first, and the end after it.
func (s *Stream) Next() ([]byte, error) {
	for s.err == nil {
		s.line++
		raw, err := s.readLine()
		switch {
		case errors.Is(err, io.EOF) && len(raw) == 0:
			s.err = io.EOF
			continue
		case errors.Is(err, io.EOF):
			s.err = io.EOF
		case err != nil:
			s.err = err
			continue
		}
		if data, ok := bytes.CutPrefix(raw, []byte("data:")); ok {
			return bytes.TrimSpace(data), nil
		}
	}
	return nil, s.err
}

// readLine returns the next line without its end of line, bounded by
// MaxLine; io.EOF comes with the last line when it has no newline.
func (s *Stream) readLine() ([]byte, error) {
	var line []byte
	for {
		part, err := s.br.ReadSlice('\n')
		if len(line)+len(part) > MaxLine {
			return nil, ErrLongLine
		}
		line = append(line, part...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

package api

import (
	"errors"
	"net/http"
)

// sse writes a server-sent event stream (docs/serving.md §5): each
// event is "data: <compact JSON>\n\n", flushed at once.
type sse struct {
	w       http.ResponseWriter
	started bool
}

func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	s.w.WriteHeader(http.StatusOK)
}

// send writes one event.
func (s *sse) send(data []byte) error {
	s.start()
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, '\n', '\n')
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	return http.NewResponseController(s.w).Flush()
}

// done ends the stream.
func (s *sse) done() error { return s.send([]byte("[DONE]")) }

// errStreamEnded stops waiting on a stream's other candidates once one
// of them ended it with an error frame.
var errStreamEnded = errors.New("the stream ended with an error frame")

// failStream sends an error frame, ends the stream, and returns
// errStreamEnded (or the write's error), so that no other candidate
// writes after it.
func failStream(s *sse, e *Error) error {
	if err := s.fail(e); err != nil {
		return err
	}
	return errStreamEnded
}

// fail sends an error frame and ends the stream.
func (s *sse) fail(e *Error) error {
	if err := s.send(marshal(e.body())); err != nil {
		return err
	}
	return s.done()
}

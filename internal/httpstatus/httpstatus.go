// Package httpstatus is what lfmq makes of HTTP status codes on both
// sides: the code a handler answers, recorded for metrics and request logs
// without hiding the writer's other abilities, and whether a client's
// request that got a status is worth another try.
package httpstatus

import "net/http"

// Writer wraps a ResponseWriter and records the first status written:
// the code given to WriteHeader, or 200 when the body comes first. Flush
// passes through (server-sent events need it) and Unwrap lets
// http.ResponseController reach the original writer.
type Writer struct {
	http.ResponseWriter
	// Status is 0 until the handler writes.
	Status int
}

// WriteHeader records code the first time and passes it on.
func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200 if nothing was written before.
func (w *Writer) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the wrapped writer when it can.
func (w *Writer) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

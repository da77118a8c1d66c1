package httpstatus

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestWriter(t *testing.T) {
	tests := []struct {
		name    string
		handler func(w http.ResponseWriter)
		want    int
	}{
		{"nothing written", func(http.ResponseWriter) {}, 0},
		{"body first", func(w http.ResponseWriter) { w.Write([]byte("x")); w.WriteHeader(http.StatusTeapot) }, http.StatusOK},
		{"header first", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound); w.WriteHeader(http.StatusOK) }, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := &Writer{ResponseWriter: rec}
			tt.handler(w)
			if w.Status != tt.want {
				t.Errorf("Status = %d, want %d", w.Status, tt.want)
			}
		})
	}
	rec := httptest.NewRecorder()
	w := &Writer{ResponseWriter: rec}
	w.Flush()
	if !rec.Flushed || w.Unwrap() != rec {
		t.Error("Flush or Unwrap did not reach the wrapped writer")
	}
}

func TestRetryable(t *testing.T) {
	for status, want := range map[int]bool{200: false, 404: false, 409: false, 429: true, 500: true, 501: false, 502: true, 503: true, 505: false, 599: true} {
		if got := Retryable(status); got != want {
			t.Errorf("Retryable(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	for n, want := range map[int]time.Duration{1: 250 * ms, 2: 500 * ms, 3: time.Second, 5: 4 * time.Second, 6: 8 * time.Second, 9: 8 * time.Second} {
		if got := Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

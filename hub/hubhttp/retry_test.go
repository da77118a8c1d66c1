package hubhttp

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryable(t *testing.T) {
	for status, want := range map[int]bool{
		http.StatusOK:                      false,
		http.StatusNotFound:                false,
		http.StatusConflict:                false,
		http.StatusPreconditionFailed:      false,
		http.StatusTooManyRequests:         true,
		http.StatusInternalServerError:     true,
		http.StatusNotImplemented:          false,
		http.StatusBadGateway:              true,
		http.StatusServiceUnavailable:      true,
		http.StatusGatewayTimeout:          true,
		http.StatusHTTPVersionNotSupported: false,
		599:                                true,
	} {
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

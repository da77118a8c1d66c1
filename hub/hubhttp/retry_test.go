package hubhttp

import (
	"net/http"
	"testing"
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

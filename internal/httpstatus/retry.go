package httpstatus

import (
	"net/http"
	"time"
)

// Retryable reports whether an answer of this status is worth sending the
// request again: a rate limit (429) or a server error (5xx), except 501
// Not Implemented and 505 HTTP Version Not Supported, which a second try
// cannot change.
func Retryable(status int) bool {
	return status == http.StatusTooManyRequests ||
		status >= 500 && status != http.StatusNotImplemented && status != http.StatusHTTPVersionNotSupported
}

// Backoff is the wait before retry n (1-based) when the caller sets none:
// 250 ms, doubling, at most 8 s, so that five retries span about 8 s of
// a hub's hiccup. The hub's clients (download, publish) share it.
func Backoff(n int) time.Duration {
	return min(250*time.Millisecond<<(n-1), 8*time.Second)
}

package hubhttp

import "net/http"

// Retryable reports whether an answer with this status is worth another
// try: a rate limit (429) or a server error (5xx), except 501 Not
// Implemented and 505 HTTP Version Not Supported, which say that the
// server will never do what was asked, so that trying again only delays
// the failure.
func Retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500 && status != http.StatusNotImplemented && status != http.StatusHTTPVersionNotSupported
}

package httpstatus

import "net/http"

// Retryable reports whether an answer of this status is worth sending the
// request again: a rate limit (429) or a server error (5xx), except 501
// Not Implemented and 505 HTTP Version Not Supported, which a second try
// cannot change.
func Retryable(status int) bool {
	return status == http.StatusTooManyRequests ||
		status >= 500 && status != http.StatusNotImplemented && status != http.StatusHTTPVersionNotSupported
}

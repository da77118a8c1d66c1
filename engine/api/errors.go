package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/lfmq/lfmq/engine/api/wire"
)

// Error is an API error answer (docs/serving.md §5): an HTTP status
// and the OpenAI error object.
type Error struct {
	Status  int
	Type    string
	Code    string // empty: null
	Param   string // empty: null
	Message string
	// RetryAfter, if positive, is sent as the Retry-After header (seconds).
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("api: %d %s: %s: %s", e.Status, e.Type, e.Param, e.Message)
	}
	return fmt.Sprintf("api: %d %s: %s", e.Status, e.Type, e.Message)
}

// The error types of docs/serving.md §5's table.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
	typeUnavailable    = "unavailable_error"
)

func badRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

func unsupported(param, format string, args ...any) *Error {
	e := badRequest(param, format, args...)
	e.Code = "unsupported_parameter"
	return e
}

func contextExceeded(format string, args ...any) *Error {
	e := badRequest("messages", format, args...)
	e.Code = "context_length_exceeded"
	return e
}

func (e *Error) body() wire.ErrorBody {
	b := wire.ErrorBody{Error: wire.ErrorObject{Message: e.Message, Type: e.Type}}
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// write sends e as the whole response.
func (e *Error) write(w http.ResponseWriter) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	// Messages quote bounds such as ">= 1": without HTML escaping they
	// read as written, as every other body this server writes does.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(e.body())
}

package client

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"
)

// Failure is a request that got no usable answer, as lfmq's commands
// report it: the reporting package (the message's first word), the URL,
// the status (0 when no answer came) and the server's message, or the
// cause. Each caller reads the message out of the answer its own way.
type Failure struct {
	Who    string // "bench", "task": the message's prefix
	URL    string
	Status int
	Msg    string
	Err    error
}

func (e *Failure) Error() string {
	switch {
	case e.Status == 0 && errors.Is(e.Err, syscall.ECONNREFUSED):
		return fmt.Sprintf("%s: no server answering at %s", e.Who, e.URL)
	case e.Status == 0 && e.Err != nil:
		return fmt.Sprintf("%s: %s: %v", e.Who, e.URL, e.Err)
	case e.Status == http.StatusUnauthorized:
		return fmt.Sprintf("%s: %s: HTTP 401 %s; give the key with --api-key-file or LFMQ_API_KEY", e.Who, e.URL, e.Msg)
	}
	return fmt.Sprintf("%s: %s: HTTP %d %s", e.Who, e.URL, e.Status, e.Msg)
}

func (e *Failure) Unwrap() error { return e.Err }

// Fail frames err, an error of Do or Models, as a Failure of who: msg
// reads the server's message out of a refusal; a body over limit says so.
// Other errors (ctx's end) are returned as they are.
func Fail(who string, err error, limit int64, msg func(*Error) string) error {
	var ce *Error
	var be *BodyError
	var de *DecodeError
	switch {
	case errors.As(err, &ce) && ce.Status == 0:
		return &Failure{Who: who, URL: ce.URL, Err: ce.Err}
	case errors.As(err, &ce):
		return &Failure{Who: who, URL: ce.URL, Status: ce.Status, Msg: msg(ce)}
	case errors.As(err, &be) && be.TooLarge():
		return &Failure{Who: who, URL: be.URL, Status: be.Status, Msg: fmt.Sprintf("the answer is over %d bytes", limit)}
	case errors.As(err, &be):
		return &Failure{Who: who, URL: be.URL, Err: be.Err}
	case errors.As(err, &de):
		return &Failure{Who: who, URL: de.URL, Status: http.StatusOK, Msg: "not a model list: " + de.Err.Error()}
	}
	return err
}

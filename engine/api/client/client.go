package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lfmq/lfmq/internal/bounded"
)

// ErrorLimit bounds the body read from an error answer: an OpenAI error
// object is a few hundred bytes.
const ErrorLimit = 64 << 10

// Client sends requests to one server.
type Client struct {
	// URL is the base URL, scheme://host[:port]; routes are under /v1.
	URL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// HTTP sends the requests (http.DefaultClient when nil).
	HTTP *http.Client
}

// Request is one request: a route below URL and an optional JSON body.
type Request struct {
	Method string // GET without a body, POST with one, when empty
	Path   string // the route, e.g. "/v1/models"
	Body   []byte // JSON; nil for none
	// Accept is the Accept header; none is sent when empty.
	Accept string
}

// Error is a request that got no usable answer: none at all (Status 0,
// Err the cause, without the *url.Error layer whose text repeats the
// URL), or an answer with a status other than 2xx.
type Error struct {
	Method string
	URL    string // the request's URL
	Status int    // 0 when no answer came
	// Object is the answer's "error" member as sent: an OpenAI error
	// object, or a bare string from some servers; nil when the body held
	// none. Type, Code and Message are read from the object (a numeric
	// code as its digits).
	Object              json.RawMessage
	Type, Code, Message string
	// Body is the start of the answer (ErrorLimit bytes at most).
	Body []byte
	// RetryAfter and Location are the answer's headers.
	RetryAfter, Location string
	// Retries counts the attempts repeated after refusals (Busy).
	Retries int
	Err     error
}

func (e *Error) Error() string {
	where := e.Method + " " + e.URL
	if e.Status == 0 {
		return fmt.Sprintf("client: %s: %v", where, e.Err)
	}
	return fmt.Sprintf("client: %s: HTTP %d %s", where, e.Status, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Busy reports whether the server refused for now and asks to be asked
// again: 429 (its queue is full) or 503 (not ready yet), but not a 503
// shutting_down.
func (e *Error) Busy() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable && e.Code != "shutting_down"
}

// BodyError is a 2xx answer whose body could not be used: it broke off
// (Err the cause) or it is over the caller's limit (Err a
// *bounded.TooLargeError).
type BodyError struct {
	URL    string
	Status int
	Err    error
}

func (e *BodyError) Error() string { return fmt.Sprintf("client: %s: %v", e.URL, e.Err) }

func (e *BodyError) Unwrap() error { return e.Err }

// TooLarge reports whether the body was over the limit.
func (e *BodyError) TooLarge() bool {
	var big *bounded.TooLargeError
	return errors.As(e.Err, &big)
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Send sends r once. A 2xx answer is returned with its body open for the
// caller to read and close; anything else is an *Error (the body read and
// closed).
func (c *Client) Send(ctx context.Context, r Request) (*http.Response, error) {
	u := c.URL + r.Path
	method := r.Method
	if method == "" {
		method = http.MethodGet
		if r.Body != nil {
			method = http.MethodPost
		}
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, &Error{Method: method, URL: u, Err: err}
	}
	if r.Accept != "" {
		req.Header.Set("Accept", r.Accept)
	}
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, &Error{Method: method, URL: u, Err: unwrapURL(err)}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, ErrorLimit))
	e := &Error{Method: method, URL: u, Status: resp.StatusCode, Body: b,
		RetryAfter: resp.Header.Get("Retry-After"), Location: resp.Header.Get("Location")}
	e.Object, e.Type, e.Code, e.Message = Envelope(b)
	return nil, e
}

// Envelope reads an error answer's body as OpenAI's envelope,
// {"error": {"message", "type", "code"}}: the error member as sent (nil
// when the body has none, or null) and what its object says. OpenAI's code
// is a string or null; a number some servers send is kept as its digits.
func Envelope(body []byte) (object json.RawMessage, typ, code, message string) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 || string(env.Error) == "null" {
		return nil, "", "", ""
	}
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(env.Error, &e) != nil {
		return env.Error, "", "", ""
	}
	if json.Unmarshal(e.Code, &code) != nil && len(e.Code) > 0 && string(e.Code) != "null" {
		code = string(e.Code)
	}
	return env.Error, e.Type, code, e.Message
}

// Retry bounds how a request the server refused for now (Error.Busy) is
// sent again.
type Retry struct {
	// Max bounds the attempts repeated; none when 0 and For is 0.
	Max int
	// For bounds the time spent retrying, from the first refusal: a wait
	// that would end after it is not begun.
	For time.Duration
	// Timeout bounds one attempt (no bound when 0).
	Timeout time.Duration
}

// Do sends r, retrying as retry allows, and returns the body of the 2xx
// answer: at most limit bytes (more, or a body that breaks off, is a
// *BodyError), read into a buffer sized for hint bytes. The wait before a retry
// is the server's Retry-After, but at least a backoff that grows from
// 10 ms to 1 s, so that a server answering "Retry-After: 0" forever is not
// hammered. A refusal that is not retried is the last *Error with its
// Retries set; ctx's end while waiting is ctx.Err().
func (c *Client) Do(ctx context.Context, r Request, limit, hint int64, retry Retry) ([]byte, error) {
	var deadline time.Time
	for retries := 0; ; retries++ {
		data, err := c.once(ctx, r, limit, hint, retry.Timeout)
		var e *Error
		if !errors.As(err, &e) || e.Status == 0 {
			return data, err
		}
		e.Retries = retries
		if !e.Busy() {
			return nil, e
		}
		now := time.Now()
		if deadline.IsZero() && retry.For > 0 {
			deadline = now.Add(retry.For)
		}
		wait := max(RetryAfter(e.RetryAfter, now), min(10*time.Millisecond<<min(retries, 7), time.Second))
		switch {
		case retry.Max == 0 && retry.For == 0,
			retry.Max > 0 && retries >= retry.Max,
			!deadline.IsZero() && now.Add(wait).After(deadline):
			return nil, e
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Client) once(ctx context.Context, r Request, limit, hint int64, timeout time.Duration) ([]byte, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	resp, err := c.Send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// Sized once (a completion's log-prob rows are hundreds of
	// megabytes for a real model): the answer's Content-Length, when it
	// gives one, wins over the caller's guess.
	if resp.ContentLength >= 0 {
		hint = resp.ContentLength
	}
	data, err := bounded.ReadSized(resp.Body, limit, hint)
	if err != nil {
		return nil, &BodyError{URL: c.URL + r.Path, Status: resp.StatusCode, Err: err}
	}
	return data, nil
}

// RetryAfter reads a Retry-After header: delay seconds or an HTTP date,
// never less than 0; one second when it is absent or unreadable.
func RetryAfter(h string, now time.Time) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return time.Second
}

// unwrapURL drops the *url.Error layer, whose text repeats the URL that
// an Error names already.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

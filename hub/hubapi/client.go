package hubapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lfmq/lfmq/internal/httpstatus"
	"github.com/lfmq/lfmq/verify/sums"
)

// DefaultEndpoint is the Hugging Face hub.
const DefaultEndpoint = "https://huggingface.co"

// maxErrorBody bounds the bytes read from an error answer.
const maxErrorBody = 64 << 10

// Client sends requests to one hub endpoint, for a read (Remote) or a
// publish (package publish): it adds the token only to the endpoint's
// scheme and host, retries what may be retried, and turns error answers
// into *HubError.
type Client struct {
	http    *http.Client
	base    *url.URL
	token   string
	retries int
	backoff func(n int) time.Duration
	// reading is set for a Remote's client: its errors are reads of the
	// hub ("hub: "), not a publish's ("publish: ").
	reading bool
}

// NewClient returns a client of the endpoint base (checked by CheckRepo)
// over hc (nil: a default one with a 5-minute header timeout); retries
// and backoff are as RetryDefaults returns them. It copies hc to add a
// redirect rule that drops the Authorization header on any hop away from
// the endpoint's host: Go's client already drops it for other domains,
// but keeps it for their subdomains, and the hub's object storage may
// live on one.
func NewClient(hc *http.Client, base *url.URL, token string, retries int, backoff func(int) time.Duration) *Client {
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = 5 * time.Minute
		hc = &http.Client{Transport: tr}
	}
	c := *hc
	inner := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(req.URL, base) {
			req.Header.Del("Authorization")
		}
		if inner != nil {
			return inner(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &Client{http: &c, base: base, token: token, retries: retries, backoff: backoff}
}

// RetryDefaults fills in the retry settings of a client: 0 retries means
// the default 5, a negative number none; the default backoff is
// 250ms·2^(n-1), at most 8 s.
func RetryDefaults(retries int, backoff func(int) time.Duration) (int, func(int) time.Duration) {
	switch {
	case retries == 0:
		retries = 5
	case retries < 0:
		retries = 0
	}
	if backoff == nil {
		backoff = httpstatus.Backoff
	}
	return retries, backoff
}

// CheckRepo parses the endpoint and checks the OWNER/NAME repository id,
// without contacting the hub.
func CheckRepo(endpoint, repo string) (*url.URL, error) {
	return checkRepo(endpoint, repo, false)
}

// checkRepo is CheckRepo, its messages those of a read when reading.
func checkRepo(endpoint, repo string, reading bool) (*url.URL, error) {
	base, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("%sendpoint: %w", prefix(reading), err)
	}
	if base.Scheme != "http" && base.Scheme != "https" || base.Host == "" || base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("%sendpoint %q: want http(s)://host[/path], without user info, query or fragment", prefix(reading), base.Redacted())
	}
	if !sums.ValidRepo(repo) {
		return nil, fmt.Errorf("%srepository %q is not OWNER/NAME of [A-Za-z0-9._-]", prefix(reading), repo)
	}
	return base, nil
}

// sameOrigin reports whether u has base's scheme and host (with port).
func sameOrigin(u, base *url.URL) bool {
	return strings.EqualFold(u.Scheme, base.Scheme) && strings.EqualFold(u.Host, base.Host)
}

// Redact returns u without user info, query or fragment, for messages:
// upload URLs carry signatures in their query.
func Redact(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment, v.ForceQuery = nil, "", "", false
	return v.String()
}

// scrub removes the token from a text that came from elsewhere (a hub
// message), should it ever echo it.
func (c *Client) scrub(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "[token]")
}

// URL returns the endpoint's URL for a path of escaped segments.
func (c *Client) URL(escapedPath string) *url.URL {
	u := *c.base
	u.Path = strings.TrimSuffix(c.base.Path, "/") + "/" + escapedPath
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + "/" + escapedPath
	if p, err := url.PathUnescape(u.RawPath); err == nil {
		u.Path = p
	}
	u.RawQuery = ""
	return &u
}

// Call describes one request: Build builds it afresh for every attempt
// (so that a body can be sent again), OK lists the statuses returned to
// the caller, Retry says which other statuses are tried again (default
// httpstatus.Retryable). Failed, if set, is told after each failed
// attempt. Op names the step in errors (HubError.Op).
type Call struct {
	Op     string
	Build  func() (*http.Request, error)
	OK     []int
	Retry  func(status int) bool
	Failed func()
}

// Do sends cl, retrying network errors and retryable statuses with
// backoff. It returns the response (body open) when its status is in
// cl.OK, otherwise a *HubError or *NetError. The token goes only to the
// endpoint's scheme and host, so a request to an object store's URL
// carries none.
func (c *Client) Do(ctx context.Context, cl Call) (*http.Response, error) {
	retry := cl.Retry
	if retry == nil {
		retry = httpstatus.Retryable
	}
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if cl.Failed != nil {
				cl.Failed()
			}
			if attempt > c.retries {
				return nil, last
			}
			t := time.NewTimer(c.backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		req, err := cl.Build()
		if err != nil {
			return nil, err
		}
		req = req.WithContext(ctx)
		if c.token != "" && req.Header.Get("Authorization") == "" && sameOrigin(req.URL, c.base) {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // its message repeats the URL, query included
			}
			last = &NetError{Op: cl.Op, Method: req.Method, URL: Redact(req.URL), Err: err, Reading: c.reading}
			continue
		}
		for _, s := range cl.OK {
			if resp.StatusCode == s {
				return resp, nil
			}
		}
		last = c.hubError(cl.Op, req, resp)
		if !retry(resp.StatusCode) {
			return nil, last
		}
	}
}

// hubError reads an error answer (bounded) and closes it.
func (c *Client) hubError(op string, req *http.Request, resp *http.Response) *HubError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return &HubError{
		Op: op, Method: req.Method, URL: Redact(req.URL), Status: resp.StatusCode,
		Code:      resp.Header.Get("X-Error-Code"),
		Message:   c.scrub(hubMessage(resp.Header, body)),
		RequestID: c.scrub(resp.Header.Get("X-Request-Id")),
		Reading:   c.reading,
	}
}

// hubMessage collects the hub's explanations of an error: the
// X-Error-Message header, then from a JSON body "error" (a string or a
// list), "errors"[].message and "message" (the LFS API's field), else a
// short non-HTML text body; duplicates dropped, joined with "; ".
func hubMessage(h http.Header, body []byte) string {
	var msgs []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) > 500 {
			s = s[:500] + "…"
		}
		for _, m := range msgs {
			if strings.EqualFold(m, s) {
				return
			}
		}
		if s != "" {
			msgs = append(msgs, s)
		}
	}
	add(h.Get("X-Error-Message"))
	var j struct {
		Error   json.RawMessage            `json:"error"`
		Errors  []struct{ Message string } `json:"errors"`
		Message string                     `json:"message"`
	}
	if json.Unmarshal(body, &j) == nil {
		var one string
		var many []string
		switch {
		case json.Unmarshal(j.Error, &one) == nil:
			add(one)
		case json.Unmarshal(j.Error, &many) == nil:
			for _, m := range many {
				add(m)
			}
		}
		for _, e := range j.Errors {
			add(e.Message)
		}
		add(j.Message)
	} else if ct := h.Get("Content-Type"); !strings.Contains(strings.ToLower(ct), "html") && len(body) > 0 && !strings.HasPrefix(strings.TrimSpace(string(body)), "<") {
		add(string(body))
	}
	return strings.Join(msgs, "; ")
}

// ReadJSON reads a JSON answer of at most limit bytes, decodes it into v
// (unless v is nil) and closes it; it returns the bytes read.
func ReadJSON(resp *http.Response, limit int64, v any) ([]byte, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errors.New("answer larger than the limit")
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// nextLink returns the rel="next" target of a Link header, resolved
// against the request URL.
func nextLink(h http.Header, reqURL *url.URL) (*url.URL, bool) {
	for _, v := range h.Values("Link") {
		for v != "" {
			start := strings.IndexByte(v, '<')
			end := strings.IndexByte(v, '>')
			if start < 0 || end < start {
				break
			}
			target := v[start+1 : end]
			rest := v[end+1:]
			params, after, _ := strings.Cut(rest, ",")
			v = after
			for p := range strings.SplitSeq(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "next") {
						u, err := reqURL.Parse(target)
						if err != nil {
							return nil, false
						}
						return u, true
					}
				}
			}
		}
	}
	return nil, false
}

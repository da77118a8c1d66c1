package publish

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lfmq/lfmq/internal/httpstatus"
)

// maxErrorBody bounds the bytes read from an error answer.
const maxErrorBody = 64 << 10

// client sends the requests of one publish: it adds the token only to the
// endpoint's scheme and host, retries what may be retried, and turns
// error answers into *HubError.
type client struct {
	http    *http.Client
	base    *url.URL
	token   string
	retries int
	backoff func(n int) time.Duration
}

// newClient returns a client over hc (nil: a default one). It copies hc
// to add a redirect rule that drops the Authorization header on any hop
// away from the endpoint's host: Go's client already drops it for other
// domains, but keeps it for their subdomains, and the hub's object
// storage may live on one.
func newClient(hc *http.Client, base *url.URL, token string, retries int, backoff func(int) time.Duration) *client {
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
	return &client{http: &c, base: base, token: token, retries: retries, backoff: backoff}
}

// sameOrigin reports whether u has base's scheme and host (with port).
func sameOrigin(u, base *url.URL) bool {
	return strings.EqualFold(u.Scheme, base.Scheme) && strings.EqualFold(u.Host, base.Host)
}

// redact returns u without user info, query or fragment, for messages.
func redact(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.Fragment, v.ForceQuery = nil, "", "", false
	return v.String()
}

// scrub removes the token from a text that came from elsewhere (a hub
// message), should it ever echo it.
func (c *client) scrub(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "[token]")
}

// api returns the endpoint's URL for a path of escaped segments.
func (c *client) api(escapedPath string) *url.URL {
	u := *c.base
	u.Path = strings.TrimSuffix(c.base.Path, "/") + "/" + escapedPath
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + "/" + escapedPath
	if p, err := url.PathUnescape(u.RawPath); err == nil {
		u.Path = p
	}
	u.RawQuery = ""
	return &u
}

// call describes one request: mk builds it afresh for every attempt (so
// that a body can be sent again), ok lists the statuses returned to the
// caller, retry says which other statuses are tried again (default
// httpstatus.Retryable). failed, if set, is told after each failed attempt.
type call struct {
	op     string
	mk     func() (*http.Request, error)
	ok     []int
	retry  func(status int) bool
	failed func()
}

// do sends c, retrying network errors and retryable statuses with
// backoff. It returns the response (body open) when its status is in
// ok, otherwise a *HubError or *NetError.
func (c *client) do(ctx context.Context, cl call) (*http.Response, error) {
	retry := cl.retry
	if retry == nil {
		retry = httpstatus.Retryable
	}
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if cl.failed != nil {
				cl.failed()
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
		req, err := cl.mk()
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
			last = &NetError{Op: cl.op, Method: req.Method, URL: redact(req.URL), Err: err}
			continue
		}
		for _, s := range cl.ok {
			if resp.StatusCode == s {
				return resp, nil
			}
		}
		last = c.hubError(cl.op, req, resp)
		if !retry(resp.StatusCode) {
			return nil, last
		}
	}
}

// hubError reads an error answer (bounded) and closes it.
func (c *client) hubError(op string, req *http.Request, resp *http.Response) *HubError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return &HubError{
		Op: op, Method: req.Method, URL: redact(req.URL), Status: resp.StatusCode,
		Code:      resp.Header.Get("X-Error-Code"),
		Message:   c.scrub(hubMessage(resp.Header, body)),
		RequestID: c.scrub(resp.Header.Get("X-Request-Id")),
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

// readJSON decodes a bounded JSON body into v and closes it.
func readJSON(resp *http.Response, limit int64, v any) ([]byte, error) {
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

package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"": time.Second, "0": 0, "3": 3 * time.Second, "-2": 0, "soon": time.Second,
		"Wed, 01 Jan 2025 00:00:05 GMT": 5 * time.Second, "Tue, 31 Dec 2024 00:00:00 GMT": 0,
	} {
		if got := RetryAfter(h, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", h, got, want)
		}
	}
}

func TestEnvelope(t *testing.T) {
	for body, want := range map[string][4]string{
		`{"error":{"message":"m","type":"t","code":"c"}}`: {`{"message":"m","type":"t","code":"c"}`, "t", "c", "m"},
		`{"error":{"message":"m","code":429}}`:            {`{"message":"m","code":429}`, "", "429", "m"},
		`{"error":"busy"}`:                                {`"busy"`, "", "", ""},
		`{"error":null}`:                                  {"", "", "", ""},
		`not JSON`:                                        {"", "", "", ""},
	} {
		obj, typ, code, msg := Envelope([]byte(body))
		if got := [4]string{string(obj), typ, code, msg}; got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

// TestDo: the key is sent, a refusal is retried after its Retry-After, a
// shutting_down 503 and other errors are not, an answer over the limit is
// a BodyError.
func TestDo(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"message":"no key","type":"authentication_error"}}`, 401)
			return
		}
		switch r.URL.Path {
		case "/busy":
			if n == 1 {
				w.Header().Set("Retry-After", "0")
				http.Error(w, `{"error":{"message":"full","type":"rate_limit_error"}}`, 429)
				return
			}
			io.WriteString(w, "ok")
		case "/down":
			http.Error(w, `{"error":{"message":"bye","code":"shutting_down"}}`, 503)
		default:
			io.WriteString(w, "0123456789")
		}
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, APIKey: "k"}
	ctx := context.Background()
	if b, err := c.Do(ctx, Request{Path: "/busy"}, 10, 0, Retry{Max: 2}); err != nil || string(b) != "ok" || calls.Load() != 2 {
		t.Errorf("busy once: %q, %v after %d calls", b, err, calls.Load())
	}
	calls.Store(0)
	var e *Error
	if _, err := c.Do(ctx, Request{Path: "/down"}, 10, 0, Retry{Max: 2}); !errors.As(err, &e) || e.Status != 503 || e.Busy() || e.Code != "shutting_down" || e.Message != "bye" || calls.Load() != 1 {
		t.Errorf("shutting down: %v after %d calls", err, calls.Load())
	}
	var be *BodyError
	if _, err := c.Do(ctx, Request{Path: "/big"}, 9, 0, Retry{}); !errors.As(err, &be) || !be.TooLarge() || be.URL != srv.URL+"/big" {
		t.Errorf("over the limit: %v", err)
	}
	var f *Failure
	err := Fail("x", func() error { _, err := (&Client{URL: srv.URL}).Do(ctx, Request{Path: "/"}, 9, 0, Retry{}); return err }(), 9, func(e *Error) string { return e.Message })
	if !errors.As(err, &f) || f.Status != 401 || err.Error() != "x: "+srv.URL+"/: HTTP 401 no key; give the key with --api-key-file or LFMQ_API_KEY" {
		t.Errorf("401: %v", err)
	}
	srv.Close()
	_, err = c.Do(ctx, Request{Path: "/"}, 9, 0, Retry{})
	if !errors.As(err, &e) || e.Status != 0 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("no server: %v", err)
	}
	if got := Fail("x", err, 9, nil).Error(); got != "x: no server answering at "+srv.URL+"/" {
		t.Errorf("no server: %s", got)
	}
}

func TestStream(t *testing.T) {
	s := NewStream(strings.NewReader(": ping\r\nevent: message\r\ndata: {\"a\":1}\r\n\r\ndata:[DONE]"))
	var got []string
	for {
		data, err := s.Next()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		got = append(got, string(data))
	}
	if strings.Join(got, "|") != `{"a":1}|[DONE]` || s.Line() != 5 {
		t.Errorf("%q, line %d", got, s.Line())
	}
	s = NewStream(strings.NewReader("data: x\n" + strings.Repeat("y", MaxLine+1) + "\n"))
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); !errors.Is(err, ErrLongLine) || s.Line() != 2 {
		t.Errorf("long line: %v at line %d", err, s.Line())
	}
}
